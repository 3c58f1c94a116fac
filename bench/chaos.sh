#!/usr/bin/env bash
# Chaos: 20 word counts over 5 minutes on two coordinators standing by
# through etcd and three workers, the active coordinator SIGKILLed every
# 20 s and a worker every 30 s; every answer checked against the local
# engine. `--quick` is the short form .ci/run runs (4 jobs over 40 s).
# Usage: bench/chaos.sh [--quick] [--sluice BIN] [--report FILE]
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v etcd >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server >/dev/null
fi
case " $* " in
  *" --sluice "*) ;;
  *) cargo build --release -q -p sluice-cli ;;
esac
exec python3 bench/chaos.py "$@"
