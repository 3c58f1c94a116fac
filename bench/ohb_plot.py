#!/usr/bin/env python3
"""Plots of `sluice bench ohb` results (and of `bench/ohb.sh`'s merged runs).

Usage: ohb_plot.py RESULTS.json OUT_DIR

- latency.png: job latency against shuffle size, one panel per pattern,
  one line per pair size and maps/reduces (and per label/engine when the
  file holds several), like the seed's figures.
- util-<n>.png: per-node CPU (cores of the node's Sluice process) and
  network receive rate, sampled every 100 ms, for the median run of each
  configuration (the largest shuffle of each pattern when there are many).
"""
import json
import sys
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def fmt_bytes(n):
    if n and n < 1e6 and n % 1024 == 0:
        return f"{n // 1024} KiB"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} B"


def latency_plot(rows, out):
    patterns = sorted({r["config"]["pattern"] for r in rows})
    fig, axes = plt.subplots(1, len(patterns), figsize=(5 * len(patterns), 4), squeeze=False)
    for ax, pattern in zip(axes[0], patterns):
        lines = defaultdict(list)
        for r in rows:
            c = r["config"]
            if c["pattern"] != pattern:
                continue
            name = f'{r.get("label") or r["engine"]} {c["maps"]}/{c["reduces"]} {fmt_bytes(c["pair_size"])}'
            lines[name].append((r["payload_bytes"] / 1e6, r["latency_s"]))
        for name, pts in sorted(lines.items()):
            pts.sort()
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
        ax.set_title(f"MR-{pattern.upper()}")
        ax.set_xlabel("shuffle size (MB)")
        ax.set_ylabel("job latency (s)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(out / "latency.png", dpi=120)
    plt.close(fig)


def util_plot(row, path):
    run = row["median_run"]
    fig, (cpu, net) = plt.subplots(2, 1, figsize=(8, 5), sharex=True)
    for node in run["nodes"]:
        s = node["series"]
        if not s:
            continue
        t0 = s[0]["t_ms"]
        t = [(x["t_ms"] - t0) / 1e3 for x in s]
        cpu.plot(t, [x["proc_cores"] for x in s], label=node["node"])
        rx = [max(x["rx_bps"], 0) / 1e6 for x in s]
        if max(rx, default=0) == 0:
            rx = [x["lo_bps"] / 1e6 for x in s]
        net.plot(t, rx, label=node["node"])
    c = row["config"]
    cpu.set_title(
        f'MR-{c["pattern"].upper()} {c["maps"]}/{c["reduces"]}, pair {fmt_bytes(c["pair_size"])}, '
        f'shuffle {fmt_bytes(row["payload_bytes"])}: {row["latency_s"]:.2f} s ({row.get("label") or row["engine"]})'
    )
    cpu.set_ylabel("CPU (cores)")
    net.set_ylabel("receive (MB/s)")
    net.set_xlabel("time (s)")
    for ax in (cpu, net):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main():
    rows = json.load(open(sys.argv[1]))
    out = Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    latency_plot(rows, out)
    if len(rows) <= 6:
        chosen = rows
    else:
        best = {}
        for r in rows:
            key = (r.get("label"), r["engine"], r["config"]["pattern"])
            if key not in best or r["payload_bytes"] > best[key]["payload_bytes"]:
                best[key] = r
        chosen = list(best.values())
    for i, r in enumerate(chosen):
        util_plot(r, out / f"util-{i}.png")


if __name__ == "__main__":
    main()
