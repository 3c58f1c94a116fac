#!/usr/bin/env bash
# Seed 003's experiments on a multi-data-center testbed built on this host:
# one network namespace per worker, the workers of data center D joined by
# a bridge (a LAN: no limit), the data centers joined by routing in a
# router namespace whose bridge D's egress carries every byte entering
# data center D and is limited with tc tbf (the WAN). The coordinator and
# the clients run in a namespace of their own in dc1 (seed 003's master
# sat in one site too).
#
# Experiments (each job's answer is checked against the local engine on
# the first repetition; each report's WAN bytes against the router's
# /proc/net/dev counters):
#   terasort  TeraSort, all input in dc1, data-center-local maps:
#             reduces by early start (0.05, Hadoop's native), delayed
#             start (0.8) and ARTS.
#   split     The same with the input split 4:5 between dc1 and dc2.
#   dfsio     TestDFSIO writes (replication 2) with WAN-aware placement
#             against the default (second replica off the writer's rack,
#             i.e. in the other data center).
#   fair      The fair scheduler shared by a long word count (pool batch)
#             and three short TeraSorts (pool short), early start against
#             ARTS for both.
# WAN delay: every packet between data centers passes a delay line in the
# router namespace (bench/wandelay, a TUN device the router's policy
# routing sends them to; this kernel has no netem), --wan-delay each way.
# The round trip between data centers is measured (TCP connects from dc2
# to the coordinator) and written to the results.
#
# Needs root, and Go for the delay line. Usage: bench/geo.sh [--workers N]
#   [--wan RATE] [--wan-delay DURATION] [--size SIZE] [--reps R]
#   [--experiments terasort,split,dfsio,fair] [--out DIR]
# Defaults: 3 workers per data center, --wan 100mbit, --wan-delay 20ms
# (a 40 ms round trip; 0 for none), --size 512MB, 3 reps.
set -euo pipefail
WORKERS=3 WAN=100mbit DELAY=20ms SIZE=512MB REPS=3 EXPS=terasort,split,dfsio,fair OUT=
while [ $# -gt 0 ]; do
  case $1 in
    --workers) WORKERS=$2; shift 2 ;;
    --wan) WAN=$2; shift 2 ;;
    --wan-delay) DELAY=$2; shift 2 ;;
    --size) SIZE=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --experiments) EXPS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."
cargo build --release -q --bin sluice
S=$PWD/target/release/sluice
W=$(mktemp -d)
OUT=${OUT:-$W/results}
mkdir -p "$OUT"
if [ "$DELAY" != 0 ]; then
  (cd bench/wandelay && go build -o "$W/wandelay" .)
