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
cargo clippy --workspace --all-targets -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet
cargo test --workspace
