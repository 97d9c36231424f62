#!/bin/bash
# Service throughput and latency over loopback against the in-process core,
# with the CPU each side spends per batch. Starts its own kmt-server (exact
# models only) on free ports and prints Markdown tables.
#
#   bench/service_bench.sh            # 10 s of service per row
#   DURATION=3s bench/service_bench.sh
#
# A run fails (exit 1) unless every batch of every row was answered OK.
#
# Columns: batches/s and latency as `kmt bench` measures them; the
# in-process core on the same batches in the same client process (a thread
# per CPU the client may use, each batch on one thread, as the server's
# workers run them), taking turns with the service in ROUNDS rounds (5) so
# that drift in the machine's speed affects both alike, and the spread of
# the rounds; CPU milliseconds per batch of the server (from /proc), of the
# client and of the in-process core (getrusage). "server-side" is the
# core's CPU per batch over the server's.
#
# Two setups. Shared: server and client on all CPUs, so the client's
# serialising and sending take CPU from the server, and the in-process core
# has every CPU. Own cores: the server pinned to the first half of the CPUs,
# the client (and so the in-process core) to the other half, as when the
# server has its machine's cores and its clients run elsewhere; needs 2 CPUs.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
source bench/lib.sh
DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-5}
work=$(mktemp -d)
trap 'stop_server; rm -rf "$work"' EXIT
ticks=$(getconf CLK_TCK)
client_pin=()

# run CONCURRENCY [kmt bench flags...]: one table row.
run() {
  local concurrency=$1
  shift
  local before after out
  before=$(server_cpu_ticks)
  out=$("${client_pin[@]}" "$BUILD/client/kmt" bench --server="$target" --concurrency="$concurrency" \
    --duration="$DURATION" "$@")
  after=$(server_cpu_ticks)
  awk -v c="$concurrency" -v cpu="$((after - before))" -v hz="$ticks" '
    /^batches /        { batches = $2 }
    /^latency /        { p50 = $3; p90 = $6; p99 = $9 }
    /^throughput /     { rate = $2 }
    /^client CPU /     { client = $3 }
    /^status /         { sub(/^status /, ""); status = $0 }
    /^in-process core/ { local = $3; core = $6; ratio = $NF }
    /^service\/in-process by round/ {
      lo = $4; hi = $4
      for (i = 5; i <= NF; ++i) { if ($i < lo) lo = $i; if ($i > hi) hi = $i }
    }
    END {
      if (batches == 0 || status !~ /^OK [0-9]+$/) {
        print "kmt bench answered " batches + 0 " batches, status: " status > "/dev/stderr"
        exit 1
      }
      server = 1e3 * cpu / hz / batches
      if (local == "") {
        printf "| %d | %.0f | %.2f ms | %.2f ms | %.2f ms | %.3f | %.3f | %s |\n",
          c, rate, p50, p90, p99, server, client, status
      } else {
        rounds = lo == "" ? "" : sprintf("%.3f–%.3f", lo, hi)
        printf "| %d | %.0f | %.0f | %.3f | %s | %.2f ms | %.2f ms | %.3f | %.3f | %.3f | %.3f | %s |\n",
          c, rate, local, ratio, rounds, p50, p99, server, client, core, core / server, status
      }
    }' <<<"$out"
}

throughput_table() {
  echo "| streams | batches/s | in-process batches/s | service / in-process | by round | p50 | p99 | server CPU ms/batch | client CPU ms/batch | core CPU ms/batch | server-side | status |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
  for c in "$@"; do
    run "$c" --n=4096 --d=32 --k=16 --iterations=10 --in_process --rounds="$ROUNDS"
  done
}

cpus=$(allowed_cpus | wc -l)
start_server "$work" ""
echo "Throughput, shared CPUs ($cpus), n = 4096, d = 32, k = 16, 10 iterations, $DURATION of service per row"
echo
throughput_table 2 4 8
echo
echo "Latency, shared CPUs, n = 512, d = 32, k = 10, 20 iterations, $DURATION of service per row"
echo
echo "| streams | batches/s | p50 | p90 | p99 | server CPU ms/batch | client CPU ms/batch | status |"
echo "|---|---|---|---|---|---|---|---|"
for c in 1 8; do
  run "$c" --n=512 --d=32 --k=10 --iterations=20
done
stop_server

read -r server_cpus client_cpus < <(split_allowed_cpus) || true
if [[ -n $client_cpus ]]; then
  start_server "$work" "$server_cpus"
  client_pin=(taskset -c "$client_cpus")
  echo
  echo "Throughput, own cores (server on CPUs $server_cpus, client and in-process core on CPUs $client_cpus), n = 4096, d = 32, k = 16, 10 iterations, $DURATION of service per row"
  echo
  throughput_table 1 2 4
fi
