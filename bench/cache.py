#!/usr/bin/env python3
"""Seed 002's table on the embedded cluster: each job cold (no block cached,
the OS page cache dropped) and cached (its blocks in the workers' block
caches from the cold run, the OS page cache dropped again), against the
same cluster with no cache (--cache-size 0), side by side with the
thesis' figures; with --mix, the thesis' concurrent mixes instead:
four applications (grep, word count, the Pavlo aggregation and join), each
in a fair pool capped at 25% of the slots, each submitting its job
--repeat times, on 4 workers with no cache and with a cache smaller than
the data under each admission policy.

Usage: .venv/bin/python bench/cache.py [--size 512MB] [--reps 3] [--plot FILE]
       .venv/bin/python bench/cache.py --mix [--size 256MB] [--repeat 3] [--plot FILE]

Each repetition restarts the cluster (empty caches). The OS page cache is
dropped with `sync; echo 3 > /proc/sys/vm/drop_caches` (root) before every
run. Times are the wall clock of `sluice submit`. Every answer is checked:
grep's matching lines, word count's words and sort's records against
Python's own count and sort of the input, the Pavlo aggregation and join
against DuckDB's answers on the same files, and each cached run's output
against its cold run's.
"""
import argparse
import collections
import hashlib
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
S = os.environ.get("SLUICE_BIN", str(ROOT / "target/release/sluice"))

# The thesis' change with the cache (negative: faster), per workload.
THESIS = {
    "grep": "-35.5%",
    "sort": "-8%",
    "wordcount": "within +-4%",
    "pavlo-agg-large": "-15%",
    "pavlo-join": "-10%",
    "kmeans": "within +-4%",
    "pagerank": "within +-4%",
}


def parse_size(s):
    units = {"KB": 1e3, "MB": 1e6, "GB": 1e9, "KIB": 1024, "MIB": 1 << 20, "GIB": 1 << 30}
    for u, m in sorted(units.items(), key=lambda x: -len(x[0])):
        if s.upper().endswith(u):
            return int(float(s[: -len(u)]) * m)
    return int(s)


def sh(*args, **kw):
    return subprocess.run([str(a) for a in args], check=True, capture_output=True, text=True, **kw)


def drop_os_cache():
    subprocess.run("sync; echo 3 > /proc/sys/vm/drop_caches", shell=True, check=True)


def parts(d):
    """The part files of a directory, or the one file `sluice get` writes
    for a data set of one file."""
    d = pathlib.Path(d)
    return sorted(d.glob("part-*")) if d.is_dir() else [d]


def concat(d):
    h = hashlib.sha256()
    for p in parts(d):
        h.update(p.read_bytes())
    return h.hexdigest()


def text_lines(d):
    for p in sorted(pathlib.Path(d).iterdir()):
        if p.name.startswith(("_", ".")):
            continue
        with open(p, "rb") as f:
            for line in f:
                yield line.rstrip(b"\n")


