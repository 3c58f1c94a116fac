#!/usr/bin/env bash
# The OHB shuffle micro-benchmarks (MR-AVG, MR-RAND, MR-SKEW) on Sluice's
# local engine and on Hadoop MapReduce (LocalJobRunner, bench/hadoop's Ohb
# job) at the same parameters on this machine, with the ratio. Both
# latencies are the job's own (Sluice's report, Hadoop's waitForCompletion),
# without process or JVM start. Pair counts are checked on both sides:
# every pair made arrives, and reducer 0 gets its exact share for avg and
# skew.
# Usage: bench/ohb.sh [SHUFFLE_SIZE] [RUNS] [MAPS] [REDUCES] [PAIR_SIZE] [THREADS]
set -euo pipefail
SIZE=${1:-256MB}
RUNS=${2:-3}
MAPS=${3:-8}
REDUCES=${4:-4}
PAIR=${5:-1024}
THREADS=${6:-2}
cd "$(dirname "$0")/.."
cargo build --release -q
S=$PWD/target/release/sluice
HD=bench/hadoop
[ -f "$HD/target/hadoop-jobs-1.0.jar" ] || mvn -q -B -f "$HD/pom.xml" package -DskipTests
OUT=bench-results/ohb
mkdir -p "$OUT"
bytes=$(python3 -c "
import re,sys
m=re.fullmatch(r'([0-9.]+)\s*([a-zA-Z]*)','$SIZE'.strip()); u=m.group(2).lower()
mult={'':1,'b':1,'kb':1e3,'k':1e3,'mb':1e6,'m':1e6,'gb':1e9,'g':1e9,'kib':2**10,'mib':2**20,'gib':2**30}[u]
print(int(float(m.group(1))*mult))")
K=$((bytes / (MAPS * PAIR)))
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf '| pattern | maps/reduces | pair | pairs/map | Sluice s | Hadoop s | Hadoop / Sluice |\n|---|---|---|---|---|---|---|\n' >"$OUT/compare.md"
for p in avg rand skew; do
  $S bench ohb --pattern "$p" --maps "$MAPS" --reduces "$REDUCES" --pairs-per-map "$K" \
    --pair-size "$PAIR" --runs "$RUNS" --threads "$THREADS" --out "$OUT/sluice-$p" >/dev/null
  s=$(python3 -c "import json;print(json.load(open('$OUT/sluice-$p/results.json'))[0]['latency_s'])")
  for i in $(seq "$RUNS"); do
    r=$(java -Xmx2g -cp "$HD/target/hadoop-jobs-1.0.jar:$HD/target/lib/*" sluice.bench.Ohb \
      "$p" "$MAPS" "$REDUCES" "$K" "$PAIR" "$THREADS" 2>/dev/null)
    pairs=$(echo "$r" | awk '/^pairs /{print $2}')
    r0=$(echo "$r" | awk '/^pairs_r0 /{print $2}')
    [ "$pairs" = $((MAPS * K)) ] || { echo "Hadoop $p: $pairs pairs arrived, $((MAPS * K)) made"; exit 1; }
    want=$(python3 -c "
import json;r=json.load(open('$OUT/sluice-$p/results.json'))[0]['median_run']['reducer_pairs'];print(r[0])")
    if [ "$p" != rand ] && [ "$r0" != "$want" ]; then echo "Hadoop $p: reducer 0 got $r0, Sluice $want"; exit 1; fi
    echo "$r" | awk '/^elapsed_s /{print $2}'
  done >"$OUT/hadoop-$p.times"
  h=$(median <"$OUT/hadoop-$p.times")
  ratio=$(echo "scale=1; $h / $s" | bc)
  echo "$p: Sluice $s s, Hadoop $h s (median of $RUNS): Hadoop/Sluice ${ratio}x"
  printf '| %s | %s/%s | %s B | %s | %.3f | %.2f | %sx |\n' "$p" "$MAPS" "$REDUCES" "$PAIR" "$K" "$s" "$h" "$ratio" >>"$OUT/compare.md"
done
cat "$OUT/compare.md"