fi
R=sgwan          # the router namespace
DCS=2
pids=()
nss=()
cleanup() {
  mkdir -p "$OUT/logs" && cp "$W"/*.log "$OUT/logs/" 2>/dev/null || true
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for ns in "${nss[@]}"; do
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill "$p" 2>/dev/null || true; done
  done
  wait 2>/dev/null || true
  for ns in "${nss[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
  rm -rf "$W"
}
trap cleanup EXIT

addr() { echo "10.9$1.0.$((10 + $2))"; } # DC HOST
mkns() { ip netns add "$1"; nss+=("$1"); ip -n "$1" link set lo up; }

# The router and the data centers' bridges.
mkns $R
ip netns exec $R sysctl -qw net.ipv4.ip_forward=1
for d in $(seq $DCS); do
  ip -n $R link add "br$d" type bridge
  ip -n $R addr add "10.9$d.0.1/24" dev "br$d"
  ip -n $R link set "br$d" up
  # Everything routed into dc$d leaves through br$d: the WAN link's limit.
  if [ "$WAN" != unlimited ]; then
    ip netns exec $R tc qdisc add dev "br$d" root tbf rate "$WAN" burst 256kb latency 100ms
  fi
done
# Host 0 of dc1 is the coordinator's and the clients'; hosts 1..N workers.
host() { # DC I
  local ns="sg$1-$2" v="sgv$1$2"
  mkns "$ns"
  ip -n $R link add "$v" type veth peer name eth0 netns "$ns"
  ip -n $R link set "$v" master "br$1" up
  ip -n "$ns" addr add "$(addr "$1" "$2")/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" route add default via "10.9$1.0.1"
}
host 1 0
for d in $(seq $DCS); do for i in $(seq "$WORKERS"); do host "$d" "$i"; done; done
# The delay line: packets that reach the router from a data center's
# bridge go to wan0 (table 100), come back from it DELAY later and are
# routed on (the main table) to their data center's bridge, whose tbf
# limits them. Reverse-path filtering would drop them coming back from
# wan0.
if [ "$DELAY" != 0 ]; then
  ip -n $R tuntap add dev wan0 mode tun
  ip -n $R link set wan0 up txqueuelen 10000
  for k in all default wan0; do ip netns exec $R sysctl -qw "net.ipv4.conf.$k.rp_filter=0"; done
  ip -n $R route add default dev wan0 table 100
  for d in $(seq $DCS); do
    ip netns exec $R sysctl -qw "net.ipv4.conf.br$d.rp_filter=0"
    ip -n $R rule add iif "br$d" lookup 100
  done
  ip netns exec $R "$W/wandelay" -dev wan0 -delay "$DELAY" >"$W/wandelay.log" 2>&1 &
  pids+=($!)
fi

export SLUICE_SECRET
SLUICE_SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
CADDR="$(addr 1 0):7070"
C=(--coordinator "$CADDR")
in_dc1() { ip netns exec sg1-0 "$@"; }
coordinator() { # FLAGS...: (re)starts the coordinator
  # `ip netns exec` may fork: stop what runs in the namespace itself.
  local p
  for p in $(ip netns pids sg1-0); do kill "$p"; done
  for _ in $(seq 100); do [ -z "$(ip netns pids sg1-0)" ] && break; sleep 0.05; done
  in_dc1 "$S" coordinator --listen "$CADDR" --state-dir "$W/coord" --heartbeat-ms 100 \
    --worker-timeout-ms 10000 "$@" >>"$W/coord.log" 2>&1 &
  pids+=($!)
  [ -n "${NO_WAIT:-}" ] && return
  for _ in $(seq 300); do
    [ "$(in_dc1 "$S" cluster status "${C[@]}" 2>/dev/null | grep -c alive)" = $((DCS * WORKERS)) ] && return
    sleep 0.1
  done
  echo "workers did not register" >&2; exit 1
}
NO_WAIT=1 coordinator --dc-local-maps --placement wan-aware
sleep 0.3
for d in $(seq $DCS); do
  for i in $(seq "$WORKERS"); do
    ip netns exec "sg$d-$i" "$S" worker --coordinator "$CADDR" --listen "$(addr "$d" "$i"):7071" \
      --data-dir "$W/w$d-$i" --location "/dc$d/rack$d/h$d-$i" --slots 1 --memory 1GB \
      --scan-rate 0 >"$W/w$d-$i.log" 2>&1 &
    pids+=($!)
  done
done
coordinator --dc-local-maps --placement wan-aware
in_dc1 "$S" cluster status "${C[@]}"
# The round trip between data centers: TCP connects from dc2 to the
# coordinator in dc1 (a connect takes one round trip), the median of 5.
rtt=$(ip netns exec sg2-1 python3 -c '
import socket, statistics, sys, time
host, port = sys.argv[1].rsplit(":", 1)
ts = []
for _ in range(5):
    t = time.perf_counter()
    socket.create_connection((host, int(port))).close()
    ts.append((time.perf_counter() - t) * 1000)
print(f"{statistics.median(ts):.1f}")' "$CADDR")
echo "round trip between data centers: $rtt ms (WAN $WAN, delay $DELAY each way)" |
  tee "$OUT/rtt.txt"

# The WAN's payload bytes so far: every byte routed into a data center,
# less 66 bytes of headers a packet (Ethernet 14, IPv4 20, TCP 20 and its
# timestamps 12), which the reports' counts of data do not include.
wan_bytes() {
  ip netns exec $R cat /proc/net/dev |
    awk -v n=$DCS '{sub(/^ +/, "")} /^br[0-9]+:/ {split($0, f, /[: ]+/); t += f[10] - 66 * f[11]}
      END {printf "%.0f\n", t}'
}
# Bandwidths for ARTS: the workers probe the links between data centers.
in_dc1 "$S" probe --network --link-size 16MB --reps 3 --links "$W/links" "${C[@]}"
cp "$W/links" "$OUT/links"

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
field() { python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['cluster']; print($2)" "$1"; }
RESULTS=$OUT/geo.tsv
printf 'experiment\tvariant\trep\tseconds\treport_wan_bytes\tcounted_wan_bytes\n' >"$RESULTS"
row() { printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$@" | tee -a "$RESULTS"; }

# Waits (up to 10 s) until under 100 kB crosses the WAN in half a
# second: a killed attempt of the job before may still be fetching (it
# stops between two blocks once its worker hears of the kill), and its
# bytes are not the next job's.
wan_quiet() {
  local a b
  for _ in $(seq 20); do
    a=$(wan_bytes); sleep 0.5; b=$(wan_bytes)
    [ $((b - a)) -lt 100000 ] && return
  done
}
# One cluster job, timed, with the router's WAN bytes around it.
job() { # EXPERIMENT VARIANT REP OUTPUT ARGS...
  local exp=$1 var=$2 rep=$3 out=$4; shift 4
  in_dc1 "$S" rm "$out" "${C[@]}" >/dev/null 2>&1 || true
  wan_quiet
  local before t0 t1 after
  before=$(wan_bytes); t0=$(date +%s.%N)
  in_dc1 "$S" submit "${C[@]}" "$@" --output "$out" --report "$W/$exp-$var-$rep.json" >/dev/null 2>"$W/last.err" ||
    { cat "$W/last.err" >&2; exit 1; }
  t1=$(date +%s.%N); after=$(wan_bytes)
  cp "$W/$exp-$var-$rep.json" "$OUT/"
  row "$exp" "$var" "$rep" "$(echo "$t1 - $t0" | bc)" \
    "$(field "$W/$exp-$var-$rep.json" "r['wan_bytes']")" "$((after - before))"
}
# The cluster's output of OUT against the local engine's terasort of DIRS.
check_sort() { # OUT DIR...
  local out=$1; shift
  rm -rf "$W/got" "$W/local"
  in_dc1 "$S" get "$out" "$W/got" "${C[@]}" >/dev/null
  local inputs; inputs=$(IFS=,; echo "$*")
  "$S" run terasort --input "$inputs" --output "$W/local" --reducers "$((DCS * WORKERS))" -q
  cat "$W"/got/part-* | cmp - <(cat "$W"/local/part-*) && echo "answer: identical to the local engine"
}

tera_put() { # NAME DC SIZE
  rm -rf "$W/gen-$1"
  "$S" gen tera --size "$3" --seed "$RANDOM" --out "$W/gen-$1" >/dev/null
  ip netns exec "sg$2-1" "$S" put "$W/gen-$1" --dataset "$1" --block-size 32MB --replication 2 \
    --datacenter "dc$2" "${C[@]}" >/dev/null
}
terasort_runs() { # EXPERIMENT INPUT DIRS...
  local exp=$1 input=$2; shift 2
  for rep in $(seq "$REPS"); do
    for var in early delayed arts; do
      job "$exp" "$var" "$rep" "sorted-$var" terasort --input "$input" \
        --reducers "$((DCS * WORKERS))" -D "sluice.reduce.scheduler=$var"
      if [ "$rep" = 1 ]; then check_sort "sorted-$var" "$@"; fi
    done
  done
}

bytes_of() { numfmt --from=iec "${1%B}"; }
coordinator --dc-local-maps --placement wan-aware --links "$W/links"
if [[ $EXPS == *terasort* ]]; then
  tera_put tera1 1 "$SIZE"
  terasort_runs terasort tera1 "$W/gen-tera1"
fi
if [[ $EXPS == *split* ]]; then
  total=$(bytes_of "$SIZE")
  tera_put tera4 1 "$((total * 4 / 9))"
  tera_put tera5 2 "$((total * 5 / 9))"
  terasort_runs split tera4,tera5 "$W/gen-tera4" "$W/gen-tera5"
fi
if [[ $EXPS == *dfsio* ]]; then
  for rep in $(seq "$REPS"); do
    for placement in wan-aware rack-aware; do
      coordinator --dc-local-maps --placement "$placement" --links "$W/links"
      before=$(wan_bytes); t0=$(date +%s.%N)
      in_dc1 "$S" bench dfsio --write --files $((DCS * WORKERS)) --size 64MB --replication 2 \
        "${C[@]}" >"$W/dfsio.out"
      t1=$(date +%s.%N); after=$(wan_bytes)
      tput=$(awk '/Throughput/ {print $NF}' "$W/dfsio.out" | head -1)
      row dfsio "$placement" "$rep" "$(echo "$t1 - $t0" | bc)" "tput=${tput}MB/s" "$((after - before))"
    done
  done
fi

if [[ $EXPS == *fair* ]]; then
  # Seed 003's shared cluster: a long aggregating job (word count) in one
  # pool and short TeraSorts in another under the fair scheduler; with
  # early start the long job's reduces hold every reduce slot while its
  # maps run, with ARTS they wait (an aggregating job) and the short jobs'
  # reduces run.
  printf '[pool.batch]\nweight = 1\n[pool.short]\nweight = 1\n' >"$W/pools.toml"
  coordinator --dc-local-maps --placement wan-aware --links "$W/links" --scheduler fair \
    --pools "$W/pools.toml"
  rm -rf "$W/gen-text"
  "$S" gen text --size "$SIZE" --out "$W/gen-text" >/dev/null
  ip netns exec sg1-1 "$S" put "$W/gen-text" --dataset text --block-size 16MB --replication 2 \
    --datacenter dc1 "${C[@]}" >/dev/null
  tera_put short 1 64MB
  for rep in $(seq "$REPS"); do
    for var in early arts; do
      in_dc1 "$S" rm "long-$var" "${C[@]}" >/dev/null 2>&1 || true
      t0=$(date +%s.%N)
      in_dc1 "$S" submit "${C[@]}" --pool batch wordcount --input text --output "long-$var" \
        --reducers "$((DCS * WORKERS))" -D "sluice.reduce.scheduler=$var" >/dev/null 2>&1 &
      long=$!
      sleep 2
      for k in 1 2 3; do
        job fair "short-$var" "$rep.$k" "short-$var" --pool short terasort --input short \
          --reducers "$((DCS * WORKERS))" -D "sluice.reduce.scheduler=$var"
      done
      wait "$long"
      t1=$(date +%s.%N)
      row fair "long-$var" "$rep" "$(echo "$t1 - $t0" | bc)" - -
    done
  done
fi

echo
echo "medians ($DCS data centers x $WORKERS workers, WAN $WAN, round trip $rtt ms, $SIZE):"
for key in $(awk -F'\t' 'NR > 1 {print $1 "/" $2}' "$RESULTS" | sort -u); do
  t=$(awk -F'\t' -v k="$key" 'NR > 1 && $1 "/" $2 == k {print $4}' "$RESULTS" | median)
  b=$(awk -F'\t' -v k="$key" 'NR > 1 && $1 "/" $2 == k {print $6}' "$RESULTS" | median)
  printf '  %-20s %8.2f s  %12s WAN bytes (router)\n' "$key" "$t" "$b"
done
echo "rows: $RESULTS"
if [ -x .venv/bin/python ] && .venv/bin/python -c 'import matplotlib' 2>/dev/null; then
  .venv/bin/python bench/geo_plot.py "$RESULTS" "$OUT/geo.png" && echo "plot: $OUT/geo.png"
fi
# Each job's report against the router (fair's short jobs share the WAN
# with the long job, so only the others): within 10% (retransmissions and
# control traffic) when over 1 MB crossed, else both under 1 MB.
awk -F'\t' 'NR > 1 && $1 != "fair" && $1 != "dfsio" {
  r = $5; c = $6; ok = (c > 1e6) ? (r >= 0.9 * c && r <= 1.1 * c) : (r < 1e6)
  if (!ok) { printf "WAN bytes: %s %s rep %s: report %s, router %s\n", $1, $2, $3, r, c; bad = 1 }
} END { exit bad }' "$RESULTS" && echo "every report's WAN bytes within 10% of the router's"