class Oracle:
    """Independent answers computed once from the input files."""

    def __init__(self, text, pavlo, work):
        self.text, self.pavlo, self.work = text, pavlo, work
        self._cache = {}

    def grep(self):
        if "grep" not in self._cache:
            pat = re.compile(rb"^a[a-z]*")
            self._cache["grep"] = sum(1 for l in text_lines(self.text) if pat.search(l))
        return self._cache["grep"]

    def words(self):
        if "words" not in self._cache:
            c = collections.Counter()
            for l in text_lines(self.text):
                c.update(l.split())
            self._cache["words"] = (sum(c.values()), len(c))
        return self._cache["words"]

    def sorted_sha(self):
        if "sort" not in self._cache:
            lines = sorted(text_lines(self.text))
            h = hashlib.sha256()
            for l in lines:
                h.update(l + b"\n")
            self._cache["sort"] = (len(lines), h.hexdigest())
        return self._cache["sort"]

    def kmeans(self):
        """numpy's Lloyd iterations from the centres Sluice's init job
        picks (run on the local engine)."""
        if "kmeans" not in self._cache:
            init = self.work / "kmeans-init"
            sh(S, "run", "kmeans", *KMEANS, "--iterations", "0", "--input", self.work / "points",
               "--output", init, "-q")
            import numpy as np
            pts = np.vstack([np.loadtxt(p, ndmin=2) for p in parts(self.work / "points")])
            c = np.array([row for _, row in sorted(centre_rows(init))])
            for _ in range(KMEANS_ITERATIONS):
                near_c = ((pts[:, None, :] - c[None, :, :]) ** 2).sum(axis=2).argmin(axis=1)
                for k in range(len(c)):
                    if (near_c == k).any():
                        c[k] = pts[near_c == k].mean(axis=0)
            self._cache["kmeans"] = c.tolist()
        return self._cache["kmeans"]

    def pagerank(self):
        """numpy's power iteration of networkx's formula."""
        if "pagerank" not in self._cache:
            import numpy as np
            files = [p for p in parts(self.work / "graph") if p.stat().st_size]
            edges = np.unique(np.vstack([np.loadtxt(p, dtype=np.int64, ndmin=2) for p in files]), axis=0)
            pages = np.unique(edges)
            n = len(pages)
            src, dst = np.searchsorted(pages, edges[:, 0]), np.searchsorted(pages, edges[:, 1])
            out = np.bincount(src, minlength=n)
            x = np.full(n, 1.0 / n)
            for _ in range(PAGERANK_ITERATIONS):
                share = np.where(out > 0, x / np.maximum(out, 1), 0.0)
                contrib = np.bincount(dst, weights=share[src], minlength=n)
                x = 0.15 / n + 0.85 * (contrib + x[out == 0].sum() / n)
            self._cache["pagerank"] = dict(zip(pages.tolist(), x.tolist()))
        return self._cache["pagerank"]

    def duckdb(self, task):
        if task not in self._cache:
            out = self.work / f"duckdb-{task}.tsv"
            sh(sys.executable, ROOT / "bench/pavlo_duckdb.py", "--task", task,
               "--data", self.pavlo, "--out", out, "--threads", "2", "--runs", "1")
            self._cache[task] = out
        return self._cache[task]


def rows(d):
    out = {}
    for p in parts(d) if pathlib.Path(d).is_dir() else [pathlib.Path(d)]:
        for line in open(p):
            k, v = line.rstrip("\n").split("\t", 1)
            out[k] = v
    return out


def close(a, b):
    x = [float(v) for v in re.split(r"[|\t]", a)]
    y = [float(v) for v in re.split(r"[|\t]", b)]
    return len(x) == len(y) and all(abs(p - q) <= 1e-9 * max(1.0, abs(p)) for p, q in zip(x, y))


def centre_rows(d):
    for p in parts(d):
        for line in open(p):
            i, xs = line.rstrip("\n").split("\t")
            yield int(i), [float(x) for x in xs.split()]


def near(a, b):
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1.0)


def check(name, out, oracle):
    """Raises unless `out` (a directory of parts) is the right answer."""
    if name == "kmeans":
        got = [row for _, row in sorted(centre_rows(out))]
        want = oracle.kmeans()
        assert len(got) == len(want), "kmeans: centres"
        assert all(near(a, b) for g, w in zip(got, want) for a, b in zip(g, w)), \
            "kmeans: centres differ from numpy's"
    elif name == "pagerank":
        got = {}
        for p in parts(out):
            for line in open(p):
                k, v = line.split("\t")
                got[int(k)] = float(v)
        want = oracle.pagerank()
        assert got.keys() == want.keys(), "pagerank: pages differ"
        assert all(abs(got[k] - want[k]) <= 1e-9 * want[k] for k in got), \
            "pagerank: ranks differ from numpy's"
    elif name == "grep":
        n = sum(1 for p in parts(out) for _ in open(p, "rb"))
        assert n == oracle.grep(), f"grep: {n} lines, want {oracle.grep()}"
    elif name == "wordcount":
        total = distinct = 0
        for p in parts(out):
            for line in open(p, "rb"):
                total += int(line.rsplit(b"\t", 1)[1])
                distinct += 1
        assert (total, distinct) == oracle.words(), f"wordcount: {(total, distinct)} != {oracle.words()}"
    elif name == "sort":
        h, n = hashlib.sha256(), 0
        for p in parts(out):
            for line in open(p, "rb"):
                h.update(line)
                n += 1
        assert (n, h.hexdigest()) == oracle.sorted_sha(), "sort: not the sorted input"
    else:
        got, want = rows(out), rows(oracle.duckdb(name))
        assert got.keys() == want.keys(), f"{name}: keys differ from DuckDB's"
        bad = [k for k in got if not close(got[k], want[k])]
        assert not bad, f"{name}: {len(bad)} values differ from DuckDB's"


