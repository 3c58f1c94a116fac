#!/usr/bin/env python3
"""Plots of `bench/geo.sh` results: runtime and WAN bytes per scheduler.

Usage: geo_plot.py GEO_TSV OUT.png

One pair of panels per experiment (terasort, split, dfsio, fair): the
median seconds of each variant (bars, with every repetition as a dot) and
the median bytes the router counted into the data centers.
"""
import csv
import statistics
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(path):
    runs = defaultdict(lambda: defaultdict(list))
    with open(path) as f:
        for row in csv.DictReader(f, delimiter="\t"):
            secs = float(row["seconds"])
            wan = row["counted_wan_bytes"]
            wan = float(wan) if wan not in ("", "-") else None
            runs[row["experiment"]][row["variant"]].append((secs, wan))
    return runs


def main():
    runs = load(sys.argv[1])
    exps = list(runs)
    fig, axes = plt.subplots(2, len(exps), figsize=(4 * len(exps), 6), squeeze=False)
    for col, exp in enumerate(exps):
        variants = list(runs[exp])
        for row, (label, pick) in enumerate((("seconds", 0), ("WAN MB (router)", 1))):
            ax = axes[row][col]
            meds = []
            for i, v in enumerate(variants):
                vals = [r[pick] for r in runs[exp][v] if r[pick] is not None]
                vals = [x / 1e6 for x in vals] if pick else vals
                meds.append(statistics.median(vals) if vals else 0)
                ax.plot([i] * len(vals), vals, "k.", markersize=4)
            ax.bar(range(len(variants)), meds, color="#4a7ab5")
            ax.set_xticks(range(len(variants)))
            ax.set_xticklabels(variants, rotation=20, fontsize=8)
            ax.set_ylabel(label)
            if row == 0:
                ax.set_title(exp)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
