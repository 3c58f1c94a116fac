#!/usr/bin/env bash
# A multi-host testbed on one machine: one network namespace per worker,
# joined to the coordinator's namespace by veth pairs on a bridge, with an
# optional link limit (tc tbf) on every worker's link. Runs word count on
# the cluster and checks the answer against the local engine; or, given a
# command after "--", probes the worker-to-worker network (`sluice probe
# --network-peer` from the second worker's namespace to the first's) and
# runs the command with COORD (the coordinator's address), SLUICE_SECRET
# and PROBE_MB_S (the probe's median) in its environment.
# Needs root. Usage: bench/netns.sh [WORKERS] [RATE] [SIZE] [-- COMMAND...]
#   RATE: a tc rate such as 1gbit or 10gbit, or "unlimited" (default).
set -euo pipefail
N=${1:-2}
RATE=${2:-unlimited}
SIZE=${3:-64MB}
CMD=()
if [ "${4:-}" = "--" ]; then shift 4; CMD=("$@"); fi
cd "$(dirname "$0")/.."
cargo build --release -q
S=$PWD/target/release/sluice
W=$(mktemp -d)
BR=slbr0
NET=10.77.0
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  for i in $(seq "$N"); do ip netns del "slw$i" 2>/dev/null || true; ip link del "slv$i" 2>/dev/null || true; done
  ip link del "$BR" 2>/dev/null || true
  rm -rf "$W"
}
trap cleanup EXIT
ip link add "$BR" type bridge
ip addr add "$NET.1/24" dev "$BR"
ip link set "$BR" up
for i in $(seq "$N"); do
  ns="slw$i"
  ip netns add "$ns"
  ip link add "slv$i" type veth peer name eth0 netns "$ns"
  ip link set "slv$i" master "$BR" up
  ip -n "$ns" addr add "$NET.$((i + 1))/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
  if [ "$RATE" != unlimited ]; then
    tc qdisc add dev "slv$i" root tbf rate "$RATE" burst 1mb latency 50ms
    ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "$RATE" burst 1mb latency 50ms
  fi
done
Secret=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
export SLUICE_SECRET=$Secret
$S coordinator --listen "$NET.1:7070" --state-dir "$W/coord" >"$W/coord.log" 2>&1 &
pids+=($!)
for i in $(seq "$N"); do
  ip netns exec "slw$i" env SLUICE_SECRET="$Secret" "$S" worker --coordinator "$NET.1:7070" \
    --listen "$NET.$((i + 1)):7071" --data-dir "$W/w$i" --rack "rack$i" --slots 1 >"$W/w$i.log" 2>&1 &
  pids+=($!)
done
C=(--coordinator "$NET.1:7070")
for _ in $(seq 100); do
  [ "$($S cluster status "${C[@]}" 2>/dev/null | grep -c alive)" = "$N" ] && break
  sleep 0.1
done
$S cluster status "${C[@]}"
if [ ${#CMD[@]} -gt 0 ]; then
  PROBE_MB_S=unknown
  if [ "$N" -ge 2 ]; then
    ip netns exec slw1 "$S" probe --network-listen "$NET.2:7399" 2>/dev/null &
    pids+=($!)
    sleep 0.3
    p=$(ip netns exec slw2 "$S" probe --network-peer "$NET.2:7399" --reps 3)
    echo "$p"
    PROBE_MB_S=$(echo "$p" | awk '{for (i = 1; i <= NF; i++) if ($i == "MB/s") print $(i - 1)}')
  fi
  COORD="$NET.1:7070" PROBE_MB_S=$PROBE_MB_S "${CMD[@]}"
  exit
fi
$S gen text --size "$SIZE" --out "$W/text" >/dev/null
$S put "$W/text" --dataset words --block-size 8MB "${C[@]}"
$S submit "${C[@]}" wordcount --reducers "$N" --input words --output counts --report "$W/report.json"
$S get counts "$W/got" "${C[@]}" >/dev/null
$S run wordcount --input "$W/text" --output "$W/local" --reducers "$N" -q
rm -f "$W/local/_SUCCESS"
diff -r "$W/local" "$W/got" && echo "netns testbed ($N workers, links $RATE): answer identical to the local engine"
