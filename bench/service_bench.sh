#!/bin/bash
# Service throughput and latency over loopback against the in-process core,
# with the CPU each side spends per batch. Starts its own kmt-server (exact
# models only) on free ports and prints Markdown tables.
#
#   bench/service_bench.sh            # 10 s per run
#   DURATION=3s bench/service_bench.sh
#
# A run fails (exit 1) unless every batch of every row was answered OK.
#
# Columns: batches/s and latency as `kmt bench` measures them; the
# in-process core on the same batches in the same client process right
# after (one thread per core, each batch on one thread, as the server runs
# them); CPU milliseconds per batch of the server (from /proc), of the client
# and of the in-process core (getrusage). "server-side" is the core's CPU per
# batch over the server's: the share of the in-process throughput a server
# would reach with its cores to itself, its clients elsewhere.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
DURATION=${DURATION:-10s}
work=$(mktemp -d)
trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null; rm -rf "$work"' EXIT

"$BUILD/server/kmt-server" --model_dir= --listen=127.0.0.1:0 \
  --metrics_listen=127.0.0.1:0 --port_file="$work/port" 2>"$work/server.log" &
server=$!
for _ in $(seq 100); do
  if [[ -s $work/port ]]; then break; fi
  sleep 0.1
done
target=127.0.0.1:$(cat "$work/port")
ticks=$(getconf CLK_TCK)
server_cpu_ticks() { awk '{print $14 + $15}' "/proc/$server/stat"; }

# run CONCURRENCY [kmt bench flags...]: one table row.
run() {
  local concurrency=$1
  shift
  local before after out
  before=$(server_cpu_ticks)
  out=$("$BUILD/client/kmt" bench --server="$target" --concurrency="$concurrency" \
    --duration="$DURATION" "$@")
  after=$(server_cpu_ticks)
  awk -v c="$concurrency" -v cpu="$((after - before))" -v hz="$ticks" '
    /^batches /        { batches = $2 }
    /^latency /        { p50 = $3; p90 = $6; p99 = $9 }
    /^throughput /     { rate = $2 }
    /^client CPU /     { client = $3 }
    /^status /         { sub(/^status /, ""); status = $0 }
    /^in-process core/ { local = $3; core = $6; ratio = $NF }
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
        printf "| %d | %.0f | %.0f | %.3f | %.2f ms | %.2f ms | %.3f | %.3f | %.3f | %.3f | %s |\n",
          c, rate, local, ratio, p50, p99, server, client, core, core / server, status
      }
    }' <<<"$out"
}

echo "Throughput, n = 4096, d = 32, k = 16, 10 iterations, $DURATION per run"
echo
echo "| streams | batches/s | in-process batches/s | service / in-process | p50 | p99 | server CPU ms/batch | client CPU ms/batch | core CPU ms/batch | server-side | status |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for c in 2 4 8; do
  run "$c" --n=4096 --d=32 --k=16 --iterations=10 --in_process
done
echo
echo "Latency, n = 512, d = 32, k = 10, 20 iterations, $DURATION per run"
echo
echo "| streams | batches/s | p50 | p90 | p99 | server CPU ms/batch | client CPU ms/batch | status |"
echo "|---|---|---|---|---|---|---|---|"
for c in 1 8; do
  run "$c" --n=512 --d=32 --k=10 --iterations=20
done
