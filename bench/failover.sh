#!/usr/bin/env bash
# Failover times (SIGKILL supervised and not, SIGTERM) of two coordinators
# through etcd, and what keeping the state in etcd costs an empty job and
# a word count. Usage: bench/failover.sh [--runs N] [--size SIZE]
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v etcd >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server >/dev/null
fi
cargo build --release -q -p sluice-cli
exec python3 bench/failover.py "$@"
