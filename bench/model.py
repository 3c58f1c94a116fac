#!/usr/bin/env python3
"""Grep and sort against the performance model's ideal on this machine.

Grep and sort run on generated text, TeraSort on TeraGen records (checked
with `sluice teravalidate --against` the input).

Runs `sluice probe` first unless a profile exists, then each job several
times with a cold page cache (when /proc/sys/vm/drop_caches is writable; the
output says which), and prints measured vs ideal time per phase from the
jobs' JSON reports. Grep's output is checked against a Python scan of the
same files; sort's order and line count are checked.

Usage: python3 bench/model.py [--size 2GB] [--runs 3] [--threads 2] [--memory 256MB]
                              [--jobs grep,sort,terasort]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SLUICE = ROOT / "target" / "release" / "sluice"


def drop_caches():
    try:
        subprocess.run(["sync"], check=True)
        Path("/proc/sys/vm/drop_caches").write_text("1\n")
        return True
    except OSError:
        return False


def run(job, data, out, a, extra):
    report = out.with_suffix(".json")
    cold = drop_caches()
    subprocess.run([str(SLUICE), "run", job, "--input", str(data), "--output", str(out),
                    "--threads", str(a.threads), "--memory", a.memory, "--overwrite", "-q",
                    "--report", str(report)] + extra, check=True)
    return json.loads(report.read_text())["local"], cold  # the local engine's account


def check_grep(data, out, pattern):
    rx = re.compile(pattern.encode())
    want = 0
    for p in sorted(data.glob("part-*")):
        with open(p, "rb") as f:
            want += sum(1 for line in f if rx.search(line))
    got = sum(1 for p in out.glob("part-m-*") for _ in open(p, "rb"))
    assert got == want, f"grep: {got} lines, expected {want}"


def check_sort(out, lines):
    prev, n = b"", 0
    for p in sorted(out.glob("part-r-*")):
        with open(p, "rb") as f:
            for line in f:
                assert line >= prev, "sort output out of order"
                prev, n = line, n + 1
    assert n == lines, f"sort: {n} lines, expected {lines}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="2GB")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--memory", default="256MB")
    ap.add_argument("--work", default=str(ROOT / "bench-results" / "model"))
    ap.add_argument("--jobs", default="grep,sort,terasort", help="which jobs, comma-separated")
    a = ap.parse_args()
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    profile = Path(os.environ.get("SLUICE_HARDWARE", Path.home() / ".sluice" / "hardware.json"))
    if not profile.exists():
        subprocess.run([str(SLUICE), "probe", "--dir", str(work), "--size", a.size], check=True)
    wanted = a.jobs.split(",")
    data = work / f"text-{a.size}"
    if {"grep", "sort"} & set(wanted) and not (data / "part-00000").exists():
        subprocess.run([str(SLUICE), "gen", "text", "--size", a.size, "--out", str(data), "--overwrite"], check=True)
    tera = work / f"tera-{a.size}"
    if "terasort" in wanted and not (tera / "part-00000").exists():
        subprocess.run([str(SLUICE), "gen", "tera", "--size", a.size, "--out", str(tera), "--overwrite"], check=True)
    pattern = "^qz"
    jobs = [(j, x) for j, x in [("grep", ["--pattern", pattern]), ("sort", []), ("terasort", [])]
            if j in wanted]
    print(f"{a.size} of text, {a.threads} threads, --memory {a.memory}, median of {a.runs}")
    for job, extra in jobs:
        out = work / f"{job}-out"
        reports = []
        src = tera if job == "terasort" else data
        for _ in range(a.runs):
            r, cold = run(job, src, out, a, extra)
            reports.append(r)
        if job == "grep":
            check_grep(data, out, pattern)
        elif job == "sort":
            check_sort(out, reports[0]["counters"]["MAP_INPUT_RECORDS"])
        else:
            subprocess.run([str(SLUICE), "teravalidate", "--input", str(out), "--against", str(tera)], check=True)
        med = lambda f: statistics.median(f(r) for r in reports)
        m = reports[0]["model"]
        print(f"\n{job}: page cache {'dropped before each run' if cold else 'NOT dropped (no permission)'}")
        print(f"  hardware: {m['hardware']['source']}")
        print(f"  variant {m['variant']}, e_M {m['map_ratio']:.3f}, e_R {m['reduce_ratio']:.3f}")
        print(f"  residency: {m.get('residency')}")
        for mv in m.get("movements", []):
            print(f"    phase {mv['phase']} {mv['what']:<13} {mv['bytes'] / 1e6:9.1f} MB at {mv['rate'] / 1e6:8.1f} MB/s "
                  f"{mv['resource']:<7} {mv['seconds']:6.2f} s  {mv['why']}")
        for ph in ("phase1", "phase2"):
            print(f"  {ph}: measured {med(lambda r: r['model'][ph]['actual_s']):6.2f} s, "
                  f"ideal {m[ph]['ideal_s']:6.2f} s ({m[ph]['bottleneck']}-bound)")
        print(f"  total: measured {med(lambda r: r['model']['actual_seconds']):6.2f} s, ideal {m['ideal_seconds']:.2f} s, "
              f"slowdown {med(lambda r: r['model']['slowdown']):.2f}x, efficiency {med(lambda r: r['model']['efficiency']):.2f}")
        print(f"  phases: map {med(lambda r: r['phases']['map_s']):.2f} s, merge {med(lambda r: r['phases']['merge_s']):.2f} s, "
              f"reduce {med(lambda r: r['phases']['reduce_s']):.2f} s, commit {med(lambda r: r['phases']['commit_s']):.2f} s")


if __name__ == "__main__":
    main()
