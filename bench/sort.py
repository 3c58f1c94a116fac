#!/usr/bin/env python3
"""Sort: Sluice against GNU sort (C locale, same memory, same threads) on the
same generated text; the output is checked to be in order and a permutation
of the input (line count and an order-independent checksum of all lines).

Usage: python3 bench/sort.py [--size 2GB] [--memory 256MB] [--threads 2] [--runs 3]
"""
import argparse
import json
import os
import statistics
import subprocess
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SLUICE = ROOT / "target" / "release" / "sluice"


def multiset(paths):
    """(lines, sum of CRC32 of each line mod 2^64): equal for permutations."""
    n = total = 0
    for p in paths:
        with open(p, "rb") as f:
            for line in f:
                n += 1
                total = (total + zlib.crc32(line)) & (2**64 - 1)
    return n, total


def in_order(paths):
    prev = b""
    for p in paths:
        with open(p, "rb") as f:
            for line in f:
                if line < prev:
                    return False
                prev = line
    return True


def timed(cmd, runs, **kw):
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, **kw)
        times.append(time.perf_counter() - t)
    return times


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="2GB")
    ap.add_argument("--memory", default="256MB")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--work", default=str(ROOT / "bench-results" / "sort"))
    a = ap.parse_args()
    work = Path(a.work)
    data = work / f"text-{a.size}"
    if not (data / "part-00000").exists():
        subprocess.run([str(SLUICE), "gen", "text", "--size", a.size, "--seed", "7",
                        "--out", str(data), "--overwrite"], check=True)
    inputs = sorted(data.glob("part-*"))
    out = work / "sluice-out"
    report = work / "sluice-report.json"
    t_sluice = timed([str(SLUICE), "run", "sort", "--input", str(data), "--output", str(out),
                      "--memory", a.memory, "--threads", str(a.threads), "--overwrite", "-q",
                      "--report", str(report)], a.runs)
    rss = json.loads(report.read_text())["local"]["peak_rss_bytes"]
    parts = sorted(out.glob("part-r-*"))
    tmp = work / "gnu-tmp"
    tmp.mkdir(exist_ok=True)
    gnu_out = work / "gnu-sorted.txt"
    env = dict(os.environ, LC_ALL="C")
    t_gnu = timed(["sort", "-S", a.memory.replace("MB", "M").replace("GB", "G"),
                   f"--parallel={a.threads}", "-T", str(tmp), "-o", str(gnu_out)]
                  + [str(p) for p in inputs], a.runs, env=env)
    ok_order = in_order(parts)
    want, got = multiset(inputs), multiset(parts)
    same_as_gnu = got == multiset([gnu_out])
    ms, mg = statistics.median(t_sluice), statistics.median(t_gnu)
    print(f"sort, {a.size} of text ({want[0]} lines), memory {a.memory}, {a.threads} threads, median of {a.runs}")
    print(f"Sluice   {ms:7.2f} s  (range {min(t_sluice):.2f}-{max(t_sluice):.2f})  peak RSS {rss / 1e6:.0f} MB")
    print(f"GNU sort {mg:7.2f} s  (range {min(t_gnu):.2f}-{max(t_gnu):.2f})  ratio {mg / ms:.2f}x")
    print(f"in order: {ok_order}; permutation of input: {got == want}; same lines as GNU sort: {same_as_gnu}")
    if not (ok_order and got == want and same_as_gnu):
        raise SystemExit("WRONG ANSWER")


if __name__ == "__main__":
    main()
