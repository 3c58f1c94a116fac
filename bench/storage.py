#!/usr/bin/env python3
"""Word count read from HDFS against the same files read from the local
disk, for Sluice and for Spark (local[2], RDD API), medians of --runs.

HDFS is Hadoop's MiniDFSCluster (tests/minidfs, hadoop-minicluster from
Maven Central) on this machine, one DataNode, its blocks on the same disk
as the local copy, so the difference is the storage path alone (the
NameNode's RPC, the DataNode's transfer protocol and checksums, against
the page cache). Outputs go to local directories in both cases.

Answers are checked: Sluice's output from HDFS is byte-identical to its
output from local files, and Spark's (word, count) pairs equal Sluice's.

Usage: .venv/bin/python bench/storage.py [--size 200MB] [--runs 3]
       [--engines sluice,spark] [--sluice target/release/sluice] [--out DIR]
"""
import argparse
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
LAUNCHER = ROOT / "tests" / "minidfs"


def start_dfs(base):
    jar = LAUNCHER / "target" / "minidfs-1.0.jar"
    if not jar.exists():
        subprocess.run(["mvn", "-q", "-B", "-f", str(LAUNCHER / "pom.xml"), "package",
                        "-DskipTests"], check=True, stdout=sys.stderr)
    cp = f"{jar}:{LAUNCHER / 'target' / 'lib'}/*"
    p = subprocess.Popen(["java", "-cp", cp, "sluice.minidfs.MiniDfs", str(base),
                          "--datanodes", "1", "--replication", "1"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    url, http = p.stdout.readline().split()
    return p, url, http


def dfs_cmd(p, line):
    p.stdin.write(line + "\n")
    p.stdin.flush()
    answer = p.stdout.readline().strip()
    if not answer.startswith("ok"):
        raise SystemExit(f"MiniDfs {line}: {answer}")


def timed(cmd, env=None):
    t = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def parts(d):
    return b"".join(p.read_bytes() for p in sorted(pathlib.Path(d).glob("part-*")))


def sluice_runs(args, data, url, work, env):
    times = {"local": [], "hdfs": []}
    outs = {}
    for r in range(args.runs):
        for where, inp in (("local", str(data)), ("hdfs", f"{url}/in")):
            out = work / f"sluice-{where}"
            shutil.rmtree(out, ignore_errors=True)
            times[where].append(timed([args.sluice, "run", "wordcount", "-q", "--input", inp,
                                       "--output", str(out)], env))
            outs[where] = parts(out)
    if outs["local"] != outs["hdfs"]:
        raise SystemExit("Sluice's answers from HDFS and from local files differ")
    return times, outs["local"]


SPARK = r"""
import sys, time
from pyspark import SparkConf, SparkContext
sc = SparkContext(conf=SparkConf().setMaster("local[2]").setAppName("wc")
                  .set("spark.ui.enabled", "false"))
sc.setLogLevel("ERROR")
t = time.perf_counter()
counts = (sc.textFile(sys.argv[1]).flatMap(lambda l: l.split())
          .map(lambda w: (w, 1)).reduceByKey(lambda a, b: a + b))
counts.map(lambda kv: "%s\t%d" % kv).saveAsTextFile(sys.argv[2])
print(time.perf_counter() - t)
"""


def spark_runs(args, data, url, work, want):
    script = work / "spark_wc.py"
    script.write_text(SPARK)
    times = {"local": [], "hdfs": []}
    for r in range(args.runs):
        for where, inp in (("local", f"file://{data}"), ("hdfs", f"{url}/in")):
            out = work / f"spark-{where}"
            shutil.rmtree(out, ignore_errors=True)
            res = subprocess.run([sys.executable, str(script), inp, f"file://{out}"],
                                 check=True, capture_output=True, text=True)
            # The job's own time, the JVM's start left out.
            times[where].append(float(res.stdout.strip().splitlines()[-1]))
            got = sorted(l for p in sorted(out.glob("part-*"))
                         for l in p.read_text().splitlines())
            if got != want:
                raise SystemExit(f"Spark's answer from {where} differs from Sluice's")
    return times


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="200MB")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--engines", default="sluice,spark")
    ap.add_argument("--sluice", default=str(ROOT / "target" / "release" / "sluice"))
    ap.add_argument("--out", default=str(ROOT / "bench-results" / "storage"))
    args = ap.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = pathlib.Path(tempfile.mkdtemp(prefix="sluice-storage-"))
    data = work / "text"
    subprocess.run([args.sluice, "gen", "text", "--size", args.size, "--seed", "7",
                    "--out", str(data)], check=True, stdout=subprocess.DEVNULL)
    p, url, http = start_dfs(work / "dfs")
    try:
        dfs_cmd(p, f"put {data} /in")
        env = dict(os.environ, SLUICE_WEBHDFS=http)
        rows = []
        times, answer = sluice_runs(args, data, url, work, env)
        rows.append(("sluice", times))
        if "spark" in args.engines.split(","):
            want = sorted(answer.decode().splitlines())
            rows.append(("spark", spark_runs(args, data, url, work, want)))
    finally:
        p.stdin.close()
        p.wait(timeout=60)
        shutil.rmtree(work, ignore_errors=True)
    lines = [f"word count, {args.size} of text, medians of {args.runs} runs",
             "", "| engine | local files s | HDFS s | HDFS / local |", "|---|---:|---:|---:|"]
    for name, t in rows:
        lo, hd = statistics.median(t["local"]), statistics.median(t["hdfs"])
        lines.append(f"| {name} | {lo:.2f} | {hd:.2f} | {hd / lo:.2f} |")
    text = "\n".join(lines) + "\n"
    (out / "results.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
