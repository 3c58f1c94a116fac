#!/usr/bin/env bash
# Delay scheduling and fair sharing, after Zaharia et al. (EuroSys 2010):
# a seeded stream of small jobs (grep over a 2-block data set) and large
# ones (word count over a 32-block data set) submitted to a 4-worker
# embedded cluster (2 map and 2 reduce slots each, replication 2), under
# FIFO, fair sharing without delay (--delay-node 0: any free slot is
# taken), and fair sharing with delay scheduling (the default 40 missed
# offers). Reports maps by locality level, response times per job size
# (median, p95) and the makespan; every job's answer is checked against
# the first run's. Usage: bench/scheduler.sh [JOBS] [SEED]
set -euo pipefail
JOBS=${1:-16}
SEED=${2:-7}
cd "$(dirname "$0")/.."
cargo build --release -q
S=$PWD/target/release/sluice
W=$(mktemp -d)
trap '$S cluster down --dir "$W/cl" >/dev/null 2>&1 || true; rm -rf "$W"' EXIT
$S gen text --size 128MB --seed 3 --out "$W/big" >/dev/null
for i in 0 1 2 3 4 5 6 7; do
  $S gen text --size 8MB --seed $((10 + i)) --out "$W/small$i" >/dev/null
done
# The schedule: job i is small (grep) or large (word count) and arrives
# after a seeded gap; the same for every mode.
python3 - "$JOBS" "$SEED" > "$W/schedule" <<'PY'
import random, sys
n, seed = int(sys.argv[1]), int(sys.argv[2])
r = random.Random(seed)
for i in range(n):
    kind = "large" if r.random() < 0.25 else "small"
    print(i, kind, r.randrange(8), round(r.expovariate(1 / 0.4), 3))
PY

run_mode() {  # NAME COORDINATOR-FLAGS
  local name=$1 flags=$2 dir="$W/$1"
  mkdir -p "$dir"
  $S cluster down --dir "$W/cl" >/dev/null 2>&1 || true
  rm -rf "$W/cl"
  $S cluster up --workers 4 --slots 2 --dir "$W/cl" --coordinator-flags "$flags" >/dev/null
  local C=(--cluster "$W/cl")
  $S put "$W/big" --dataset big --block-size 4MB --replication 2 "${C[@]}" >/dev/null
  for i in 0 1 2 3 4 5 6 7; do
    $S put "$W/small$i" --dataset "small$i" --block-size 4MB --replication 2 "${C[@]}" >/dev/null
  done
  sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
  local t0; t0=$(date +%s.%N)
  while read -r i kind set gap; do
    sleep "$gap"
    if [ "$kind" = small ]; then
      $S submit "${C[@]}" --pool "p$i" grep --pattern 'th[aeiou]' --input "small$set" \
        --output "o$i" --report "$dir/$i.json" -q &
    else
      $S submit "${C[@]}" --pool "p$i" wordcount --reducers 4 --input big \
        --output "o$i" --report "$dir/$i.json" -q &
    fi
  done < "$W/schedule"
  wait
  local t1; t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc > "$dir/makespan"
  for i in $(cut -d' ' -f1 "$W/schedule"); do
    $S get "o$i" "$dir/out$i" "${C[@]}" >/dev/null
  done
}

run_mode fifo "--scheduler fifo"
run_mode fair-nodelay "--scheduler fair --delay-node 0 --delay-rack 0 --delay-datacenter 0"
run_mode fair-delay "--scheduler fair"

python3 - "$W" <<'PY'
import json, statistics, sys, filecmp, pathlib
w = pathlib.Path(sys.argv[1])
sched = [l.split() for l in (w / "schedule").read_text().splitlines()]
def same(a, b):
    fa = sorted(p.name for p in a.iterdir())
    return fa == sorted(p.name for p in b.iterdir()) and all(
        filecmp.cmp(a / f, b / f, shallow=False) for f in fa)
print(f"{len(sched)} jobs ({sum(k == 'small' for _, k, *_ in sched)} small), 4 workers x 2 map slots")
print("| mode | node-local maps | rack | small median s | small p95 s | large median s | makespan s | answers |")
print("|---|---|---|---|---|---|---|---|")
for mode in ["fifo", "fair-nodelay", "fair-delay"]:
    d = w / mode
    levels = {}
    resp = {"small": [], "large": []}
    ok = True
    for i, kind, *_ in sched:
        r = json.loads((d / f"{i}.json").read_text())
        for lvl, n in r["cluster"]["maps_by_level"].items():
            levels[lvl] = levels.get(lvl, 0) + n
        resp[kind].append(r["phases"]["total_s"])
        ok &= same(w / "fifo" / f"out{i}", d / f"out{i}")
    maps = sum(levels.values())
    q = lambda v, p: sorted(v)[min(len(v) - 1, int(p * len(v)))] if v else float("nan")
    med = lambda v: statistics.median(v) if v else float("nan")
    # On their block's worker: from its disk, or its block cache.
    local = levels.get('node', 0) + levels.get('cache', 0)
    print(f"| {mode} | {local / maps:.0%} | {levels.get('rack', 0) / maps:.0%} "
          f"| {med(resp['small']):.2f} | {q(resp['small'], 0.95):.2f} | {med(resp['large']):.2f} "
          f"| {float((d / 'makespan').read_text()):.2f} | {'same' if ok else 'DIFFER'} |")
PY