WORKLOADS = [
    ("grep", ["grep", "--pattern", "^a[a-z]*"], "words"),
    ("sort", ["sort", "--reducers", "2"], "words"),
    ("wordcount", ["wordcount", "--reducers", "2"], "words"),
    ("pavlo-agg-large", ["pavlo-agg-large", "--reducers", "2"], "uv"),
    ("pavlo-join", ["pavlo-join", "--join", "baseline", "--rankings", "rankings",
                    "--reducers", "2"], "uv"),
    ("kmeans", ["kmeans", "--iterations", "5", "--clusters", "10", "--seed", "3"], "points"),
    ("pagerank", ["pagerank", "--iterations", "2", "--reducers", "2"], "graph"),
]

KMEANS = ["--clusters", "10", "--seed", "3"]
KMEANS_ITERATIONS = 5
PAGERANK_ITERATIONS = 2


def cluster(work, up, workers=2, coordinator="", worker=""):
    c = ["--dir", work / "cl"]
    if up:
        sh(S, "cluster", "up", "--workers", workers, "--slots", "1", *c,
           "--coordinator-flags", coordinator, "--worker-flags", worker)
    else:
        subprocess.run([S, "cluster", "down", *map(str, c)], capture_output=True)


def put_all(work):
    conn = ["--cluster", work / "cl"]
    for d, src in [("words", "text"), ("uv", "pavlo/uservisits"), ("rankings", "pavlo/rankings"),
                   ("points", "points"), ("graph", "graph")]:
        sh(S, "put", work / src, "--dataset", d, "--block-size", "32MB", "--replication", "2", *conn)


def data_bytes(work):
    return sum(f.stat().st_size for d in ["text", "pavlo/uservisits", "pavlo/rankings"]
               for f in (work / d).iterdir() if f.is_file())


def mix(a, work, oracle):
    """The concurrent mixes: makespan, runtime per application against no
    cache, mean hit ratio, per cache mode."""
    import threading
    pools = work / "pools.toml"
    pools.write_text("".join(f"[pool.{n}]\nmax_share = 0.25\n" for n, *_ in MIX))
    cache = data_bytes(work) // 8  # per worker: 4 caches hold half the data
    # The oracle's answers first, so that computing them times nothing.
    oracle.grep(), oracle.words()
    for name in ["pavlo-agg-large", "pavlo-join"]:
        oracle.duckdb(name)
    modes = [("none", "--cache-size 0"), ("first", f"--cache-size {cache} --cache-policy first"),
             ("lru", f"--cache-size {cache} --cache-policy lru"),
             ("tinylfu", f"--cache-size {cache} --cache-policy tinylfu")]
    results = {}
    modes = [m for m in modes if m[0] in a.modes.split(",")]
    for mode, flags in modes:
        cluster(work, False)
        subprocess.run(["rm", "-rf", str(work / "cl")])
        cluster(work, True, 4, f"--scheduler fair --pools {pools} {a.coordinator_flags}", flags)
        put_all(work)
        conn = ["--cluster", work / "cl"]
        times, hits, errors = {}, [], []

        spans = []

        def app(name, job, input_set):
            for i in range(a.repeat):
                out, report = f"{name}-{mode}-{i}", work / f"{name}-{mode}-{i}.json"
                t0 = time.monotonic()
                try:
                    sh(S, "submit", *conn, "--pool", name, *job, "--input", input_set,
                       "--output", out, "--report", report, "-q")
                    t1 = time.monotonic()
                    times.setdefault(name, []).append(t1 - t0)
                    spans.append((t0, t1))
                except Exception as e:  # reported after the mix
                    errors.append(f"{out}: {e}")

        drop_os_cache()
        threads = [threading.Thread(target=app, args=m) for m in MIX]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        # From the first submission to the last job's end.
        makespan = max(e for _, e in spans) - min(s for s, _ in spans)
        # Answers, after the timed part.
        work_done = {"map_slot_s": 0.0, "reduce_slot_s": 0.0, "maps_by_level": {},
                     "map_s_by_level": {}}
        for name, *_ in MIX:
            for i in range(a.repeat):
                out = f"{name}-{mode}-{i}"
                got = work / f"got-{out}"
                sh(S, "get", out, got, *conn)
                check(name, got, oracle)
                hits.append(hit_ratio(work / f"{out}.json"))
                add_work(work_done, work / f"{out}.json", name)
        # Slot-seconds the tasks took and the levels their maps ran at:
        # with the makespan, whether a mode costs work or waiting.
        results[mode] = {"makespan_s": makespan, "times": times,
                         "mean_hit_ratio": statistics.mean(hits), **work_done}
        print(json.dumps({mode: results[mode]}), flush=True)
    cluster(work, False)
    base = results["none"]
    print(f"\nmixes: 4 applications x {a.repeat} jobs, {a.size} per data set, 4 workers x 1 slot, "
          f"pools capped at 25%, cache {cache >> 20} MiB per worker where on\n")
    print("| cache | makespan s | vs no cache | " + " | ".join(f"{n} vs no cache" for n, *_ in MIX)
          + " | mean hit ratio |")
    print("|---|---:|---:|" + "---:|" * len(MIX) + "---:|")
    for mode, r in results.items():
        norm = [statistics.mean(r["times"][n]) / statistics.mean(base["times"][n]) for n, *_ in MIX]
        print(f"| {mode} | {r['makespan_s']:.2f} | {r['makespan_s'] / base['makespan_s'] - 1:+.1%} | "
              + " | ".join(f"{x:.2f}" for x in norm) + f" | {r['mean_hit_ratio']:.0%} |")
    print("\nmean seconds of a map, by the level it was launched at (maps):")
    for mode, r in results.items():
        cells = []
        for n, *_ in MIX:
            by = r["map_s_by_level"].get(n, {})
            cells.append(f"{n} " + ", ".join(f"{lvl} {s / k:.3f} ({k})"
                                             for lvl, (s, k) in sorted(by.items())))
        print(f"  {mode}: " + "; ".join(cells))
    if a.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(5, 3))
        ax.bar(list(results), [r["makespan_s"] for r in results.values()])
        ax.set_ylabel("makespan s")
        ax.set_title("Concurrent mixes by cache mode")
        fig.tight_layout()
        fig.savefig(a.plot)


