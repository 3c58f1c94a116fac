#!/usr/bin/env bash
# Installs what the benchmarks need: a release build of Sluice and a Python
# venv (.venv) with the peers from PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p sluice-cli
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install --quiet --disable-pip-version-check duckdb matplotlib maturin
# The sluice Python package, built with maturin into the venv.
PATH="$PWD/.venv/bin:$PATH" .venv/bin/pip install --quiet --disable-pip-version-check \
  --no-build-isolation .
# bench/compare installs the other peers (chdb, pyspark from
# PyPI; Hadoop jars from Maven Central via bench/hadoop/pom.xml) on first use.
