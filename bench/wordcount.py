#!/usr/bin/env python3
"""Word count: Sluice against DuckDB (and Phoenix++ when built locally) on the
same generated files, medians of several runs, every answer checked.

Usage: .venv/bin/python bench/wordcount.py [--size 269MB] [--threads 2]
           [--runs 5] [--work DIR] [--phoenix DIR] [--grouping hash|sort]

DuckDB's query is its fastest form for this data (the generator separates
words with single spaces and ends lines with newlines, so splitting on a
space is Hadoop's tokenization here). Each engine writes its full answer to
a file, and the answers are compared word by word.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SLUICE = ROOT / "target" / "release" / "sluice"


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def timed(fn, runs):
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return times


def read_counts(paths):
    counts = {}
    for p in paths:
        with open(p, "rb") as f:
            for line in f:
                w, _, n = line.rstrip(b"\n").rpartition(b"\t")
                if not _:
                    w, _, n = line.rstrip(b"\n").rpartition(b",")
                counts[w] = counts.get(w, 0) + int(n)
    return counts


def sluice_run(data, out, threads, grouping, memory):
    sh([str(SLUICE), "run", "wordcount", "--input", str(data), "--output", str(out),
        "--threads", str(threads), "--grouping", grouping, "--memory", memory,
        "--overwrite", "-q"])


def duckdb_run(con, data, out):
    con.execute(f"""
        COPY (
          SELECT word, count(*) AS n
          FROM (SELECT unnest(string_split(line, ' ')) AS word
                FROM read_csv('{data}/part-*', columns={{'line': 'VARCHAR'}}, delim='\x01',
                              header=false, quote='', escape='', auto_detect=false))
          WHERE word <> ''
          GROUP BY word
        ) TO '{out}' (FORMAT csv, HEADER false, DELIMITER '\t', QUOTE '')""")


def summary(name, times, base=None):
    med = statistics.median(times)
    spread = f"{min(times):.2f}-{max(times):.2f}"
    ratio = f"{med / base:.2f}x" if base else "1.00x"
    return name, med, spread, ratio


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="269MB")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--work", default=str(ROOT / "bench-results" / "wordcount"))
    ap.add_argument("--phoenix", help="a local Phoenix++ build directory")
    ap.add_argument("--grouping", default="hash")
    ap.add_argument("--memory", default="1GiB")
    a = ap.parse_args()
    import duckdb

    work = Path(a.work)
    data = work / f"text-{a.size}"
    if not (data / "part-00000").exists():
        sh([str(SLUICE), "gen", "text", "--size", a.size, "--seed", "7", "--out", str(data), "--overwrite"])
    size = sum(p.stat().st_size for p in data.glob("part-*"))
    rows = []
    out = work / "sluice-out"
    t_sluice = timed(lambda: sluice_run(data, out, a.threads, a.grouping, a.memory), a.runs)
    want = read_counts(sorted(out.glob("part-r-*")))
    rows.append(summary(f"Sluice ({a.grouping} grouping)", t_sluice))

    con = duckdb.connect()
    con.execute(f"SET threads = {a.threads}")
    dout = work / "duckdb.tsv"
    t_duck = timed(lambda: duckdb_run(con, data, dout), a.runs)
    got = read_counts([dout])
    if got != want:
        sys.exit(f"MISMATCH: DuckDB found {len(got)} words, Sluice {len(want)}")
    rows.append(summary("DuckDB", t_duck, statistics.median(t_sluice)))

    if a.phoenix:
        rows.append(phoenix(a, data, work, want, statistics.median(t_sluice)))

    print(f"word count, {size / 1e6:.0f} MB of Zipf text, {a.threads} threads, median of {a.runs}")
    print(f"{'engine':<28}{'median s':>10}{'range s':>14}{'vs Sluice':>11}")
    for name, med, spread, ratio in rows:
        print(f"{name:<28}{med:>10.2f}{spread:>14}{ratio:>11}")
    print(f"all answers identical: {len(want)} distinct words, {sum(want.values())} words")


def phoenix(a, data, work, want, base):
    """Phoenix++'s word_count on the same bytes (one concatenated file).

    It upper-cases words and prints only the top N and the total, so those
    are what is checked: the generated words are lower-case letters only.
    """
    exe = Path(a.phoenix) / "tests" / "word_count" / "word_count"
    cat = work / f"{data.name}.cat"
    size = sum(p.stat().st_size for p in data.glob("part-*"))
    if not cat.exists() or cat.stat().st_size != size or cat.stat().st_mtime < data.stat().st_mtime:
        with open(cat, "wb") as f:
            for p in sorted(data.glob("part-*")):
                f.write(p.read_bytes())
    env = dict(os.environ, MR_NUMTHREADS=str(a.threads))
    outs = []

    def run():
        outs.append(sh([str(exe), str(cat), "10"], env=env, capture_output=True).stdout.decode())

    times = timed(run, a.runs)
    top = sorted(want.items(), key=lambda kv: -kv[1])[:10]
    lines = [l.split(" - ") for l in outs[-1].splitlines() if " - " in l]
    got_top = [(w.strip().lower().encode(), int(n)) for w, n in lines]
    total = int(outs[-1].split("Total:")[1].split()[0])
    if got_top != top or total != sum(want.values()):
        sys.exit(f"MISMATCH: Phoenix++ top words {got_top[:3]}..., total {total}")
    return summary("Phoenix++ word_count", times, base)


if __name__ == "__main__":
    main()
