#!/usr/bin/env bash
# Sluice on YARN, on Hadoop's MiniYARNCluster and MiniDFSCluster
# (tests/miniyarn, one NodeManager, one DataNode, all on this host):
# seconds from `sluice yarn up` to ready (2 workers registered) and of
# `sluice yarn down`, medians of RUNS; then a word count of SIZE from
# hdfs:// to hdfs:// on the YARN cluster against the same job on a
# `sluice cluster up` cluster of the same shape (2 workers, 1 slot each),
# answers compared. Then the peer: PySpark (from PyPI, into .venv) with
# `spark-submit --master yarn` on the same mini cluster, the same word
# count of the same data from and to hdfs:// (bench/spark_wordcount.py,
# 2 executors of 1 core and 1 GB, 2 reducers), answers checked equal to
# Sluice's: seconds from spark-submit to its executors registered, and of
# the word count in that running application, medians of RUNS.
# Usage: bench/yarn.sh [SIZE] [RUNS]
# (SLUICE_BIN: a sluice binary to time instead of a fresh release build;
# SKIP_SPARK=1: Sluice only).
set -euo pipefail
SIZE=${1:-256MB}
RUNS=${2:-5}
cd "$(dirname "$0")/.."
if [ -n "${SLUICE_BIN:-}" ]; then
  S=$SLUICE_BIN
else
  cargo build --release -q -p sluice-cli
  S=$PWD/target/release/sluice
