#!/usr/bin/env python3
"""Plots of `bench/scale.sh` results as SVG, with no plotting library.

Usage: scale_plot.py RESULTS_DIR OUT_DIR

Reads every `w*-m*.json` report of `sluice bench cluster-sim` in
RESULTS_DIR and writes OUT_DIR/scale-utilization.svg,
scale-heartbeat-p99.svg (one line per job size, against workers) and
scale-memory.svg (the coordinator's peak RSS against maps, one line per
worker count). Axes are logarithmic in workers and maps.
"""
import glob
import json
import math
import os
import sys
from collections import defaultdict

W, H = 560, 360
LEFT, RIGHT, TOP, BOTTOM = 70, 150, 40, 50
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"]


def load(d):
    rows = []
    for f in sorted(glob.glob(os.path.join(d, "w*-m*.json"))):
        with open(f) as fh:
            rows.append(json.load(fh))
    return rows


def ticks_log(lo, hi):
    out, v = [], 10 ** math.floor(math.log10(lo))
    while v <= hi * 1.0001:
        if v >= lo / 1.0001:
            out.append(v)
        v *= 10
    return out or [lo, hi]


def ticks_lin(hi):
    step = 10 ** math.floor(math.log10(hi or 1))
    if hi / step < 3:
        step /= 2
    return [i * step for i in range(int(hi / step) + 2)]


def fmt(v):
    if v >= 1e6:
        return f"{v / 1e6:g}M"
    if v >= 1e3:
        return f"{v / 1e3:g}k"
    return f"{v:g}"


def chart(title, xlabel, ylabel, series, path, goal=None, ymax=None):
    """series: {label: [(x, y)]}; x on a log axis, y linear from 0."""
    xs = [x for pts in series.values() for x, _ in pts]
    ys = [y for pts in series.values() for _, y in pts] + ([goal[0]] if goal else [])
    if not xs:
        return
    xlo, xhi = min(xs), max(xs)
    if xlo == xhi:
        xlo, xhi = xlo / 2, xhi * 2
    yhi = ymax or max(ys) * 1.15 or 1
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM

    def px(x):
        return LEFT + pw * (math.log10(x) - math.log10(xlo)) / (math.log10(xhi) - math.log10(xlo))

    def py(y):
        return TOP + ph * (1 - min(y, yhi) / yhi)

    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
         'font-family="sans-serif" font-size="12">',
         f'<rect width="{W}" height="{H}" fill="white"/>',
         f'<text x="{W / 2}" y="20" text-anchor="middle" font-size="14">{title}</text>']
    for t in ticks_log(xlo, xhi):
        o.append(f'<line x1="{px(t):.1f}" y1="{TOP}" x2="{px(t):.1f}" y2="{TOP + ph}" stroke="#ddd"/>')
        o.append(f'<text x="{px(t):.1f}" y="{TOP + ph + 16}" text-anchor="middle">{fmt(t)}</text>')
    for t in ticks_lin(yhi):
        if t > yhi:
            break
        o.append(f'<line x1="{LEFT}" y1="{py(t):.1f}" x2="{LEFT + pw}" y2="{py(t):.1f}" stroke="#ddd"/>')
        o.append(f'<text x="{LEFT - 6}" y="{py(t) + 4:.1f}" text-anchor="end">{fmt(t)}</text>')
    o.append(f'<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" stroke="black"/>')
    o.append(f'<text x="{LEFT + pw / 2}" y="{H - 12}" text-anchor="middle">{xlabel}</text>')
    o.append(f'<text transform="translate(16,{TOP + ph / 2}) rotate(-90)" '
             f'text-anchor="middle">{ylabel}</text>')
    if goal:
        o.append(f'<line x1="{LEFT}" y1="{py(goal[0]):.1f}" x2="{LEFT + pw}" y2="{py(goal[0]):.1f}" '
                 'stroke="#888" stroke-dasharray="5,4"/>')
        o.append(f'<text x="{LEFT + pw + 6}" y="{py(goal[0]) + 4:.1f}" fill="#555">{goal[1]}</text>')
    for i, (label, pts) in enumerate(sorted(series.items())):
        c = COLORS[i % len(COLORS)]
        pts = sorted(pts)
        line = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        o.append(f'<polyline points="{line}" fill="none" stroke="{c}" stroke-width="2"/>')
        for x, y in pts:
            o.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3.5" fill="{c}"/>')
        ly = TOP + 10 + 18 * i
        o.append(f'<line x1="{LEFT + pw + 6}" y1="{ly + 20}" x2="{LEFT + pw + 24}" y2="{ly + 20}" '
                 f'stroke="{c}" stroke-width="2"/>')
        o.append(f'<text x="{LEFT + pw + 28}" y="{ly + 24}">{label}</text>')
    o.append("</svg>")
    with open(path, "w") as fh:
        fh.write("\n".join(o) + "\n")
    print("wrote", path)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    rows = load(sys.argv[1])
    if not rows:
        sys.exit(f"no w*-m*.json reports in {sys.argv[1]}")
    out = sys.argv[2]
    by_maps, by_workers = defaultdict(list), defaultdict(list)
    for r in rows:
        by_maps[r["maps"]].append(r)
        by_workers[r["workers"]].append(r)
    util = {f"{fmt(m)} maps": [(r["workers"], 100 * r["slot_utilization"]) for r in rs]
            for m, rs in by_maps.items()}
    p99 = {f"{fmt(m)} maps": [(r["workers"], r["heartbeat_p99_ms"]) for r in rs]
           for m, rs in by_maps.items()}
    mem = {f"{fmt(w)} workers": [(r["maps"], r["coordinator_peak_rss_bytes"] / 2**20) for r in rs]
           for w, rs in by_workers.items()}
    chart("Slot utilization (ideal / measured makespan)", "simulated workers (4 slots)",
          "% busy", util, os.path.join(out, "scale-utilization.svg"), goal=(90, "goal 90%"), ymax=110)
    chart("Heartbeat turnaround p99", "simulated workers (4 slots)", "ms", p99,
          os.path.join(out, "scale-heartbeat-p99.svg"), goal=(50, "goal 50 ms"))
    chart("Coordinator peak RSS", "maps of the job", "MiB", mem,
          os.path.join(out, "scale-memory.svg"), goal=(1024, "1 GiB"))


if __name__ == "__main__":
    main()
