#!/usr/bin/env bash
# The OHB shuffle micro-benchmarks on the namespace testbed (bench/netns.sh:
# one worker per network namespace, veth links through a bridge) with the
# links limited to 1 Gbit/s and 10 Gbit/s and unlimited, as seed 001
# compared networks. Each rate's results go to bench-results/ohb/netns-RATE
# and the merged table and plots to bench-results/ohb/netns. The probe's
# worker-to-worker bandwidth is recorded beside each run, so per-node
# shuffle throughput can be read against it.
# Needs root. Usage: bench/ohb-netns.sh [WORKERS] [SHUFFLE_SIZE] [RUNS] [--sweep]
set -euo pipefail
N=${1:-2}
SIZE=${2:-256MB}
RUNS=${3:-3}
SWEEP=${4:-}
cd "$(dirname "$0")/.."
cargo build --release -q
S=$PWD/target/release/sluice
OUT=bench-results/ohb
for rate in 1gbit 10gbit unlimited; do
  dir=$OUT/netns-$rate
  rm -rf "$dir"
  if [ "$SWEEP" = --sweep ]; then
    what=(--sweep --sizes "$SIZE" --runs 1)
    patterns=(all)
  else
    what=(--maps 8 --reduces 4 --shuffle-size "$SIZE" --pair-size 1KiB --runs "$RUNS")
    patterns=(avg rand skew)
  fi
  PATTERNS="${patterns[*]}" bash bench/netns.sh "$N" "$rate" 1MB -- bash -c '
    set -e
    S=$1; dir=$2; rate=$3; shift 3
    mkdir -p "$dir"
    echo "$PROBE_MB_S" > "$dir/probe_mb_s"
    for p in $PATTERNS; do
      if [ "$p" = all ]; then pat=(); else pat=(--pattern "$p"); fi
      "$S" bench ohb --coordinator "$COORD" --label "$rate" --out "$dir/$p" "${pat[@]}" "$@"
    done
  ' _ "$S" "$dir" "$rate" "${what[@]}"
done
python3 - "$OUT" <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
rows = []
for d in sorted(out.glob("netns-*")):
    probe = None
    try:
        probe = float((d / "probe_mb_s").read_text().strip())
    except (OSError, ValueError):
        pass
    for f in sorted(d.glob("*/results.json")):
        for r in json.load(open(f)):
            r["probe_mb_s"] = probe
            rows.append(r)
merged = out / "netns"
merged.mkdir(exist_ok=True)
json.dump(rows, open(merged / "results.json", "w"), indent=1)
lines = ["| link | pattern | maps/reduces | pair | shuffle | latency s | net rx MB/s per node over shuffle+reduce (/proc) | peak rx MB/s per node (100 ms) | probe MB/s (one flow) | rx / probe |",
         "|---|---|---|---|---|---|---|---|---|---|"]
for r in rows:
    c = r["config"]
    peak = max((n["peak_rx_mb_s"] for n in r["median_run"]["nodes"]), default=0)
    pr = r.get("probe_mb_s")
    rx = r["net_rx_mb_s_per_node"]
    share = f"{rx / pr:.0%}" if pr else "-"
    lines.append(f'| {r["label"]} | {c["pattern"]} | {c["maps"]}/{c["reduces"]} | {c["pair_size"]} | {r["payload_bytes"] / 1e6:.0f} MB | {r["latency_s"]:.3f} | {rx:.0f} | {peak:.0f} | {pr if pr else "-"} | {share} |')
(merged / "results.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
PY
py=.venv/bin/python; [ -x "$py" ] || py=python3
"$py" bench/ohb_plot.py "$OUT/netns/results.json" "$OUT/netns" || echo "plots need matplotlib (bash bench/setup.sh)"
