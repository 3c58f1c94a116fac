#!/usr/bin/env python3
"""Word count with Python functions: Sluice Streaming against PySpark's RDD
and Hadoop MapReduce, on the same file, answers checked.

Usage: .venv/bin/python bench/streaming.py [--size 50MB] [--runs 3]
       [--no-hadoop] [--package-only] [--streaming-only]
       [--hadoop-streaming-jar JAR]

--package-only measures the sluice Python package against PySpark alone,
with the package as installed in the venv (no build, no Streaming, no
Hadoop). --streaming-only measures the Streaming rows alone (Sluice's,
Hadoop's pipes, and Hadoop's own Streaming when its jar is given).

--hadoop-streaming-jar (or HADOOP_STREAMING_JAR) names Hadoop's own
hadoop-streaming jar (`$HADOOP_HOME/share/hadoop/tools/lib/` of a Hadoop
installation; it is not on the registry this project uses, so nothing
here fetches or builds it): the same map.py and reduce.py then also run
through `org.apache.hadoop.streaming.HadoopStreaming` on LocalJobRunner
with `bench/hadoop`'s Hadoop 3.4.1 jars on the class path, 2 map and 2
reduce slots, its job poll at 20 ms as the other Hadoop jobs here, and
its part files must equal Sluice Streaming's byte for byte.

- Sluice: `sluice streaming` with a Python mapper and reducer shipped with
  -file (one process per task, lines through pipes, as Hadoop Streaming),
  2 reducers, the local engine on 2 threads; and again with the reducer as
  combiner too.
- The sluice Python package: the same splitting and summing as Python
  functions of a `sluice.Job` (lines in batches, the functions in a Python
  process per running task), 2 reducers, 2 threads; again with the
  reducer as combiner too; and again with the functions in the calling
  interpreter (`in_process=True`, one task's Python at a time).
- PySpark (local[2]): the same Python splitting and summing as RDD
  functions (flatMap, reduceByKey: it combines map-side); and the same
  map script through RDD.pipe, summed by reduceByKey.
- Hadoop MapReduce 3 (LocalJobRunner, 2 map and 2 reduce slots): its
  WordCount example in Java with its combiner; and the same map.py and
  reduce.py through Hadoop Streaming's contract (`bench/hadoop`'s
  `sluice.bench.Streaming`, PipeMapper and PipeReducer as Hadoop Streaming
  has them: the hadoop-streaming jar is not on the registry this project
  uses), without and with the reducer as combiner.
Times are wall clocks, medians of --runs (Spark's session start and the
JVM start of Hadoop included for Hadoop, excluded for Spark). Every answer
is checked against Sluice's built-in word count.
"""
import argparse
import os
import pathlib
import shutil
import statistics
import tempfile

from benchlib import counts, sh, timed

ROOT = pathlib.Path(__file__).resolve().parent.parent
S = str(ROOT / "target/release/sluice")

MAP = """import sys
for line in sys.stdin:
    for w in line.split():
        print(f"{w}\\t1")
"""

REDUCE = """import sys
cur, n = None, 0
for line in sys.stdin:
    k, v = line.rstrip("\\n").split("\\t", 1)
    if k != cur:
        if cur is not None:
            print(f"{cur}\\t{n}")
        cur, n = k, 0
    n += int(v)
if cur is not None:
    print(f"{cur}\\t{n}")
"""


def parse_size(s):
    """`50MB` as bytes (decimal units, as Sluice's flags)."""
    units = {"KB": 10**3, "MB": 10**6, "GB": 10**9}
    for u, m in units.items():
        if s.upper().endswith(u):
            return int(float(s[: -len(u)]) * m)
    return int(s)


