#!/usr/bin/env bash
# Cluster benchmarks: an empty job's latency end to end, and word count on
# a 2-worker embedded cluster against the local engine on the same data
# (answers compared byte for byte). Usage: bench/cluster.sh [SIZE] [RUNS]
set -euo pipefail
SIZE=${1:-256MB}
RUNS=${2:-3}
cd "$(dirname "$0")/.."
cargo build --release -q
S=$PWD/target/release/sluice
W=$(mktemp -d)
trap '$S cluster down --dir "$W/cl" >/dev/null 2>&1 || true; rm -rf "$W"' EXIT
$S gen text --size "$SIZE" --out "$W/text" >/dev/null
$S cluster up --workers 2 --dir "$W/cl" >/dev/null
C=(--cluster "$W/cl")
# Replication 2: on two workers every block is local to both, so the
# scheduler can balance maps without giving up locality (HDFS defaults to 3).
$S put "$W/text" --dataset words --block-size 32MB --replication 2 "${C[@]}" >/dev/null
: > "$W/empty.txt"
$S put "$W/empty.txt" --dataset empty "${C[@]}" >/dev/null
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
now() { date +%s.%N; }

echo "empty job (0 maps, 1 reduce), wall clock of sluice submit, and coordinator time:"
for i in $(seq 5); do
  t0=$(now)
  $S submit "${C[@]}" wordcount --reducers 1 --input empty --output "e$i" --report "$W/e.json" -q
  t1=$(now)
  echo "$(echo "$t1 - $t0" | bc) $(python3 -c "import json;print(json.load(open('$W/e.json'))['phases']['total_s'])")"
done | tee "$W/empty.txt.times"
echo "median submit wall s: $(cut -d' ' -f1 "$W/empty.txt.times" | median)  coordinator s: $(cut -d' ' -f2 "$W/empty.txt.times" | median)"

echo "word count $SIZE, 2 reducers: local engine (2 threads) vs 2-worker cluster (1 slot each)"
for i in $(seq "$RUNS"); do
  sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
  t0=$(now); $S run wordcount --input "$W/text" --output "$W/local$i" --reducers 2 --threads 2 -q; t1=$(now)
  sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
  t2=$(now); $S submit "${C[@]}" wordcount --reducers 2 --input words --output "c$i" --report "$W/c$i.json" -q; t3=$(now)
  $S get "c$i" "$W/got$i" "${C[@]}" >/dev/null
  rm -f "$W/local$i/_SUCCESS"
  diff -r "$W/local$i" "$W/got$i" >/dev/null || { echo "ANSWERS DIFFER in run $i"; exit 1; }
  loc=$(python3 -c "import json;r=json.load(open('$W/c$i.json'));print(r['data_local_maps'], r['maps'])")
  echo "$(echo "$t1 - $t0" | bc) $(echo "$t3 - $t2" | bc) $loc"
done | tee "$W/wc.times"
l=$(cut -d' ' -f1 "$W/wc.times" | median); c=$(cut -d' ' -f2 "$W/wc.times" | median)
echo "median local s: $l  cluster s: $c  ratio cluster/local: $(echo "scale=3; $c / $l" | bc)  (answers identical; data-local maps/maps per run in column 3-4)"
