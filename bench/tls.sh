#!/usr/bin/env bash
# What TLS costs: put and get throughput of a text file and TeraSort on a
# 2-worker embedded cluster, TLS (the default) against --insecure, run
# alternately on the same data; medians of RUNS runs each.
# Usage: bench/tls.sh [PUT_SIZE] [SORT_SIZE] [RUNS]   (defaults 500MB 1GB 5)
set -euo pipefail
PUT_SIZE=${1:-500MB}
SORT_SIZE=${2:-1GB}
RUNS=${3:-5}
cd "$(dirname "$0")/.."
cargo build --release -q -p sluice-cli
S=$PWD/target/release/sluice
W=$(mktemp -d)
trap '$S cluster down --dir "$W/tls" >/dev/null 2>&1 || true;
      $S cluster down --dir "$W/insecure" >/dev/null 2>&1 || true; rm -rf "$W"' EXIT
$S gen text --size "$PUT_SIZE" --out "$W/text" >/dev/null
$S gen tera --size "$SORT_SIZE" --out "$W/tera" >/dev/null
for v in tls insecure; do
  flags=(); [ $v = insecure ] && flags=(--insecure)
  $S cluster up --workers 2 --slots 1 --dir "$W/$v" "${flags[@]}" >/dev/null
  $S put "$W/tera" --dataset tera --block-size 64MB --replication 1 --cluster "$W/$v" >/dev/null
done
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
now() { date +%s.%N; }
timed() { # COMMAND...: wall seconds
  sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
  local t0; t0=$(now)
  "$@" >/dev/null
  echo "$(now) - $t0" | bc
}
for i in $(seq "$RUNS"); do
  for v in tls insecure; do
    put=$(timed $S put "$W/text" --dataset "t$i" --block-size 64MB --replication 1 --cluster "$W/$v")
    get=$(timed $S get "t$i" "$W/got-$v-$i" --cluster "$W/$v")
    sort=$(timed $S submit --cluster "$W/$v" terasort --reducers 2 --input tera --output "s$i" -q)
    rm -rf "$W/got-$v-$i"
    $S rm "t$i" --cluster "$W/$v" >/dev/null
    $S rm "s$i" --cluster "$W/$v" >/dev/null
    echo "$v $put $get $sort"
  done
done | tee "$W/times"
bytes=$(du -sb "$W/text" | cut -f1)
for col in 2 3 4; do
  name=$(case $col in 2) echo "put $PUT_SIZE";; 3) echo "get $PUT_SIZE";; 4) echo "TeraSort $SORT_SIZE";; esac)
  t=$(awk '$1=="tls"' "$W/times" | cut -d' ' -f$col | median)
  p=$(awk '$1=="insecure"' "$W/times" | cut -d' ' -f$col | median)
  rate=""
  [ $col != 4 ] && rate=" ($(echo "scale=0; $bytes / $t / 1000000" | bc) MB/s vs $(echo "scale=0; $bytes / $p / 1000000" | bc) MB/s)"
  echo "$name: median TLS ${t}s, --insecure ${p}s, TLS/insecure $(echo "scale=3; $t / $p" | bc)$rate"
done
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'); AES: $(grep -qw aes /proc/cpuinfo && echo yes || echo no)"
