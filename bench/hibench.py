#!/usr/bin/env python3
"""k-means and PageRank, Sluice's local engine against Spark (local[N]) on
the same generated files, answers checked against each other.

Usage: .venv/bin/python bench/hibench.py [--points 400000] [--pages 400000]
       [--threads 2] [--runs 3]

k-means: Sluice's `kmeans` (init job, then --iterations jobs) against
MLlib's RDD `KMeans.train` from the same initial centres (Sluice's init
job's), for the same iterations (epsilon 0: no early stop). PageRank:
Sluice's `pagerank` against the classic RDD PageRank with networkx's
dangling handling, same iterations and damping. Times are wall clocks,
medians of --runs: Sluice's whole `sluice run` (its iterations' jobs, init
or build included), Spark's from reading the text to the collected answer
(its session's start-up excluded); per iteration is that over the
iterations. Sluice is built in release mode first.
"""
import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
S = str(ROOT / "target/release/sluice")


def sh(*args):
    return subprocess.run([str(a) for a in args], check=True, capture_output=True, text=True)


def parts(d):
    d = pathlib.Path(d)
    return sorted(d.glob("part-*")) if d.is_dir() else [d]


def centres(d):
    rows = []
    for p in parts(d):
        for line in open(p):
            i, xs = line.rstrip("\n").split("\t")
            rows.append((int(i), [float(x) for x in xs.split()]))
    return [r for _, r in sorted(rows)]


def ranks(d):
    out = {}
    for p in parts(d):
        for line in open(p):
            k, v = line.split("\t")
            out[int(k)] = float(v)
    return out


def timed(f):
    t = time.perf_counter()
    r = f()
    return time.perf_counter() - t, r


def spark_session(threads):
    try:
        import pyspark  # noqa: F401
    except ImportError:
        print("installing pyspark ...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "pyspark"], check=True)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    s = (SparkSession.builder.master(f"local[{threads}]").config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.driver.memory", "4g").getOrCreate())
    s.sparkContext.setLogLevel("ERROR")
    return s.sparkContext


def spark_kmeans(sc, points, init, iterations):
    from pyspark.mllib.clustering import KMeans, KMeansModel
    import numpy as np
    rdd = sc.textFile(str(points)).map(lambda l: np.array([float(x) for x in l.split()]))
    model = KMeans.train(rdd, len(init), maxIterations=iterations, initializationMode="random",
                         initialModel=KMeansModel([np.array(c) for c in init]), epsilon=0.0)
    return [list(map(float, c)) for c in model.clusterCenters]


def spark_pagerank(sc, graph, iterations, damping):
    edges = sc.textFile(str(graph)).map(lambda l: tuple(int(x) for x in l.split())).distinct()
    pages = edges.flatMap(lambda e: e).distinct().cache()
    n = pages.count()
    links = edges.groupByKey().mapValues(list).cache()
    ranks = pages.map(lambda p: (p, 1.0 / n))
    for _ in range(iterations):
        joined = ranks.leftOuterJoin(links)
        dangling = joined.filter(lambda kv: not kv[1][1]).map(lambda kv: kv[1][0]).sum()
        contribs = joined.flatMap(
            lambda kv: [(d, kv[1][0] / len(kv[1][1])) for d in (kv[1][1] or [])])
        sums = contribs.reduceByKey(lambda a, b: a + b)
        base = (1 - damping) / n + damping * dangling / n
        ranks = pages.map(lambda p: (p, 0.0)).leftOuterJoin(sums).mapValues(
            lambda v, b=base: b + damping * (v[1] or 0.0))
    return dict(ranks.collect())


def close(a, b, tol):
    return abs(a - b) <= tol * max(abs(a), abs(b), 1e-300)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=400_000)
    ap.add_argument("--pages", type=int, default=400_000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--kmeans-iterations", type=int, default=5)
    ap.add_argument("--pagerank-iterations", type=int, default=2)
    a = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "sluice-cli"], cwd=ROOT, check=True)
    w = pathlib.Path(tempfile.mkdtemp(prefix="sluice-hibench-"))
    sh(S, "gen", "kmeans", "--points", a.points, "--dims", "20", "--clusters", "10", "--out", w / "points")
    sh(S, "gen", "graph", "--pages", a.pages, "--out", w / "graph")
    th = ["--threads", a.threads]
    sh(S, "run", "kmeans", "--clusters", "10", "--iterations", "0", *th, "--input", w / "points",
       "--output", w / "init", "-q")
    init = centres(w / "init")
    sc = spark_session(a.threads)
    rows = []
    ki, pi = a.kmeans_iterations, a.pagerank_iterations
    for name, iters, sluice_job, spark_job, check in [
        ("kmeans", ki,
         lambda r: ["run", "kmeans", "--clusters", "10", "--iterations", ki, *th,
                    "--input", w / "points", "--output", w / f"km{r}", "-q"],
         lambda: spark_kmeans(sc, w / "points", init, ki),
         lambda r, got: all(close(x, y, 1e-6) for c, d in zip(centres(w / f"km{r}"), got)
                            for x, y in zip(c, d))),
        ("pagerank", pi,
         lambda r: ["run", "pagerank", "--iterations", pi, *th, "--reducers", a.threads,
                    "--input", w / "graph", "--output", w / f"pr{r}", "-q"],
         lambda: spark_pagerank(sc, w / "graph", pi, 0.85),
         lambda r, got: (lambda s: s.keys() == got.keys()
                         and all(close(s[k], got[k], 1e-9) for k in s))(ranks(w / f"pr{r}"))),
    ]:
        sl, sp = [], []
        for r in range(a.runs):
            t, _ = timed(lambda: sh(S, *sluice_job(r)))
            sl.append(t)
            t, got = timed(spark_job)
            sp.append(t)
            assert check(r, got), f"{name}: Sluice's and Spark's answers differ"
        s, p = statistics.median(sl), statistics.median(sp)
        rows.append((name, iters, s, p))
        print(f"{name}: sluice {sl} spark {sp}", flush=True)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), "unknown")
    print(f"\n{a.points} points (20 dims), {a.pages} pages, {a.threads} threads, medians of "
          f"{a.runs}, CPU {cpu}; answers matched\n")
    print("| job | iterations | Sluice s | Spark s | Sluice s/iteration | Spark s/iteration | Spark / Sluice |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, it, s, p in rows:
        print(f"| {name} | {it} | {s:.2f} | {p:.2f} | {s / it:.3f} | {p / it:.3f} | {p / s:.1f}x |")
    subprocess.run(["rm", "-rf", str(w)])


if __name__ == "__main__":
    main()
