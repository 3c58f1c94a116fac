#!/usr/bin/env bash
# What TLS costs: put and get throughput of a text file and TeraSort on a
# 2-worker embedded cluster, TLS (the default) against --insecure, run
# alternately on the same data; medians of RUNS runs each, of wall time
# and of CPU seconds (user+sys of the client and of every process of the
# cluster: less noisy than wall time on a shared machine) per GB moved.
# Usage: bench/tls.sh [PUT_SIZE] [SORT_SIZE] [RUNS]   (defaults 500MB 1GB 5)
# SLUICE=BINARY measures that build of sluice instead of building one.
set -euo pipefail
PUT_SIZE=${1:-500MB}
SORT_SIZE=${2:-1GB}
RUNS=${3:-5}
cd "$(dirname "$0")/.."
if [ -z "${SLUICE:-}" ]; then
  cargo build --release -q -p sluice-cli
  SLUICE=$PWD/target/release/sluice
fi
S=$(realpath "$SLUICE")
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
TICK=$(getconf CLK_TCK)
cluster_cpu() { # DIR: CPU seconds so far of the cluster's processes
  local t=0 p
  for p in $(pgrep -f -- "--(data-dir|state-dir) $1/" || true); do
    t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)))
  done
  echo "scale=2; $t / $TICK" | bc
}
CPU=0
timed() { # DIR COMMAND...: wall seconds; CPU seconds (client and cluster) in $W/cpu
  local dir=$1; shift
  sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
  local t0 c0; c0=$(cluster_cpu "$dir"); t0=$(now)
  /usr/bin/time -f "%U %S" -o "$W/client" "$@" >/dev/null
  echo "$(now) - $t0" | bc
  echo "$(cluster_cpu "$dir") - $c0 + $(sed 's/ / + /' "$W/client")" | bc >"$W/cpu"
}
for i in $(seq "$RUNS"); do
  for v in tls insecure; do
    put=$(timed "$W/$v" $S put "$W/text" --dataset "t$i" --block-size 64MB --replication 1 --cluster "$W/$v")
    putcpu=$(cat "$W/cpu")
    get=$(timed "$W/$v" $S get "t$i" "$W/got-$v-$i" --cluster "$W/$v")
    getcpu=$(cat "$W/cpu")
    sort=$(timed "$W/$v" $S submit --cluster "$W/$v" terasort --reducers 2 --input tera --output "s$i" -q)
    sortcpu=$(cat "$W/cpu")
    rm -rf "$W/got-$v-$i"
    $S rm "t$i" --cluster "$W/$v" >/dev/null
    $S rm "s$i" --cluster "$W/$v" >/dev/null
    echo "$v $put $get $sort $putcpu $getcpu $sortcpu"
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
  t=$(awk '$1=="tls"' "$W/times" | cut -d' ' -f$((col + 3)) | median)
  p=$(awk '$1=="insecure"' "$W/times" | cut -d' ' -f$((col + 3)) | median)
  gb=$(du -sb "$W/$([ $col = 4 ] && echo tera || echo text)" | cut -f1)
  echo "  CPU (client + cluster): median TLS ${t}s, --insecure ${p}s, TLS/insecure $(echo "scale=3; $t / $p" | bc);" \
    "per GB: TLS $(echo "scale=2; $t * 1000000000 / $gb" | bc)s, --insecure $(echo "scale=2; $p * 1000000000 / $gb" | bc)s"
done
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'); AES: $(grep -qw aes /proc/cpuinfo && echo yes || echo no)"