def main():
    # Every engine's scripts inherit this environment. PYTHONUNBUFFERED=1
    # (set in some shells and containers) makes each print of map.py its
    # own system call: Sluice Streaming and Hadoop's pipes both took 1.7x
    # as long with it, PySpark's pipe too. Measured as users run Python.
    os.environ.pop("PYTHONUNBUFFERED", None)
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="50MB")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-hadoop", action="store_true")
    ap.add_argument("--package-only", action="store_true")
    ap.add_argument("--streaming-only", action="store_true")
    ap.add_argument("--hadoop-streaming-jar", default=os.environ.get("HADOOP_STREAMING_JAR", ""))
    a = ap.parse_args()
    if a.package_only:
        a.no_hadoop = True
    else:
        sh("cargo", "build", "--release", "-q", "--manifest-path", ROOT / "Cargo.toml")
    w = pathlib.Path(tempfile.mkdtemp(prefix="sluice-streaming-"))
    try:
        data = w / "text"
        (w / "map.py").write_text(MAP)
        (w / "reduce.py").write_text(REDUCE)
        if a.package_only:
            import sluice
            sluice.gen_text(data, parse_size(a.size), seed=3)
            sluice.run("wordcount", data, w / "want")
        else:
            sh(S, "gen", "text", "--size", a.size, "--seed", "3", "--out", data)
            sh(S, "run", "wordcount", "--input", data, "--output", w / "want", "-q")
        want = counts(w / "want")
        rows = []

        for combine in () if a.package_only else (False, True):
            t = statistics.median(timed(lambda: streaming_once(w, data, combine)) for _ in range(a.runs))
            assert counts(w / "out") == want, "Sluice Streaming's answer differs"
            rows.append((f"Sluice Streaming{' + combiner' if combine else ''}", t))

        if a.streaming_only:
            hadoop_rows(a, w, data, want, rows)
            report(rows, data, a.runs)
            return

        # The same functions through the sluice Python package: lines in
        # batches to a Python process per running task (or, in process, to
        # this interpreter, the GIL released around the engine's work).
        import sluice

        def py_mapper(line):
            return [(w, 1) for w in line.split()]

        def py_sum(word, ns):
            return [(word, sum(ns))]

        for combine, here in ((False, False), (True, False), (False, True)):
            job = sluice.Job(mapper=py_mapper, reducer=py_sum, combiner=py_sum if combine else None)

            def package():
                job.run(data, w / "pyout", reducers=2, threads=2, overwrite=True, in_process=here)

            t = statistics.median(timed(package) for _ in range(a.runs))
            assert dict(sluice.read_output(w / "pyout")) == want, "the package's answer differs"
            rows.append((f"sluice Python package{' + combiner' if combine else ''}"
                         f"{', in process' if here else ''}", t))

        from pyspark.sql import SparkSession
        spark = (SparkSession.builder.master("local[2]")
                 .config("spark.ui.enabled", "false")
                 .config("spark.ui.showConsoleProgress", "false").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        files = ",".join(str(p) for p in sorted(data.glob("part-*")))

        def spark_count():
            rdd = spark.sparkContext.textFile(files)
            pairs = rdd.flatMap(lambda line: [(w, 1) for w in line.split()])
            return dict(pairs.reduceByKey(lambda x, y: x + y).collect())

        assert spark_count() == want, "PySpark's answer differs"
        rows.append(("PySpark RDD", statistics.median(timed(spark_count) for _ in range(a.runs))))

        def spark_pipe():
            # The same map script through RDD.pipe (a process per partition,
            # lines through pipes, as Streaming), then Spark's own sum.
            rdd = spark.sparkContext.textFile(files).pipe(f"python3 {w / 'map.py'}")
            pairs = rdd.map(lambda line: line.split("\t")).map(lambda kv: (kv[0], int(kv[1])))
            return dict(pairs.reduceByKey(lambda x, y: x + y).collect())

        assert spark_pipe() == want, "PySpark's piped answer differs"
        rows.append(("PySpark RDD.pipe(map.py) + reduceByKey",
                     statistics.median(timed(spark_pipe) for _ in range(a.runs))))
        spark.stop()

        hadoop_rows(a, w, data, want, rows)
        report(rows, data, a.runs)
    finally:
        shutil.rmtree(w, ignore_errors=True)


def streaming_once(w, data, combine):
    """Sluice Streaming's word count of DATA into W/out."""
    args = [S, "streaming", "-input", data, "-output", w / "out", "--overwrite",
            "-mapper", "python3 map.py", "-reducer", "python3 reduce.py",
            "-file", w / "map.py", "-file", w / "reduce.py", "-numReduceTasks", "2"]
    if combine:
        args += ["-combiner", "python3 reduce.py"]
    sh(*args)


def parts(out):
    """The bytes of OUT's part files, in partition order."""
    return [p.read_bytes() for p in sorted(out.glob("part-*"))]


def hadoop_rows(a, w, data, want, rows):
    """Hadoop's Java WordCount and the scripts through Hadoop's pipes (and
    Hadoop's own Streaming, given its jar), appended to ROWS."""
    if a.no_hadoop:
        return
    hd = ROOT / "bench" / "hadoop"
    if not (hd / "target" / "hadoop-jobs-1.0.jar").exists():
        sh("mvn", "-q", "-B", "-f", hd / "pom.xml", "package", "-DskipTests")
    cp = f"{hd}/target/hadoop-jobs-1.0.jar:{hd}/target/lib/*"

    def hadoop():
        shutil.rmtree(w / "hout", ignore_errors=True)
        sh("java", "-Xmx2g", "-cp", cp, "sluice.bench.Jobs", "wordcount", data, w / "hout", "2")

    t = statistics.median(timed(hadoop) for _ in range(a.runs))
    assert counts(w / "hout") == want, "Hadoop's answer differs"
    rows.append(("Hadoop MapReduce WordCount (Java)", t))

    def hadoop_streaming(combine):
        shutil.rmtree(w / "hsout", ignore_errors=True)
        args = ["java", "-Xmx2g", "-cp", cp, "sluice.bench.Streaming", data, w / "hsout",
                "2", "2", w, "python3 map.py", "python3 reduce.py"]
        sh(*(args + (["python3 reduce.py"] if combine else [])))

    for combine in (False, True):
        t = statistics.median(timed(lambda: hadoop_streaming(combine))
                              for _ in range(a.runs))
        assert counts(w / "hsout") == want, "Hadoop Streaming's answer differs"
        rows.append((f"Hadoop MapReduce with Streaming's pipes{' + combiner' if combine else ''}",
                     t))

    if a.hadoop_streaming_jar:
        jar = pathlib.Path(a.hadoop_streaming_jar).resolve()

        def hadoop_real(combine):
            shutil.rmtree(w / "hrout", ignore_errors=True)
            args = ["java", "-Xmx2g", "-cp", f"{jar}:{cp}",
                    "org.apache.hadoop.streaming.HadoopStreaming",
                    "-D", "mapreduce.framework.name=local",
                    "-D", "mapreduce.local.map.tasks.maximum=2",
                    "-D", "mapreduce.local.reduce.tasks.maximum=2",
                    "-D", "mapreduce.client.progressmonitor.pollinterval=20",
                    "-input", data, "-output", w / "hrout",
                    "-mapper", "python3 map.py", "-reducer", "python3 reduce.py",
                    "-file", w / "map.py", "-file", w / "reduce.py", "-numReduceTasks", "2"]
            if combine:
                args += ["-combiner", "python3 reduce.py"]
            sh(*args, cwd=w)

        for combine in (False, True):
            t = statistics.median(timed(lambda: hadoop_real(combine)) for _ in range(a.runs))
            assert counts(w / "hrout") == want, "Hadoop Streaming's answer differs"
            if not combine:
                # Sluice Streaming's last output was with the combiner:
                # run it once more without, to compare part files.
                streaming_once(w, data, False)
                assert parts(w / "hrout") == parts(w / "out"), \
                    "Hadoop Streaming's part files differ from Sluice Streaming's"
            rows.append((f"Hadoop Streaming (its own jar){' + combiner' if combine else ''}", t))


def report(rows, data, runs):
    size = sum(p.stat().st_size for p in data.glob("part-*"))
    print(f"word count over {size / 1e6:.0f} MB of text, medians of {runs}")
    for what, t in rows:
        print(f"| {what} | {t:.2f} |")
    print("every answer matched Sluice's built-in word count")


if __name__ == "__main__":
    main()