MIX = [
    ("grep", ["grep", "--pattern", "^a[a-z]*"], "words"),
    ("wordcount", ["wordcount", "--reducers", "2"], "words"),
    ("pavlo-agg-large", ["pavlo-agg-large", "--reducers", "2"], "uv"),
    ("pavlo-join", ["pavlo-join", "--join", "baseline", "--rankings", "rankings",
                    "--reducers", "2"], "uv"),
]


def run(work, name, job, input_set, tag):
    conn = ["--cluster", work / "cl"]
    out = f"{name}-{tag}"
    report = work / f"{out}.json"
    drop_os_cache()
    t0 = time.monotonic()
    sh(S, "submit", *conn, *job, "--input", input_set, "--output", out, "--report", report, "-q")
    secs = time.monotonic() - t0
    got = work / f"got-{out}"
    sh(S, "get", out, got, *conn)
    return secs, got, hit_ratio(report)


def add_work(into, report, app):
    """Adds a job's task slot-seconds and maps by level to `into`, and
    its successful map attempts' seconds and count by application and the
    level they were launched at (`map_s_by_level[app][level] = [s, n]`):
    what a map costs when it hits, when it misses (and admits), and with
    no cache."""
    r = json.load(open(report))
    for s in (r if isinstance(r, list) else [r]):
        c = s["cluster"]
        into["map_slot_s"] += c["slots"]["map_slot_s"]
        into["reduce_slot_s"] += c["slots"]["reduce_slot_s"]
        for level, n in c.get("maps_by_level", {}).items():
            into["maps_by_level"][level] = into["maps_by_level"].get(level, 0) + n
        by = into["map_s_by_level"].setdefault(app, {})
        for span in c.get("timeline", []):
            if span["task"].startswith("m") and span["outcome"] == "succeeded":
                acc = by.setdefault(span["level"], [0.0, 0])
                acc[0] += span["end_s"] - span["start_s"]
                acc[1] += 1


