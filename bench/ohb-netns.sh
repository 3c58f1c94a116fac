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
  else
    what=(--pattern avg --maps 8 --reduces 4 --shuffle-size "$SIZE" --pair-size 1KiB --runs "$RUNS")
  fi
  bash bench/netns.sh "$N" "$rate" 1MB -- bash -c '
    set -e
    S=$1; dir=$2; rate=$3; shift 3
    "$S" bench ohb --coordinator "$COORD" --label "$rate" --out "$dir" "$@"
    if [ -z "${SWEEP_ONLY:-}" ]; then
      for p in rand skew; do
        "$S" bench ohb --coordinator "$COORD" --label "$rate" --out "$dir-$p" "$@" --pattern "$p" 2>/dev/null || true
      done
    fi
    echo "$PROBE_MB_S" > "$dir/probe_mb_s"
  ' _ "$S" "$dir" "$rate" "${what[@]}"
done
python3 - "$OUT" <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
rows = []
for d in sorted(out.glob("netns-*")):
    f = d / "results.json"
    if not f.exists():
        continue
    probe = None
    for p in [d / "probe_mb_s", Path(str(d).rsplit("-", 1)[0]) / "probe_mb_s"]:
        if p.exists():
            try:
                probe = float(p.read_text().strip())
            except ValueError:
                pass
            break
    for r in json.load(open(f)):
        r["probe_mb_s"] = probe
        rows.append(r)
merged = out / "netns"
merged.mkdir(exist_ok=True)
json.dump(rows, open(merged / "results.json", "w"), indent=1)
lines = ["| link | pattern | maps/reduces | pair | shuffle | latency s | MB/s per node (pairs / latency) | peak rx MB/s per node (/proc) | probe MB/s | per node / probe |",
         "|---|---|---|---|---|---|---|---|---|---|"]
for r in rows:
    c = r["config"]
    peak = max((n["peak_rx_mb_s"] for n in r["median_run"]["nodes"]), default=0)
    pr = r.get("probe_mb_s")
    share = f'{r["shuffle_mb_s_per_node"] / pr:.0%}' if pr else "-"
    lines.append(f'| {r["label"]} | {c["pattern"]} | {c["maps"]}/{c["reduces"]} | {c["pair_size"]} | {r["payload_bytes"] / 1e6:.0f} MB | {r["latency_s"]:.3f} | {r["shuffle_mb_s_per_node"]:.0f} | {peak:.0f} | {pr if pr else "-"} | {share} |')
(merged / "results.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
PY
py=.venv/bin/python; [ -x "$py" ] || py=python3
"$py" bench/ohb_plot.py "$OUT/netns/results.json" "$OUT/netns" || echo "plots need matplotlib (bash bench/setup.sh)"
