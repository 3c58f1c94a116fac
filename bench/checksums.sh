#!/usr/bin/env bash
# What block integrity costs: word count and TeraSort on a 2-worker
# embedded cluster, this build against an older `sluice` binary given as
# the first argument (e.g. one built from the commit before chunked
# checksums), run alternately on the same data, answers compared.
# Usage: bench/checksums.sh BEFORE_SLUICE [SIZE] [RUNS]
# AFTER_WORKER_FLAGS (e.g. "--scan-rate 0") is passed to this build's workers.
set -euo pipefail
BEFORE=$(realpath "$1")
SIZE=${2:-256MB}
RUNS=${3:-5}
cd "$(dirname "$0")/.."
cargo build --release -q
AFTER=$PWD/target/release/sluice
W=$(mktemp -d)
trap '$BEFORE cluster down --dir "$W/before" >/dev/null 2>&1 || true;
      $AFTER cluster down --dir "$W/after" >/dev/null 2>&1 || true; rm -rf "$W"' EXIT
$AFTER gen text --size "$SIZE" --out "$W/text" >/dev/null
$AFTER gen tera --size "$SIZE" --out "$W/tera" >/dev/null
for v in before after; do
  S=$BEFORE; [ $v = after ] && S=$AFTER
  flags=(); [ $v = after ] && flags=(--worker-flags "${AFTER_WORKER_FLAGS:-}")
  $S cluster up --workers 2 --slots 1 --dir "$W/$v" "${flags[@]}" >/dev/null
  $S put "$W/text" --dataset words --block-size 32MB --replication 2 --cluster "$W/$v" >/dev/null
  $S put "$W/tera" --dataset tera --block-size 32MB --replication 2 --cluster "$W/$v" >/dev/null
done
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
now() { date +%s.%N; }
job() { # VERSION NAME OUT ARGS...: wall seconds of one submit
  local v=$1 out=$2; shift 2
  local S=$BEFORE; [ "$v" = after ] && S=$AFTER
  sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
  local t0; t0=$(now)
  $S submit --cluster "$W/$v" "$@" --output "$out" -q
  echo "$(now) - $t0" | bc
}
for i in $(seq "$RUNS"); do
  for v in before after; do
    wc=$(job $v "wc$i" wordcount --reducers 2 --input words)
    ts=$(job $v "ts$i" terasort --reducers 2 --input tera)
    echo "$v $wc $ts"
  done
done | tee "$W/times"
# Answers: the two builds' outputs are identical byte for byte.
$BEFORE get wc1 "$W/wc-before" --cluster "$W/before" >/dev/null
$AFTER get wc1 "$W/wc-after" --cluster "$W/after" >/dev/null
diff -r "$W/wc-before" "$W/wc-after" >/dev/null || { echo "WORD COUNT ANSWERS DIFFER"; exit 1; }
$BEFORE get ts1 "$W/ts-before" --cluster "$W/before" >/dev/null
$AFTER get ts1 "$W/ts-after" --cluster "$W/after" >/dev/null
diff -r "$W/ts-before" "$W/ts-after" >/dev/null || { echo "TERASORT ANSWERS DIFFER"; exit 1; }
$AFTER teravalidate --input "$W/ts-after" --against "$W/tera" >/dev/null
for col in 2 3; do
  name=$([ $col = 2 ] && echo "word count" || echo "TeraSort")
  b=$(awk '$1=="before"' "$W/times" | cut -d' ' -f$col | median)
  a=$(awk '$1=="after"' "$W/times" | cut -d' ' -f$col | median)
  echo "$name $SIZE: median before ${b}s, after ${a}s, after/before $(echo "scale=3; $a / $b" | bc)"
done
echo "answers identical (TeraSort output validated); CPU: $(lscpu | sed -n 's/^Model name: *//p')"
