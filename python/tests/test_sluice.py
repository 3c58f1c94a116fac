"""The sluice Python package, end to end on the local engine: each job's
output is checked against an answer computed here in plain Python."""

import collections
import os
import pathlib
import sys
import threading

import pytest

import sluice

WORDS = ["apple", "banana", "cherry", "date", "elder", "fig", "grape", "kiwi", "lime", "mango"]


def write_lines(path, lines):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.fixture
def text(tmp_path):
    """Three files of words, enough lines to make several splits."""
    d = tmp_path / "in"
    for f in range(3):
        lines = [" ".join(WORDS[(i * 7 + j * f + j) % len(WORDS)] for j in range(i % 9)) for i in range(3000)]
        write_lines(d / ("f%d.txt" % f), lines)
    return d


def counter_of(d):
    c = collections.Counter()
    for p in sorted(pathlib.Path(d).iterdir()):
        for line in p.read_text(encoding="utf-8").splitlines():
            c.update(line.split())
    return c


def wc_mapper(line):
    for w in line.split():
        yield w, 1


def wc_reducer(word, counts):
    yield word, sum(counts)


@pytest.mark.parametrize("in_process", [False, True])
def test_word_count_of_functions_matches_counter(text, tmp_path, in_process):
    out = tmp_path / "out"
    job = sluice.Job(mapper=wc_mapper, combiner=wc_reducer, reducer=wc_reducer)
    report = job.run(text, out, reducers=3, threads=2, split_size=20_000, in_process=in_process)
    want = counter_of(text)
    got = list(sluice.read_output(out))
    assert dict(got) == dict(want)
    assert len(got) == len(want)
    assert report["output_records"] == len(want)
    assert report["reducers"] == 3
    assert report["maps"] > 3
    assert sorted(p.name for p in out.glob("part-*")) == ["part-r-0000%d" % i for i in range(3)]
    # Within a partition keys come sorted.
    for part in out.glob("part-*"):
        keys = [k for k, _ in sluice.read_output(part)]
        assert keys == sorted(keys)
    assert report["counters"]["COMBINE_INPUT_RECORDS"] == sum(want.values())


class LineStats(sluice.Job):
    """A class job with per-task state: each map task counts its lines and
    words and gives the totals in mapper_final; the reducer adds them."""

    def mapper_init(self):
        self.lines = 0
        self.words = 0

    def mapper(self, line):
        self.lines += 1
        self.words += len(line.split())

    def mapper_final(self):
        yield "lines", self.lines
        yield "words", self.words

    def reducer_init(self):
        self.groups = 0

    def reducer(self, key, values):
        self.groups += 1
        yield key, sum(values)

    def reducer_final(self):
        yield "groups seen by a reducer", self.groups


def test_class_job_keeps_state_per_task(text, tmp_path):
    out = tmp_path / "out"
    report = LineStats().run(text, out, reducers=1, threads=2, split_size=20_000)
    got = dict(sluice.read_output(out))
    c = counter_of(text)
    assert got["lines"] == 9000
    assert got["words"] == sum(c.values())
    assert got["groups seen by a reducer"] == 2
    assert report["maps"] > 3


def test_map_only_job_writes_raw_text_and_keys_alone(tmp_path):
    src = write_lines(tmp_path / "in.txt", ["a 1", "b 2", "skip", "c 3"])

    def mapper(line):
        parts = line.split()
        if len(parts) == 2:
            yield parts[0].upper(), int(parts[1]) * 10
        else:
            yield "alone:" + line, None

    out = tmp_path / "out"
    report = sluice.Job(mapper=mapper, output_format="raw").run(src, out)
    assert report["reducers"] == 0
    lines = sorted(
        line for p in out.glob("part-*") for line in p.read_text().splitlines()
    )
    assert lines == ["A\t10", "B\t20", "C\t30", "alone:skip"]
    got = sorted(sluice.read_output(out, format="raw"))
    assert got == [("A", "10"), ("B", "20"), ("C", "30"), ("alone:skip", None)]


