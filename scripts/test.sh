#!/usr/bin/env bash
# The test command: formatting, lints with warnings denied, docs with
# warnings denied, and every test of the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."
for c in rustfmt clippy; do
  if ! cargo "${c/rustfmt/fmt}" --version >/dev/null 2>&1; then
    rustup component add "$c"
  fi
done
cargo fmt --all -- --check
# No import circle inside a crate, no source file over 1,000 lines of code.
python3 scripts/modgraph.py --check
cargo clippy --workspace --all-targets -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet
# DuckDB is the oracle of the Pavlo tests, numpy of k-means, networkx
# (with scipy, which its `pagerank` needs) of PageRank: a venv the script
# creates.
[ -x .venv/bin/python ] || python3 -m venv .venv
# moto's S3 server is the object store of the S3 tests; pyarrow writes the
# Parquet files of the format tests, fastavro (with cramjam, its Snappy)
# the Avro files; pandas is the Python package's to_pandas().
.venv/bin/python -c "import duckdb, numpy, moto.server, networkx, scipy, pyarrow, fastavro, cramjam, pandas" 2>/dev/null ||
  .venv/bin/pip install --quiet --disable-pip-version-check duckdb numpy 'moto[server]' networkx scipy pyarrow fastavro cramjam pandas
export SLUICE_PYTHON="$PWD/.venv/bin/python"
# Headless Chromium loads the coordinator's web pages in the web tests:
# Debian's package.
if ! command -v chromium >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
# etcd is the store of sluice-etcd's tests (a throwaway one-member
# cluster per test): Debian's package.
if ! command -v etcd >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server >/dev/null
fi
# The compressed-text tests compress their input with the bzip2, zstd and
# lz4 commands: Debian's packages.
for t in bzip2 zstd lz4; do
  command -v "$t" >/dev/null 2>&1 ||
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bzip2 zstd lz4 >/dev/null; break; }
done
# The TLS capture test records loopback with tcpdump, and Chromium is told
# to trust the coordinator's key by its openssl-computed pin: Debian's
# packages.
for t in tcpdump openssl; do
  command -v "$t" >/dev/null 2>&1 ||
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tcpdump openssl >/dev/null; break; }
done
# The task-user tests run Streaming commands as an unprivileged system
# user (`sluice worker --task-user sluice-task`).
if [ "$(id -u)" = 0 ] && ! id sluice-task >/dev/null 2>&1; then
  useradd --system --no-create-home --shell /usr/sbin/nologin sluice-task
fi
# Hadoop's MiniDFSCluster is the HDFS of the HDFS tests: its launcher
# (tests/minidfs) built by Maven, with hadoop-minicluster from Maven Central.
# (Built again when its sources are newer than the jar.)
jar=tests/minidfs/target/minidfs-1.0.jar
if [ ! -f "$jar" ] || [ -n "$(find tests/minidfs/src tests/minidfs/pom.xml -newer "$jar")" ]; then
  mvn -q -B -f tests/minidfs/pom.xml package -DskipTests >&2
fi
# Sluice on YARN: its ApplicationMaster (yarn/, a JVM program as Spark's
# and Flink's are) and the YARN tests' MiniYARNCluster launcher
# (tests/miniyarn), built by Maven when their sources are newer.
for m in yarn:sluice-yarn-am.jar tests/miniyarn:miniyarn-1.0.jar; do
  d=${m%%:*} j=${m##*:}
  if [ ! -f "$d/target/$j" ] || [ -n "$(find "$d/src" "$d/pom.xml" -newer "$d/target/$j")" ]; then
    mvn -q -B -f "$d/pom.xml" package -DskipTests >&2
  fi
done
# Hadoop MapReduce (LocalJobRunner) runs the same Streaming scripts as
# Sluice in the Streaming comparison tests: bench/hadoop's jobs.
[ -f bench/hadoop/target/hadoop-jobs-1.0.jar ] ||
  mvn -q -B -f bench/hadoop/pom.xml package -DskipTests >&2
cargo test --workspace
# The Python package: built into the venv with maturin as `pip install .`
# does, then its pytest suite.
.venv/bin/python -c "import maturin, pytest" 2>/dev/null ||
  .venv/bin/pip install --quiet --disable-pip-version-check maturin pytest
PATH="$PWD/.venv/bin:$PATH" .venv/bin/pip install --quiet --disable-pip-version-check \
  --no-build-isolation .
(cd python/tests && SLUICE_BIN="$PWD/../../target/debug/sluice" ../../.venv/bin/python -m pytest -q -p no:cacheprovider)
# A smoke test of the peer harness: Sluice and DuckDB on tiny data, every
# answer compared (the heavy peers are for bench/compare runs by hand).
smoke="$(mktemp -d)"
bench/compare --quick --engines sluice,duckdb --text-size 2MB --pavlo-scale 2MB \
  --sluice target/debug/sluice --out "$smoke" > "$smoke/log" 2>&1 || { cat "$smoke/log"; exit 1; }
grep -q "^| pavlo-udf |" "$smoke/results.md"
grep -q "^| parquet-join |" "$smoke/results.md"
rm -rf "$smoke"
echo "bench/compare smoke test: every answer matched"
# Chaos, short form: jobs through killed coordinators (two, through etcd)
# and workers, every answer against the local engine (bench/chaos.sh is
# the long form).
python3 bench/chaos.py --quick --sluice target/debug/sluice