def hit_ratio(report):
    """Bytes maps read from cache over all they read, across the stages
    of a multi-stage job (whose report is a list of stage reports)."""
    r = json.load(open(report))
    stages = r if isinstance(r, list) else [r]
    cached = sum(s["cluster"]["cache"]["bytes_from_cache"] for s in stages)
    disk = sum(s["cluster"]["cache"]["bytes_from_disk"] for s in stages)
    return cached / (cached + disk) if cached + disk else 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="512MB")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--plot", default="")
    ap.add_argument("--mix", action="store_true")
    ap.add_argument("--only", default="", help="comma-separated jobs of the table to run")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--coordinator-flags", default="", help="more coordinator flags for --mix")
    ap.add_argument("--modes", default="none,first,lru,tinylfu", help="cache modes for --mix")
    a = ap.parse_args()
    sh("cargo", "build", "--release", "-q", "-p", "sluice-cli", cwd=ROOT)
    work = pathlib.Path(tempfile.mkdtemp(prefix="sluice-cache-"))
    try:
        sh(S, "gen", "text", "--size", a.size, "--out", work / "text")
        sh(S, "gen", "pavlo", "--scale", a.size, "--out", work / "pavlo")
        size = parse_size(a.size)
        # k-means points of 20 dimensions (about 400 bytes each) and a graph
        # (about 100 bytes of edges a page), each about a quarter of --size.
        sh(S, "gen", "kmeans", "--points", size // 1600, "--dims", "20", "--clusters", "10",
           "--out", work / "points")
        sh(S, "gen", "graph", "--pages", size // 400, "--out", work / "graph")
        oracle = Oracle(work / "text", work / "pavlo", work)
        if a.mix:
            return mix(a, work, oracle)
        cluster(work, True)
        put_all(work)
        table = []
        only = [n for n in a.only.split(",") if n]
        for name, job, input_set in WORKLOADS:
            if only and name not in only:
                continue
            nocache, cold, cached, hits = [], [], [], []
            for rep in range(a.reps):
                # The same cluster without a cache: the baseline.
                cluster(work, False)
                cluster(work, True, worker="--cache-size 0")
                t, got, _ = run(work, name, job, input_set, f"none{rep}")
                check(name, got, oracle)
                nocache.append(t)
                cluster(work, False)
                cluster(work, True)
                t, got_cold, _ = run(work, name, job, input_set, f"cold{rep}")
                check(name, got_cold, oracle)
                cold.append(t)
                t, got, h = run(work, name, job, input_set, f"cached{rep}")
                check(name, got, oracle)
                cached.append(t)
                hits.append(h)
            n, c, w = statistics.median(nocache), statistics.median(cold), statistics.median(cached)
            row = {"job": name, "nocache_s": nocache, "cold_s": cold, "cached_s": cached,
                   "hit_ratio": hits, "median_nocache_s": n, "median_cold_s": c,
                   "median_cached_s": w, "change": w / n - 1, "thesis": THESIS[name]}
            table.append(row)
            print(json.dumps(row), flush=True)
        cluster(work, False)
        cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                    if l.startswith("model name")), "unknown")
        print(f"\n{a.size} per data set, {a.reps} repetitions, 2 workers x 1 slot, CPU {cpu}\n")
        print("| job | no cache s | cold s | cached s | cached vs no cache | hit ratio | thesis |")
        print("|---|---:|---:|---:|---:|---:|---|")
        for r in table:
            print(f"| {r['job']} | {r['median_nocache_s']:.2f} | {r['median_cold_s']:.2f} | "
                  f"{r['median_cached_s']:.2f} | "
                  f"{r['change'] * 100:+.1f}% | {statistics.median(r['hit_ratio']) * 100:.0f}% | "
                  f"{r['thesis']} |")
        if a.plot:
            plot(table, a.plot)
    finally:
        cluster(work, False)
        subprocess.run(["rm", "-rf", str(work)])


def plot(table, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = [r["job"] for r in table]
    x = range(len(names))
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.bar([i - 0.27 for i in x], [r["median_nocache_s"] for r in table], 0.27, label="no cache")
    ax.bar(list(x), [r["median_cold_s"] for r in table], 0.27, label="cold (admitting)")
    ax.bar([i + 0.27 for i in x], [r["median_cached_s"] for r in table], 0.27, label="cached")
    ax.set_xticks(list(x), names, rotation=15)
    ax.set_ylabel("seconds (median)")
    ax.set_title("Sluice block cache, 2-worker embedded cluster")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)


if __name__ == "__main__":
    main()