@pytest.mark.parametrize("in_process", [False, True])
def test_partitioner_places_keys_and_ints_sort_as_numbers(tmp_path, in_process):
    nums = [-(10**12), -300, -2, -1, 0, 1, 2, 7, 255, 256, 10**15]
    src = write_lines(tmp_path / "in.txt", [str(n) for n in nums * 3])

    def mapper(line):
        n = int(line)
        yield n, 1

    out = tmp_path / "out"
    def count(k, vs):
        return [(k, sum(vs))]

    # The combiner keeps its pairs' partition: the partitioner is asked
    # only with the reducers' number.
    job = sluice.Job(
        mapper=mapper,
        combiner=count,
        reducer=count,
        partitioner=lambda k, n: (0 if k < 0 else 1) % n,
    )
    job.run(src, out, reducers=2, in_process=in_process)
    neg = list(sluice.read_output(out / "part-r-00000"))
    pos = list(sluice.read_output(out / "part-r-00001"))
    assert neg == [(n, 3) for n in nums if n < 0]
    assert pos == [(n, 3) for n in nums if n >= 0]


def test_keys_and_values_of_many_types_survive_the_shuffle(tmp_path):
    src = write_lines(tmp_path / "in.txt", ["x"])
    pairs = [
        (("b", 2), 1.5),
        (("b", 10), [1, "two", None]),
        (("a", -1), {"k": [1, 2]}),
        (("a", -1), b"by\x00tes".decode("latin-1")),
        ((), True),
        (("tab\there", "new\nline"), "ünïcödé"),
    ]

    def mapper(line):
        return pairs

    def reducer(key, values):
        yield key, sorted(values, key=repr)

    out = tmp_path / "out"
    sluice.Job(mapper=mapper, reducer=reducer).run(src, out, reducers=1)
    got = list(sluice.read_output(out))
    want = collections.defaultdict(list)
    for k, v in pairs:
        want[k].append(v)
    # JSON gives tuples back as lists; keys come in tuple order.
    expect = [(list(k), sorted(v, key=repr)) for k, v in sorted(want.items())]
    assert [(k, v) for k, v in got] == [
        (k, [list(x) if isinstance(x, tuple) else x for x in v]) for k, v in expect
    ]


def test_codec_orders_as_python_within_a_type():
    groups = [
        [-(2**63), -(10**9), -1, 0, 1, 2, 255, 256, 2**63 - 1],
        [float("-inf"), -1e300, -2.5, -0.0, 1e-300, 2.5, 1e300, float("inf")],
        ["", "a", "a\x00", "a\x00b", "ab", "b", "é", "\U0001f600"],
        [(), ("a",), ("a", ""), ("a", "\x00"), ("a", "b"), ("b",)],
        [(1, 2), (1, 10), (2, -5), (10, 0)],
        [b"", b"\x00", b"\x00\x00", b"\x01", b"\xff"],
    ]
    for g in groups:
        enc = [sluice.encode(x) for x in g]
        assert sorted(enc) == enc, g
        assert [sluice.decode(e) for e in enc] == g
    # Anything else is pickled and comes back equal.
    for obj in [{"a": [1, 2]}, {1, 2}, 2**80, [1, (2, {"x": None})]]:
        assert sluice.decode(sluice.encode(obj)) == obj
    with pytest.raises(ValueError, match="not a Sluice-encoded"):
        sluice.decode(b"\x06abc\x00junk"[:1] + b"\xfe")


@pytest.mark.parametrize("in_process", [False, True])
def test_an_exception_fails_the_job_with_its_traceback_and_line(tmp_path, in_process):
    src = write_lines(tmp_path / "in.txt", ["1", "2", "oops", "4"])

    def mapper(line):
        yield int(line), 1

    out = tmp_path / "out"
    with pytest.raises(sluice.JobFailed) as info:
        sluice.Job(mapper=mapper, reducer=wc_reducer).run(src, out, in_process=in_process)
    msg = str(info.value)
    assert "ValueError" in msg and "invalid literal for int()" in msg
    assert "while mapping the line 'oops'" in msg
    assert "in mapper" in msg  # the user's frame in the traceback
    assert isinstance(info.value.__cause__, ValueError)
    assert not out.exists(), "a failed job commits no output"


