#!/usr/bin/env bash
# The control plane at scale (issue 51): `sluice bench cluster-sim` over a
# sweep of simulated workers (100, 1,000, 5,000; 4 slots each) and job
# sizes (10,000, 100,000, 1,000,000 maps; 500 ms tasks, 200 ms
# heartbeats). Each point starts a real coordinator process, drives it
# with simulated workers over the real protocol, and writes its JSON
# report; the plots of slot utilization, heartbeat p99 and the
# coordinator's peak memory go to docs/scale-*.svg.
#
# Usage: bench/scale.sh [--quick] [OUT_DIR]
#   --quick: 100 and 1,000 workers with 10,000 maps, and 1,000 workers
#            with 100,000 (minutes, not hours).
# Environment: TASK_MS (500), HEARTBEAT_MS (200), REDUCES (100),
#   WORKERS and MAPS (space-separated lists, overriding the sweep).
set -euo pipefail
QUICK=0
if [ "${1:-}" = --quick ]; then QUICK=1; shift; fi
OUT=${1:-bench-results/scale}
cd "$(dirname "$0")/.."
cargo build --release -q -p sluice-cli --bin sluice
S=$PWD/target/release/sluice
mkdir -p "$OUT"
TASK_MS=${TASK_MS:-500}
HEARTBEAT_MS=${HEARTBEAT_MS:-200}
REDUCES=${REDUCES:-100}
if [ "$QUICK" = 1 ]; then
  POINTS=${POINTS:-"100:10000 1000:10000 1000:100000"}
else
  POINTS=""
  for w in ${WORKERS:-100 1000 5000}; do
    for m in ${MAPS:-10000 100000 1000000}; do POINTS="$POINTS $w:$m"; done
  done
fi
# Descriptors: a connection a simulated worker on each side.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
for p in $POINTS; do
  w=${p%%:*} m=${p##*:}
  echo "== $w workers, $m maps"
  "$S" bench cluster-sim --workers "$w" --slots 4 --maps "$m" --reduces "$REDUCES" \
    --task-ms "$TASK_MS" --heartbeat-ms "$HEARTBEAT_MS" --timeout-s 7200 \
    --report "$OUT/w$w-m$m.json"
done
python3 bench/scale_plot.py "$OUT" docs
