"""A job's output as a pyarrow Table or a pandas DataFrame
(``to_arrow()``, ``to_pandas()``), read straight from Parquet output or
parsed from text; and rows of Parquet and Avro input given to a Python
mapper as dicts. Each answer is checked against one computed here."""

import collections

import pytest

import sluice

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

WORDS = ["apple", "banana", "cherry", "date", "elder", "fig", "grape"]


@pytest.fixture
def text(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    lines = [" ".join(WORDS[(i * 3 + j) % len(WORDS)] for j in range(i % 5)) for i in range(2000)]
    (d / "words.txt").write_text("".join(l + "\n" for l in lines), encoding="utf-8")
    return d, collections.Counter(w for l in lines for w in l.split())


def test_parquet_output_is_read_as_its_typed_columns(text, tmp_path):
    data, want = text
    report = sluice.run(
        "wordcount", data, tmp_path / "out", reducers=2, threads=2, output_format="parquet"
    )
    assert report["output_records"] == len(want)
    table = report.to_arrow()
    assert table.schema.names == ["word", "count"]
    assert table.schema.field("word").type == pa.string()
    assert table.schema.field("count").type == pa.int64()
    assert dict(zip(table["word"].to_pylist(), table["count"].to_pylist())) == dict(want)
    frame = report.to_pandas()
    assert list(frame.columns) == ["word", "count"]
    assert str(frame["count"].dtype) == "int64"
    assert dict(zip(frame["word"], frame["count"])) == dict(want)


def test_text_output_is_parsed_into_key_and_value(text, tmp_path):
    data, want = text
    report = sluice.run("wordcount", data, tmp_path / "out", reducers=2, threads=2)
    table = report.to_arrow()
    assert table.schema.names == ["key", "value"]
    assert dict(zip(table["key"].to_pylist(), table["value"].to_pylist())) == {
        w: str(n) for w, n in want.items()
    }
    # A Python job's JSON output decodes: counts are integers.
    job = sluice.Job(
        mapper=lambda line: ((w, 1) for w in line.split()),
        reducer=lambda w, ns: [(w, sum(ns))],
    )
    report = job.run(data, tmp_path / "py", reducers=2, threads=2, in_process=True)
    frame = report.to_pandas()
    assert dict(zip(frame["key"], frame["value"])) == dict(want)
    assert str(frame["value"].dtype) == "int64"


def test_binary_output_other_than_parquet_is_refused(text, tmp_path):
    data, _ = text
    report = sluice.run("wordcount", data, tmp_path / "out", output_format="avro")
    with pytest.raises(ValueError, match="avro output"):
        report.to_arrow()


def revenue_mapper(row):
    yield row["ip"], (row["revenue"], row["visits"])


def revenue_reducer(ip, pairs):
    yield ip, [sum(p[0] for p in pairs), sum(p[1] for p in pairs)]


ROWS = [{"ip": "10.0.%d.%d" % (i % 7, i % 3), "revenue": i * 0.5, "visits": i % 4} for i in range(5000)]


def expected():
    want = collections.defaultdict(lambda: [0.0, 0])
    for r in ROWS:
        want[r["ip"]][0] += r["revenue"]
        want[r["ip"]][1] += r["visits"]
    return want


def check(report, want):
    got = {k: v for k, v in zip(report.to_arrow()["key"].to_pylist(), report.to_arrow()["value"].to_pylist())}
    assert got.keys() == want.keys()
    for ip, (revenue, visits) in want.items():
        assert got[ip][0] == pytest.approx(revenue)
        assert got[ip][1] == visits


@pytest.mark.parametrize("in_process", [False, True])
def test_parquet_rows_reach_the_mapper_as_dicts(tmp_path, in_process):
    path = tmp_path / "visits.parquet"
    pq.write_table(pa.Table.from_pylist(ROWS), path, row_group_size=700)
    job = sluice.Job(mapper=revenue_mapper, reducer=revenue_reducer)
    report = job.run(path, tmp_path / "out", reducers=2, threads=2, in_process=in_process)
    check(report, expected())


def test_avro_rows_reach_the_mapper_as_dicts(tmp_path):
    fastavro = pytest.importorskip("fastavro")
    schema = {
        "type": "record",
        "name": "visit",
        "fields": [
            {"name": "ip", "type": "string"},
            {"name": "revenue", "type": "double"},
            {"name": "visits", "type": "long"},
        ],
    }
    path = tmp_path / "visits.avro"
    with open(path, "wb") as f:
        fastavro.writer(f, schema, ROWS, codec="deflate", sync_interval=4000)
    job = sluice.Job(mapper=revenue_mapper, reducer=revenue_reducer)
    check(job.run(path, tmp_path / "out", reducers=2, threads=2), expected())


def test_input_mixing_rows_and_text_is_refused(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    pq.write_table(pa.Table.from_pylist(ROWS[:10]), d / "a.parquet")
    (d / "b.txt").write_text("x y\n", encoding="utf-8")
    job = sluice.Job(mapper=revenue_mapper)
    with pytest.raises(ValueError, match="mixes files of rows"):
        job.run(d, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_sequencefile_records_stay_lines_of_their_values(text, tmp_path):
    data, want = text
    seq = tmp_path / "seq"
    sluice.run("wordcount", data, seq, reducers=1, output_format="sequencefile")
    job = sluice.Job(mapper=lambda line: [(line, 1)], reducer=lambda k, ns: [(k, sum(ns))])
    table = job.run(seq, tmp_path / "out", in_process=True).to_arrow()
    # Each record is its value (a count) alone, not a row as a dict.
    assert set(table["key"].to_pylist()) == {str(n) for n in want.values()}
    assert sum(table["value"].to_pylist()) == len(want)
