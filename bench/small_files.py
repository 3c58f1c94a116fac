#!/usr/bin/env python3
"""Many small files: put, and word count over them, against the same bytes
as one file, `cp -r`, and Spark reading the same directory.

Usage: .venv/bin/python bench/small_files.py [--files 10000] [--runs 3]
       [--no-spark]

Makes --files files of about 2 KB of text (60 lines each) and the same
bytes as one file. Measures, medians of --runs, on a 2-worker embedded
cluster (`sluice cluster up --workers 2`):
- `cp -r` of the directory against `sluice put` of it (a fresh data set
  each run), and `sluice put` of the one file;
- `sluice submit wordcount` over the small-file data set against the
  one-file data set; `sluice run wordcount` over the directory against the
  one file (local engine, 2 threads);
- Spark (local[2], DataFrame word count, which packs small files into
  partitions; session start excluded) over the directory against the one
  file.
Every answer is checked: each word count equals the one-file count of the
local engine. Sluice is built in release mode first.
"""
import argparse
import pathlib
import shutil
import statistics
import subprocess
import tempfile

from benchlib import counts, sh, timed

ROOT = pathlib.Path(__file__).resolve().parent.parent
S = str(ROOT / "target/release/sluice")


def make_files(w, n):
    files = w / "files"
    files.mkdir()
    with open(w / "all.txt", "w") as whole:
        for i in range(n):
            text = "".join(f"line {j} of file {i} with words w{(i * 7 + j) % 997}\n" for j in range(60))
            (files / f"f{i:06d}.log").write_text(text)
            whole.write(text)
    return files, w / "all.txt"


def spark_counts(spark, path):
    """Word count with Spark's DataFrame reader, which packs small files
    into partitions (maxPartitionBytes, openCostInBytes); RDD textFile
    would make a partition of each file."""
    from pyspark.sql import functions as F
    words = spark.read.text(str(path)).select(F.explode(F.split("value", r"\s+")).alias("w"))
    rows = words.where(F.col("w") != "").groupBy("w").count().collect()
    return {r["w"]: r["count"] for r in rows}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=10000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-spark", action="store_true")
    a = ap.parse_args()
    sh("cargo", "build", "--release", "-q", "--manifest-path", ROOT / "Cargo.toml")
    w = pathlib.Path(tempfile.mkdtemp(prefix="sluice-small-"))
    c = w / "cluster"
    try:
        files, whole = make_files(w, a.files)
        size = sum(p.stat().st_size for p in files.iterdir())
        print(f"{a.files} files, {size / 1e6:.1f} MB; medians of {a.runs}")
        sh(S, "run", "wordcount", "--input", whole, "--output", w / "want", "-q")
        want = counts(w / "want")
        sh(S, "cluster", "up", "--workers", "2", "--dir", c)
        rows = []

        def cp():
            shutil.rmtree(w / "copy", ignore_errors=True)
            subprocess.run(["cp", "-r", files, w / "copy"], check=True)

        rows.append(("cp -r of the files", statistics.median(timed(cp) for _ in range(a.runs))))
        puts = []
        for i in range(a.runs):
            puts.append(timed(lambda: sh(S, "put", files, "--dataset", f"small{i}", "--cluster", c)))
        rows.append(("sluice put of the files", statistics.median(puts)))
        rows.append(("sluice put of one file", statistics.median(
            timed(lambda: sh(S, "put", whole, "--dataset", "one", "--overwrite", "--cluster", c))
            for _ in range(a.runs))))
        for name, data in [("the files", "small0"), ("one file", "one")]:
            def job():
                sh(S, "submit", "--cluster", c, "wordcount", "--input", data, "--output", "wc", "--overwrite")
            rows.append((f"cluster word count, {name}", statistics.median(timed(job) for _ in range(a.runs))))
            sh(S, "get", "wc", w / "got", "--cluster", c)
            assert counts(w / "got") == want, f"cluster answer over {name} differs"
            shutil.rmtree(w / "got")
        for name, data in [("the files", files), ("one file", whole)]:
            def run():
                sh(S, "run", "wordcount", "--input", data, "--output", w / "local", "--overwrite", "-q")
            rows.append((f"local word count, {name}", statistics.median(timed(run) for _ in range(a.runs))))
            assert counts(w / "local") == want, f"local answer over {name} differs"
        if not a.no_spark:
            from pyspark.sql import SparkSession
            spark = (SparkSession.builder.master("local[2]")
                     .config("spark.ui.enabled", "false")
                     .config("spark.ui.showConsoleProgress", "false").getOrCreate())
            spark.sparkContext.setLogLevel("ERROR")
            for name, data in [("the files", files), ("one file", whole)]:
                got = spark_counts(spark, data)
                assert got == want, f"Spark's answer over {name} differs"
                t = statistics.median(timed(lambda: spark_counts(spark, data)) for _ in range(a.runs))
                rows.append((f"Spark word count, {name}", t))
            spark.stop()
        for what, t in rows:
            print(f"| {what} | {t:.3f} |")
        print("every answer matched the local engine's over one file")
    finally:
        subprocess.run([S, "cluster", "down", "--dir", str(c)], capture_output=True)
        shutil.rmtree(w, ignore_errors=True)


if __name__ == "__main__":
    main()