def _children_running(name):
    """Processes whose parent is this one and whose command has ``name``."""
    found = []
    for d in pathlib.Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            cmd = (d / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == os.getpid() and name.encode() in cmd and " Z " not in stat:
            found.append(int(d.name))
    return found


def test_functions_run_in_processes_of_their_own(text, tmp_path, capfd):
    parent = os.getpid()

    def mapper(line):
        if os.getpid() != parent:
            print("printed by a mapper")  # to standard error, not into the pipe
            assert sys.stdin.read() == ""  # the request pipe is not the task's stdin
        yield os.getpid(), 1

    def reducer(pid, ones):
        yield pid, sum(ones)

    job = sluice.Job(mapper=mapper, reducer=reducer)
    job.run(text, tmp_path / "out", threads=2, split_size=20_000)
    pids = dict(sluice.read_output(tmp_path / "out"))
    assert sum(pids.values()) == 9000
    assert os.getpid() not in pids
    assert "printed by a mapper" in capfd.readouterr().err
    assert _children_running("sluice._proc") == [], "every process ended with its job"
    job.run(text, tmp_path / "here", threads=2, split_size=20_000, in_process=True)
    assert dict(sluice.read_output(tmp_path / "here")) == {os.getpid(): 9000}


def test_a_process_that_dies_fails_the_job_and_commits_nothing(text, tmp_path):
    def mapper(line):
        if line.startswith("fig"):
            os._exit(3)
        yield line, 1

    out = tmp_path / "out"
    with pytest.raises(sluice.JobFailed, match=r"ended \(exit status: 3\) in the middle of a task"):
        sluice.Job(mapper=mapper, reducer=wc_reducer).run(text, out, threads=2)
    assert not out.exists()
    assert _children_running("sluice._proc") == []


def test_a_job_that_cannot_be_pickled_runs_in_process_with_a_warning(tmp_path):
    src = write_lines(tmp_path / "in.txt", ["a b", "b"])
    lock = threading.Lock()

    def mapper(line):
        with lock:
            for w in line.split():
                yield w, 1

    with pytest.warns(RuntimeWarning, match="cannot be pickled"):
        sluice.Job(mapper=mapper, reducer=wc_reducer).run(src, tmp_path / "out")
    assert dict(sluice.read_output(tmp_path / "out")) == {"a": 1, "b": 2}


def test_an_exception_that_cannot_be_pickled_still_fails_the_job_with_its_text(tmp_path):
    src = write_lines(tmp_path / "in.txt", ["a"])

    class Odd(Exception):
        def __init__(self, a, b):
            super().__init__("odd %s %s" % (a, b))

    def mapper(line):
        raise Odd(1, 2)

    with pytest.raises(sluice.JobFailed, match="odd 1 2") as info:
        sluice.Job(mapper=mapper, reducer=wc_reducer).run(src, tmp_path / "out")
    assert "while mapping the line 'a'" in str(info.value)


def test_a_reducer_exception_names_its_key(tmp_path):
    src = write_lines(tmp_path / "in.txt", ["a b c"])

    def reducer(key, values):
        if key == "b":
            raise KeyError("no b here")
        yield key, len(values)

    with pytest.raises(sluice.JobFailed, match="in the reducer of the key 'b'"):
        sluice.Job(mapper=wc_mapper, reducer=reducer).run(src, tmp_path / "out")


def test_a_mapper_giving_no_pairs_is_a_clear_error(tmp_path):
    src = write_lines(tmp_path / "in.txt", ["a b"])
    with pytest.raises(sluice.JobFailed, match=r"must give \(key, value\) pairs, not 'a'"):
        sluice.Job(mapper=lambda line: line.split()).run(src, tmp_path / "out")


@pytest.mark.parametrize("in_process", [False, True])
def test_lines_that_are_not_utf8(tmp_path, in_process):
    src = tmp_path / "in.txt"
    src.write_bytes(b"good line\nbad \xff\xfe line\n")
    with pytest.raises(sluice.JobFailed, match="the line at byte 10 is not UTF-8"):
        sluice.Job(mapper=wc_mapper, reducer=wc_reducer).run(
            src, tmp_path / "out", in_process=in_process
        )
    assert not (tmp_path / "out").exists()
    job = sluice.Job(mapper=wc_mapper, reducer=wc_reducer, encoding_errors="replace")
    job.run(src, tmp_path / "out2", in_process=in_process)
    got = dict(sluice.read_output(tmp_path / "out2"))
    assert got == {"good": 1, "line": 2, "bad": 1, "\ufffd\ufffd": 1}


def test_an_existing_output_is_left_alone(tmp_path):
    src = write_lines(tmp_path / "in.txt", ["a"])
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep").write_text("mine")
    with pytest.raises(sluice.JobFailed, match="exists"):
        sluice.Job(mapper=wc_mapper).run(src, out)
    assert (out / "keep").read_text() == "mine"


def test_bad_jobs_are_refused_before_running(tmp_path):
    with pytest.raises(TypeError, match="needs a mapper"):
        sluice.Job(reducer=wc_reducer)
    with pytest.raises(TypeError, match="combiner needs a reducer"):
        sluice.Job(mapper=wc_mapper, combiner=wc_reducer)
    with pytest.raises(TypeError, match="unexpected keyword"):
        sluice.Job(mapper=wc_mapper, mapperinit=print)
    with pytest.raises(ValueError, match="output_format"):
        sluice.Job(mapper=wc_mapper, output_format="xml").run(tmp_path, tmp_path / "o")


def test_builtin_word_count_and_its_report(text, tmp_path):
    out = tmp_path / "out"
    report = sluice.run("wordcount", text, out, reducers=2, threads=2)
    assert report["job"] == "wordcount"
    assert report["target"] == "local"
    assert report["input_bytes"] == sum(p.stat().st_size for p in text.iterdir())
    got = {k: int(v) for k, v in sluice.read_output(out, format="raw")}
    assert got == dict(counter_of(text))
    assert "wordcount" in sluice.builtin_jobs()


def test_builtin_job_errors(tmp_path):
    with pytest.raises(sluice.JobFailed, match="wordcount"):
        sluice.run("no-such-job", tmp_path, tmp_path / "o")
    with pytest.raises(sluice.JobFailed):
        sluice.run("wordcount", tmp_path / "missing", tmp_path / "o")
    assert not (tmp_path / "o").exists()


def test_gen_text_then_grep_with_params(tmp_path):
    d = tmp_path / "gen"
    sluice.gen_text(d, 300_000, seed=7)
    size = sum(p.stat().st_size for p in d.iterdir())
    assert 290_000 <= size <= 310_000
    report = sluice.run("grep", d, tmp_path / "out", pattern="^the ")
    want = sum(
        1 for p in d.iterdir() for line in p.read_text().splitlines() if line.startswith("the ")
    )
    assert report["output_records"] >= 1 or want == 0
    assert sum(int(v) for _, v in sluice.read_output(tmp_path / "out", format="raw")) == want


# A cluster: `sluice cluster up` from the binary named by $SLUICE_BIN (the
# test script sets it; without it these tests are skipped).
SLUICE_BIN = os.environ.get("SLUICE_BIN")
needs_cluster = pytest.mark.skipif(not SLUICE_BIN, reason="SLUICE_BIN names no sluice binary")


@pytest.fixture
def cluster(tmp_path, text):
    import subprocess

    def sluice_cli(*args):
        subprocess.run([SLUICE_BIN, *map(str, args)], check=True, capture_output=True)

    d = tmp_path / "cl"
    sluice_cli("cluster", "up", "--workers", "2", "--dir", d)
    try:
        sluice_cli("put", text, "--dataset", "text", "--cluster", d)
        yield d, sluice_cli
    finally:
        subprocess.run([SLUICE_BIN, "cluster", "down", "--dir", str(d)], capture_output=True)


class ClusterWordCount(sluice.Job):
    def mapper(self, line):
        for w in line.split():
            yield w, 1

    def combiner(self, word, counts):
        yield word, sum(counts)

    def reducer(self, word, counts):
        yield word, sum(counts)

    def reducer_final(self):
        yield ("a tuple", 1), None


@needs_cluster
def test_a_python_job_on_a_cluster(cluster, text, tmp_path):
    d, sluice_cli = cluster
    report = ClusterWordCount().run("text", "counts", cluster=d, reducers=2)
    assert report["target"] == "cluster"
    sluice_cli("get", "counts", tmp_path / "got", "--cluster", d)
    got = list(sluice.read_output(tmp_path / "got"))
    finals = [kv for kv in got if kv[0] == ["a tuple", 1]]
    assert finals == [(["a tuple", 1], None)] * 2  # one per reducer
    assert dict(kv for kv in got if kv[0] != ["a tuple", 1]) == dict(counter_of(text))

    # A map-only job of closures, and a failing one.
    suffix = "!"
    sluice.Job(mapper=lambda line: [(line + suffix, len(line))], output_format="raw").run(
        "text", "shout", coordinator=None, cluster=d
    )
    sluice_cli("get", "shout", tmp_path / "shout", "--cluster", d)
    lines = sorted(v for _, v in sluice.read_output(tmp_path / "shout", format="raw"))
    want = sorted(
        str(len(line))
        for p in text.iterdir()
        for line in p.read_text().splitlines()
    )
    assert lines == want

    def broken(line):
        raise RuntimeError("broken mapper")

    with pytest.raises(sluice.JobFailed, match="broken mapper"):
        sluice.Job(mapper=broken).run("text", "never", cluster=d)
    with pytest.raises(ValueError, match="local engine only"):
        sluice.Job(mapper=wc_mapper, reducer=wc_reducer, partitioner=lambda k, n: 0).run(
            "text", "never", cluster=d
        )


@needs_cluster
def test_one_process_talks_to_two_clusters_of_different_cas(cluster, text, tmp_path):
    import json
    import threading

    d, sluice_cli = cluster
    e = tmp_path / "other"
    sluice_cli("cluster", "up", "--workers", "1", "--dir", e)
    try:
        sluice_cli("put", text, "--dataset", "text", "--cluster", e)
        assert (d / "tls" / "ca.pem").read_bytes() != (e / "tls" / "ca.pem").read_bytes()
        want = len(counter_of(text))

        def count(out, **where):
            report = sluice.run("wordcount", "text", out, overwrite=True, **where)
            assert (report["target"], report["output_records"]) == ("cluster", want)
            return report

        # By directory, one cluster after the other and back.
        for i, where in enumerate([d, e, d]):
            count("wc%d" % i, cluster=where)
        # By address, secret and certificates; each cluster's own.
        addr = json.loads((e / "cluster.json").read_text())["coordinator"]
        count("by-addr", coordinator=addr, secret_file=e / "secret", tls_dir=e / "tls")
        # One cluster's certificates do not open the other, and no
        # certificate at all is told what to pass.
        with pytest.raises(sluice.JobFailed, match="invalid peer certificate"):
            count("never", coordinator=addr, secret_file=e / "secret", tls_dir=d / "tls")
        with pytest.raises(sluice.JobFailed, match="--tls-dir"):
            count("never", coordinator=addr, secret_file=e / "secret")
        # Both at once from two threads.
        errors = []

        def on(where, out):
            try:
                count(out, cluster=where)
            except Exception as x:  # noqa: BLE001 - reported below
                errors.append(x)

        threads = [threading.Thread(target=on, args=(w, "both")) for w in (d, e)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
    finally:
        import subprocess

        subprocess.run([SLUICE_BIN, "cluster", "down", "--dir", str(e)], capture_output=True)


TASK_USER = "sluice-task"


def task_user_can_run_python():
    """Whether this machine can run a cluster whose worker runs commands
    as TASK_USER (root, the user scripts/test.sh makes) and that user can
    start this interpreter and import sluice; says why not."""
    import pwd
    import shutil
    import subprocess

    if os.geteuid() != 0:
        return "running commands as another user needs root"
    try:
        pwd.getpwnam(TASK_USER)
    except KeyError:
        return "no user %s (scripts/test.sh creates it)" % TASK_USER
    if not shutil.which("runuser"):
        return "no runuser to check the interpreter with"
    check = subprocess.run(
        ["runuser", "-u", TASK_USER, "--", sys.executable, "-c", "import sluice"],
        capture_output=True, cwd="/",
    )
    if check.returncode != 0:
        return "%s cannot start %s: %s" % (TASK_USER, sys.executable, check.stderr.decode()[-200:])
    return None


@needs_cluster
def test_a_python_job_under_a_task_user_runs_as_that_user(text, tmp_path):
    """A worker started with --task-user runs a Python job's functions as
    that user, in a directory of its own, and the answer is right; the
    same job on a worker without it runs as root."""
    import pwd
    import subprocess

    why = task_user_can_run_python()
    if why:
        pytest.skip(why)
    uid = pwd.getpwnam(TASK_USER).pw_uid

    def mapper(line):
        for w in line.split():
            yield w, 1
        yield ("uid", os.geteuid()), 1

    def reducer(key, counts):
        yield key, sum(counts)

    for flags, want_uid in ((["--task-user", TASK_USER], uid), ([], 0)):
        d = tmp_path / ("cl-%d" % want_uid)
        subprocess.run([SLUICE_BIN, "cluster", "up", "--workers", "1", "--dir", str(d), *flags],
                       check=True, capture_output=True)
        try:
            subprocess.run([SLUICE_BIN, "put", str(text), "--dataset", "text", "--cluster", str(d)],
                           check=True, capture_output=True)
            sluice.Job(mapper=mapper, reducer=reducer).run("text", "counts", cluster=d)
            got = tmp_path / ("got-%d" % want_uid)
            subprocess.run([SLUICE_BIN, "get", "counts", str(got), "--cluster", str(d)],
                           check=True, capture_output=True)
            rows = list(sluice.read_output(got))
            uids = [k[1] for k, _ in rows if isinstance(k, list)]
            assert uids == [want_uid]
            assert dict(kv for kv in rows if not isinstance(kv[0], list)) == dict(counter_of(text))
        finally:
            subprocess.run([SLUICE_BIN, "cluster", "down", "--dir", str(d)], capture_output=True)
