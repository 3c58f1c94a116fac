#!/usr/bin/env python3
"""k-means and PageRank, Sluice's local engine against Spark (local[N]) and
Hadoop MapReduce (LocalJobRunner) on the same generated files, answers
checked against Sluice's.

Usage: .venv/bin/python bench/hibench.py [--points 400000] [--pages 400000]
       [--threads 2] [--runs 3] [--engines sluice,spark,hadoop]

k-means: Sluice's `kmeans` (init job, then --iterations jobs) against
MLlib's RDD `KMeans.train` from the same initial centres (Sluice's init
job's), for the same iterations (epsilon 0: no early stop). PageRank:
Sluice's `pagerank` against the classic RDD PageRank with networkx's
dangling handling, same iterations and damping. Times are wall clocks,
medians of --runs: Sluice's whole `sluice run` (its iterations' jobs, init
or build included), Spark's from reading the text to the collected answer
(its session's start-up excluded); per iteration is that over the
iterations. Sluice is built in release mode first.

Hadoop: the jobs of bench/hadoop (`sluice.bench.Iterative`, built with
Maven from Maven Central on first use), written by hand with Sluice's
logic: k-means a map-only job writing the points once as binary vectors
(a SequenceFile of little-endian doubles; Sluice's points job writes
fixed-length records of them), then one job per iteration over them from
the same initial centres (passed in the job's Configuration; mapper to the
nearest centre, combiner partial sums, one reducer), PageRank a build job, then a contribute and a map-only
rank job per iteration with the dangling rank passed as a counter; one JVM
(`-Xmx2g`), LocalJobRunner with --threads map and reduce threads
(`mapreduce.local.map.tasks.maximum`), default splits. Its whole time is
the `java` process's (JVM start included).

Per iteration: Sluice's and Hadoop's iteration jobs, k-means' points job
counted with them (Sluice's from its --report, Hadoop's as its driver
times each job), over the iterations;
Spark's is its whole time over the iterations (its jobs are not apart).
Answers: k-means centres within 1e-6 relative, PageRank ranks within 1e-9.
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


def hadoop_classpath():
    hd = ROOT / "bench" / "hadoop"
    jar = hd / "target" / "hadoop-jobs-1.0.jar"
    srcs = list((hd / "src").rglob("*.java")) + [hd / "pom.xml"]
    if not jar.exists() or max(f.stat().st_mtime for f in srcs) > jar.stat().st_mtime:
        print("building the Hadoop jobs (Maven Central) ...", file=sys.stderr)
        subprocess.run(["mvn", "-q", "-B", "-f", str(hd / "pom.xml"), "package", "-DskipTests"],
                       check=True)
    return f"{jar}:{hd}/target/lib/*"


def hadoop(cp, *args):
    """Runs sluice.bench.Iterative; the seconds of its iteration jobs."""
    out = sh("java", "-Xmx2g", "-cp", cp, "sluice.bench.Iterative", *args).stdout
    times = [(l.split()[1], float(l.split()[2])) for l in out.splitlines() if l.startswith("job ")]
    return sum(t for name, t in times if name != "pagerank-build")


def sluice_iterations(report):
    """The seconds of a chain's iteration jobs (all but its first, the init
    or build job), from Sluice's --report."""
    import json
    return sum(j["phases"]["total_s"] for j in json.load(open(report))[1:])


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
    ap.add_argument("--engines", default="sluice,spark,hadoop",
                    help="sluice and any of spark, hadoop (comma-separated)")
    a = ap.parse_args()
    engines = a.engines.split(",")
    unknown = set(engines) - {"sluice", "spark", "hadoop"}
    if unknown or "sluice" not in engines:
        ap.error(f"--engines: sluice and any of spark, hadoop (not {sorted(unknown)})")
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "sluice-cli"], cwd=ROOT, check=True)
    cp = hadoop_classpath() if "hadoop" in engines else None
    w = pathlib.Path(tempfile.mkdtemp(prefix="sluice-hibench-"))
    sh(S, "gen", "kmeans", "--points", a.points, "--dims", "20", "--clusters", "10", "--out", w / "points")
    sh(S, "gen", "graph", "--pages", a.pages, "--out", w / "graph")
    th = ["--threads", a.threads]
    sh(S, "run", "kmeans", "--clusters", "10", "--iterations", "0", *th, "--input", w / "points",
       "--output", w / "init", "-q")
    init = centres(w / "init")
    sc = spark_session(a.threads) if "spark" in engines else None
    ki, pi = a.kmeans_iterations, a.pagerank_iterations
    same_centres = (lambda r, got: all(close(x, y, 1e-6) for c, d in zip(centres(w / f"km{r}"), got)
                                       for x, y in zip(c, d)))
    same_ranks = (lambda r, got: (lambda s: s.keys() == got.keys()
                                  and all(close(s[k], got[k], 1e-9) for k in s))(ranks(w / f"pr{r}")))
    jobs = [
        ("kmeans", ki,
         lambda r: ["run", "kmeans", "--clusters", "10", "--iterations", ki, *th,
                    "--input", w / "points", "--output", w / f"km{r}", "-q"],
         lambda: spark_kmeans(sc, w / "points", init, ki),
         lambda: hadoop(cp, "kmeans", w / "points", w / "init", w / "hkm", a.threads, ki),
         lambda: centres(w / "hkm"),
         same_centres),
        ("pagerank", pi,
         lambda r: ["run", "pagerank", "--iterations", pi, *th, "--reducers", a.threads,
                    "--input", w / "graph", "--output", w / f"pr{r}", "-q"],
         lambda: spark_pagerank(sc, w / "graph", pi, 0.85),
         lambda: hadoop(cp, "pagerank", w / "graph", w / "hpr", a.threads, pi, 0.85),
         lambda: ranks(w / "hpr"),
         same_ranks),
    ]
    rows = []
    for name, iters, sluice_job, spark_job, hadoop_job, hadoop_answer, check in jobs:
        t = {e: [] for e in engines}
        per = {"sluice": [], "hadoop": []}
        for r in range(a.runs):
            report = w / f"report-{name}-{r}.json"
            s, _ = timed(lambda: sh(S, *sluice_job(r), "--report", report))
            t["sluice"].append(s)
            per["sluice"].append(sluice_iterations(report))
            if "spark" in engines:
                s, got = timed(spark_job)
                t["spark"].append(s)
                assert check(r, got), f"{name}: Sluice's and Spark's answers differ"
            if "hadoop" in engines:
                s, its = timed(hadoop_job)
                t["hadoop"].append(s)
                per["hadoop"].append(its)
                assert check(r, hadoop_answer()), f"{name}: Sluice's and Hadoop's answers differ"
            print(f"{name} run {r}: " + ", ".join(f"{e} {t[e][-1]:.2f} s" for e in engines)
                  + "; iteration jobs: " + ", ".join(f"{e} {v[-1]:.2f} s" for e, v in per.items() if v),
                  flush=True)
        med = {e: statistics.median(v) for e, v in t.items()}
        it = {"sluice": statistics.median(per["sluice"]) / iters}
        if "spark" in engines:
            it["spark"] = med["spark"] / iters
        if "hadoop" in engines:
            it["hadoop"] = statistics.median(per["hadoop"]) / iters
        rows.append((name, iters, med, it))
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), "unknown")
    print(f"\n{a.points} points (20 dims), {a.pages} pages, {a.threads} threads, medians of "
          f"{a.runs}, CPU {cpu} ({os.cpu_count()} cores); answers matched\n")
    names = {"sluice": "Sluice", "spark": "Spark", "hadoop": "Hadoop"}
    head = ["job", "iterations"] + [f"{names[e]} s" for e in engines] \
        + [f"{names[e]} s/iteration" for e in engines] \
        + [f"{names[e]} / Sluice per iteration" for e in engines if e != "sluice"]
    print("| " + " | ".join(head) + " |")
    print("|---|" + "---:|" * (len(head) - 1))
    for name, iters, med, it in rows:
        cells = [name, str(iters)] + [f"{med[e]:.2f}" for e in engines] \
            + [f"{it[e]:.3f}" for e in engines] \
            + [f"{it[e] / it['sluice']:.1f}x" for e in engines if e != "sluice"]
        print("| " + " | ".join(cells) + " |")
    subprocess.run(["rm", "-rf", str(w)])


if __name__ == "__main__":
    main()