fi
for m in yarn:sluice-yarn-am.jar tests/miniyarn:miniyarn-1.0.jar; do
  d=${m%%:*} j=${m##*:}
  [ -f "$d/target/$j" ] || mvn -q -B -f "$d/pom.xml" package -DskipTests >&2
done
export SLUICE_YARN_AM_JAR=$PWD/yarn/target/sluice-yarn-am.jar
W=$(mktemp -d)
mkfifo "$W/cmd"
OPENS=()
for p in lang lang.reflect util util.concurrent io net; do OPENS+=("--add-opens=java.base/java.$p=ALL-UNNAMED"); done
java "${OPENS[@]}" -cp "tests/miniyarn/target/miniyarn-1.0.jar:tests/miniyarn/target/lib/*" \
  sluice.miniyarn.MiniYarn "$W/mini" < "$W/cmd" > "$W/answers" 2> "$W/mini.log" &
MINI=$!
exec 3> "$W/cmd"
cleanup() {
  $S yarn down --dir "$W/y" >/dev/null 2>&1 || true
  $S cluster down --dir "$W/cl" >/dev/null 2>&1 || true
  exec 3>&-
  wait "$MINI" 2>/dev/null || true
  rm -rf "$W"
}
trap cleanup EXIT
until [ -f "$W/mini/ready" ]; do sleep 0.5; done
read -r CONF RM FS WEBHDFS < "$W/mini/ready"
export HADOOP_CONF_DIR=$CONF SLUICE_WEBHDFS=$WEBHDFS
mini() { # a launcher command, waiting for its answer
  local n; n=$(wc -l < "$W/answers"); echo "$*" >&3
  until [ "$(wc -l < "$W/answers")" -gt "$n" ]; do sleep 0.1; done
  tail -1 "$W/answers" | grep -q '^ok' || { tail -1 "$W/answers"; exit 1; }
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
now() { date +%s.%N; }
UP=(--workers 2 --worker-memory 1GB --worker-vcores 1 --slots 1)

echo "sluice yarn up (2 workers) to ready, and sluice yarn down, seconds:"
for i in $(seq "$RUNS"); do
  t0=$(now); $S yarn up "${UP[@]}" --dir "$W/y" >/dev/null 2>"$W/up.log" || { cat "$W/up.log"; exit 1; }; t1=$(now)
  $S yarn down --dir "$W/y" >/dev/null; t2=$(now)
  echo "$(echo "$t1 - $t0" | bc) $(echo "$t2 - $t1" | bc)"
done | tee "$W/up.times"
echo "median up s: $(cut -d' ' -f1 "$W/up.times" | median)  down s: $(cut -d' ' -f2 "$W/up.times" | median)"

$S gen text --size "$SIZE" --out "$W/text" >/dev/null
mini put "$W/text" /in
echo "word count $SIZE hdfs:// to hdfs://, 2 reducers: YARN cluster vs cluster up (2 workers, 1 slot each)"
$S yarn up "${UP[@]}" --dir "$W/y" >/dev/null 2>"$W/up.log" || { cat "$W/up.log"; exit 1; }
$S cluster up --workers 2 --slots 1 --dir "$W/cl" >/dev/null
for i in $(seq "$RUNS"); do
  t0=$(now); $S submit --cluster "$W/y" wordcount --reducers 2 -q --input "$FS/in" --output "$FS/y$i"; t1=$(now)
  t2=$(now); $S submit --cluster "$W/cl" wordcount --reducers 2 -q --input "$FS/in" --output "$FS/c$i"; t3=$(now)
  mini get "/y$i" "$W/gy$i"; mini get "/c$i" "$W/gc$i"
  diff -r -x _SUCCESS "$W/gy$i" "$W/gc$i" >/dev/null || { echo "ANSWERS DIFFER in run $i"; exit 1; }
  echo "$(echo "$t1 - $t0" | bc) $(echo "$t3 - $t2" | bc)"
done | tee "$W/wc.times"
y=$(cut -d' ' -f1 "$W/wc.times" | median); c=$(cut -d' ' -f2 "$W/wc.times" | median)
echo "median YARN s: $y  cluster up s: $c  ratio YARN/cluster up: $(echo "scale=3; $y / $c" | bc)  (answers identical)"
$S yarn down --dir "$W/y" >/dev/null
$S cluster down --dir "$W/cl" >/dev/null
[ -n "${SKIP_SPARK:-}" ] && exit 0

# The peer. Spark's jars go to HDFS once, as spark.yarn.archive (what an
# operator sets so that applications do not upload them each time; the
# NodeManagers then keep them localized, as they keep Sluice's cached
# binary). Its containers get Spark's own Hadoop client, not the cluster's
# class path, and run the venv's Python.
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -c "import pyspark" 2>/dev/null ||
  .venv/bin/pip install --quiet --disable-pip-version-check pyspark
SPARK_HOME=$(.venv/bin/python -c "import pyspark, os; print(os.path.dirname(pyspark.__file__))")
export SPARK_HOME SPARK_LOCAL_IP=127.0.0.1 PYSPARK_PYTHON=$PWD/.venv/bin/python
echo "PySpark $(.venv/bin/python -c 'import pyspark; print(pyspark.__version__)') on the same cluster and data"
.venv/bin/python - "$SPARK_HOME/jars" "$W/spark-libs.zip" <<'EOF'
import os, sys, zipfile
with zipfile.ZipFile(sys.argv[2], "w", zipfile.ZIP_STORED) as z:
    for f in sorted(os.listdir(sys.argv[1])):
        z.write(os.path.join(sys.argv[1], f), f)
EOF
mini mkdir /spark
mini put "$W/spark-libs.zip" /spark/spark-libs.zip
rm -f "$W/spark-libs.zip"
sorted_lines() { cat "$1"/part-* | LC_ALL=C sort; }
sorted_lines "$W/gy1" > "$W/sluice.sorted"
echo "spark-submit --master yarn to 2 executors registered, its word count, all of spark-submit, seconds:"
for i in $(seq "$RUNS"); do
  t0=$(now)
  SPARK_T0=$t0 .venv/bin/spark-submit --master yarn --deploy-mode client \
    --num-executors 2 --executor-cores 1 --executor-memory 1g --driver-memory 1g \
    --conf spark.yarn.archive="$FS/spark/spark-libs.zip" \
    --conf spark.yarn.populateHadoopClasspath=false \
    --conf spark.pyspark.python="$PYSPARK_PYTHON" --conf spark.ui.enabled=false \
    bench/spark_wordcount.py "$FS/in" "$FS/s$i" 2 > "$W/spark.out" 2> "$W/spark.log" ||
    { tail -30 "$W/spark.log"; exit 1; }
  t1=$(now)
  mini get "/s$i" "$W/gs$i"
  sorted_lines "$W/gs$i" | cmp -s - "$W/sluice.sorted" || { echo "SPARK'S ANSWER DIFFERS in run $i"; exit 1; }
  echo "$(awk '$1=="executors"{print $2}' "$W/spark.out") $(awk '$1=="wordcount"{print $2}' "$W/spark.out") $(echo "$t1 - $t0" | bc)"
done | tee "$W/spark.times"
e=$(cut -d' ' -f1 "$W/spark.times" | median); sw=$(cut -d' ' -f2 "$W/spark.times" | median)
echo "median Spark to executors s: $e  word count s: $sw  spark-submit s: $(cut -d' ' -f3 "$W/spark.times" | median)"
echo "word count, PySpark/Sluice on YARN: $(echo "scale=2; $sw / $y" | bc)x  (answers identical)"
