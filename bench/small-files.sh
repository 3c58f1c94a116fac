#!/usr/bin/env bash
# `sluice put` of many small files (logs per hour, one file per upload):
# N files of about 2 KB on a 2-worker embedded cluster, this build against
# an older `sluice` given as the first argument (optional); the data set
# read back must equal the files. Usage: bench/small-files.sh [BEFORE] [N]
set -euo pipefail
BEFORE=${1:-}
N=${2:-2000}
cd "$(dirname "$0")/.."
cargo build --release -q
AFTER=$PWD/target/release/sluice
W=$(mktemp -d)
trap 'for v in before after; do $AFTER cluster down --dir "$W/$v" >/dev/null 2>&1 || true; done; rm -rf "$W"' EXIT
python3 - "$W/files" "$N" <<'PY'
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
os.makedirs(d)
for i in range(n):
    with open(f"{d}/f{i:05d}.log", "w") as f:
        f.write("".join(f"line {j} of file {i}\n" for j in range(110)))
PY
cat "$W"/files/* > "$W/all"
for v in before after; do
  S=$AFTER; [ $v = before ] && S=$BEFORE
  [ -n "$S" ] || continue
  $S cluster up --workers 2 --dir "$W/$v" >/dev/null
  /usr/bin/time -f "$v: put of $N files in %e s, peak RSS %M KB" \
    $S put "$W/files" --dataset small --cluster "$W/$v" >/dev/null
  $S get small "$W/got-$v" --cluster "$W/$v" >/dev/null
  cat "$W/got-$v"/* | cmp - "$W/all" || { echo "$v: DATA SET DIFFERS"; exit 1; }
done
echo "every data set read back equals its files"
