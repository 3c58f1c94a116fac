#!/usr/bin/env bash
# Word count over bzip2 and zstd text against the command-line tools
# decompressing the same file (`bzip2 -d`, `zstd -d`, to /dev/null), run
# alternately; medians of RUNS runs each. The goal (PERFORMANCE.md): word
# count within 1.1x of the tool's time per core used, that is
#   sluice seconds x cores used / tool seconds <= 1.1,
# cores used being the threads given, or 1 for a file read as one stream
# (one map: zstd). bzip2 splits at its blocks, so its maps use every
# thread.
# Usage: bench/decompress.sh [SIZE] [RUNS] [THREADS]   (defaults 200MB 3 2)
set -euo pipefail
SIZE=${1:-200MB}
RUNS=${2:-3}
THREADS=${3:-2}
cd "$(dirname "$0")/.."
cargo build --release -q -p sluice-cli
S=$PWD/target/release/sluice
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
$S gen text --size "$SIZE" --seed 3 --out "$W/gen" >/dev/null
cat "$W"/gen/part-* >"$W/words.txt"
rm -rf "$W/gen"
bzip2 -9 -c "$W/words.txt" >"$W/words.txt.bz2"
zstd -q -3 -c "$W/words.txt" >"$W/words.txt.zst"
rm "$W/words.txt"
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
now() { date +%s.%N; }
timed() { # COMMAND...: wall seconds, its output discarded
  sync
  local t0
  t0=$(now)
  "$@" >/dev/null
  echo "$(now) - $t0" | bc
}
maps() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["maps"])' "$1"; }
: >"$W/times"
for i in $(seq "$RUNS"); do
  for codec in bz2 zst; do
    f="$W/words.txt.$codec"
    case $codec in
      bz2) tool=$(timed bzip2 -d -c "$f") ;;
      zst) tool=$(timed zstd -q -d -c "$f") ;;
    esac
    run=$(timed $S run wordcount --threads "$THREADS" --reducers 1 -q \
      --input "$f" --output "$W/out" --report "$W/report.json")
    echo "$codec $tool $run $(maps "$W/report.json")" >>"$W/times"
    rm -rf "$W/out"
  done
done
printf '%-6s %10s %10s %5s %6s %12s\n' codec tool_s sluice_s maps cores per_core_x
for codec in bz2 zst; do
  tool=$(awk -v c=$codec '$1 == c {print $2}' "$W/times" | median)
  run=$(awk -v c=$codec '$1 == c {print $3}' "$W/times" | median)
  m=$(awk -v c=$codec '$1 == c {print $4}' "$W/times" | head -1)
  cores=$((m < THREADS ? m : THREADS))
  ratio=$(echo "scale=2; $run * $cores / $tool" | bc)
  printf '%-6s %10.2f %10.2f %5s %6s %12s\n' $codec "$tool" "$run" "$m" $cores "$ratio"
done
echo "input: $SIZE of text, $(stat -c %s "$W/words.txt.bz2") bytes as bz2 (-9)," \
  "$(stat -c %s "$W/words.txt.zst") as zst (-3); medians of $RUNS; $(nproc) cores, shared"
