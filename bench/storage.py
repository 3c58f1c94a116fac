#!/usr/bin/env python3
"""Word count read from HDFS and from S3 against the same files read from
the local disk, for Sluice (HDFS, S3) and Spark (local[2], RDD API; HDFS),
medians of --runs.

HDFS is Hadoop's MiniDFSCluster (tests/minidfs, hadoop-minicluster from
Maven Central) on this machine, one DataNode, its blocks on the same disk
as the local copy, so the difference is the storage path alone. "HDFS"
reads as Sluice does by default: the DataNode allows short-circuit reads
(its dfs.block.local-path-access.user), so replicas are read from their
files on the local disk and checked against their .meta checksums;
"HDFS over TCP" sets SLUICE_HDFS_SHORT_CIRCUIT=0 (the DataNode's transfer
protocol, as from another host). Spark's HDFS client is given Hadoop's
settings for the same short-circuit reads. Outputs go to local
directories in every case.

S3 is moto's server (PyPI, the project's venv) on loopback: an object
store's ranged GETs over HTTP, in Python; it measures Sluice's S3 path,
not S3.

Answers are checked: Sluice's outputs from HDFS and S3 are byte-identical
to its output from local files, and Spark's (word, count) pairs equal
Sluice's.

Every variant first runs --warmup rounds untimed, so the NameNode's and
DataNode's JVM has compiled its paths and the page cache holds the files,
as on a cluster that has been up.

Usage: .venv/bin/python bench/storage.py [--size 200MB] [--runs 3] [--warmup 1]
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


def start_moto(data):
    """moto's S3 server with the data under s3://data/in; its env."""
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    server = pathlib.Path(sys.executable).parent / "moto_server"
    p = subprocess.Popen([str(server), "-H", "127.0.0.1", "-p", str(port)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    env = dict(os.environ, AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}",
               AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test", AWS_REGION="us-east-1")
    import boto3
    for _ in range(100):
        try:
            c = boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], aws_access_key_id="test",
                             aws_secret_access_key="test", region_name="us-east-1")
            c.create_bucket(Bucket="data")
            break
        except Exception:
            time.sleep(0.1)
    for f in sorted(pathlib.Path(data).glob("part-*")):
        c.upload_file(str(f), "data", f"in/{f.name}")
    return p, env


def sluice_runs(args, data, url, work, env):
    wheres = [("local", str(data)), ("hdfs", f"{url}/in"), ("hdfs-tcp", f"{url}/in")]
    if "s3" in env:
        wheres.append(("s3", "s3://data/in"))
    times = {w: [] for w, _ in wheres}
    outs = {}
    for r in range(-args.warmup, args.runs):
        for where, inp in wheres:
            out = work / f"sluice-{where}"
            shutil.rmtree(out, ignore_errors=True)
            threads = ["--threads", str(args.threads)] if args.threads else []
            times[where].append(timed([args.sluice, "run", "wordcount", "-q", *threads,
                                       "--input", inp, "--output", str(out)],
                                      env.get(where, env["hdfs"])))
            if r < 0:
                times[where].pop()
            outs[where] = parts(out)
    for where in outs:
        if outs[where] != outs["local"]:
            raise SystemExit(f"Sluice's answers from {where} and from local files differ")
    return times, outs["local"]


SPARK = r"""
import sys, time
from pyspark import SparkConf, SparkContext
sc = SparkContext(conf=SparkConf().setMaster("local[2]").setAppName("wc")
                  .set("spark.ui.enabled", "false")
                  # HDFS's client reads local replicas from the disk, as Sluice's does.
                  .set("spark.hadoop.dfs.client.read.shortcircuit", "true")
                  .set("spark.hadoop.dfs.client.use.legacy.blockreader.local", "true"))
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
    for r in range(-args.warmup, args.runs):
        for where, inp in (("local", f"file://{data}"), ("hdfs", f"{url}/in")):
            out = work / f"spark-{where}"
            shutil.rmtree(out, ignore_errors=True)
            res = subprocess.run([sys.executable, str(script), inp, f"file://{out}"],
                                 check=True, capture_output=True, text=True)
            # The job's own time, the JVM's start left out.
            if r >= 0:
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
    ap.add_argument("--warmup", type=int, default=1,
                    help="untimed rounds first (the servers' JVM and page cache warm)")
    ap.add_argument("--engines", default="sluice,spark")
    ap.add_argument("--threads", type=int, default=0,
                    help="Sluice's threads (default: all cores)")
    ap.add_argument("--stores", default="hdfs,s3", help="hdfs is always run; s3 adds moto")
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
    moto = None
    try:
        dfs_cmd(p, f"put {data} /in")
        env = {"hdfs": dict(os.environ, SLUICE_WEBHDFS=http)}
        # The same reads through the DataNode's TCP transfer protocol.
        env["hdfs-tcp"] = dict(env["hdfs"], SLUICE_HDFS_SHORT_CIRCUIT="0")
        if "s3" in args.stores.split(","):
            moto, env["s3"] = start_moto(data)
        rows = []
        times, answer = sluice_runs(args, data, url, work, env)
        rows.append(("sluice", times))
        if "spark" in args.engines.split(","):
            want = sorted(answer.decode().splitlines())
            rows.append(("spark", spark_runs(args, data, url, work, want)))
    finally:
        if moto:
            moto.kill()
        p.stdin.close()
        p.wait(timeout=60)
        shutil.rmtree(work, ignore_errors=True)
    lines = [f"word count, {args.size} of text, medians of {args.runs} runs",
             "", "| engine | local files s | HDFS s | HDFS / local | HDFS over TCP s | TCP / local "
             "| S3 (moto) s | S3 / local |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, t in rows:
        lo = statistics.median(t["local"])
        cells = []
        for where in ("hdfs", "hdfs-tcp", "s3"):
            m = statistics.median(t[where]) if t.get(where) else None
            cells.append(f"{m:.2f} | {m / lo:.2f}" if m else "- | -")
        lines.append(f"| {name} | {lo:.2f} | " + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n"
    (out / "results.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
