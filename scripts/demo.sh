#!/usr/bin/env bash
# Builds Sluice, generates 64 MB of Zipf-distributed text, counts its words
# on the local engine, and prints the top words and the job summary.
# Extra arguments go to `sluice demo` (e.g. --size 256MB --dir DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p sluice-cli
exec ./target/release/sluice demo "$@"
