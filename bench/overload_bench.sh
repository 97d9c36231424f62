#!/bin/bash
# Overload: kmt-server (exact models, on free loopback ports) with a budget
# of requests held of BUDGET bytes (1 GiB). LARGE_CLIENTS (3) clients
# (kmt::Client, which honours the server's pushbacks) each keep WINDOW (256)
# batches of 16,384 x 64 float32 (4 MiB; k = 10, LARGE_LAYERS = 200 layers)
# in flight, 3x the budget, for DURATION (30s), while one client sends
# 512 x 32 batches (k = 10, 20 layers) one at a time. The small client runs
# alone first for IDLE (5s), for its idle latency. Prints the small batches'
# latency idle and under the load, what the large batches got, and the
# server's peak resident memory (bench/overload.cc).
#
# This machine has 2 cores and runs the clients too: the server has one
# worker (--workers=1) and lets its network threads preempt it
# (--io_preempts_workers), so that one core is left to receiving and
# answering; SERVER_FLAGS adds or overrides server flags. The large clients
# run in a process of their own at nice 10: in service they run elsewhere,
# and serialising 4 MiB batches would otherwise take the CPU time the
# measurement is about. The server's own work for them (receiving, parsing,
# refusing, computing) runs at normal priority.
#
# Exit 1 unless every large batch was answered OK or RESOURCE_EXHAUSTED with
# a retry pushback (none lost, every call ended), every small batch was
# answered OK, and the server's peak memory stayed within the budget plus
# 10%. Latencies are reported, not checked.
#
#   bench/overload_bench.sh    # the reference run
#   DURATION=4s IDLE=1s WARM_UP=1s LARGE_LAYERS=20 bench/overload_bench.sh
#                              # the test suite's (bench.overload_bench_smoke)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
source bench/lib.sh
BUDGET=${BUDGET:-$((1 << 30))}
LARGE_CLIENTS=${LARGE_CLIENTS:-3}
LARGE_N=${LARGE_N:-16384}
LARGE_LAYERS=${LARGE_LAYERS:-200}
WINDOW=${WINDOW:-256}
DURATION=${DURATION:-30s}
IDLE=${IDLE:-5s}
WARM_UP=${WARM_UP:-5s}
work=$(mktemp -d)
large=
trap 'if [[ -n $large ]]; then kill "$large" 2>/dev/null || true; fi; stop_server; rm -rf "$work"' EXIT
# A stream may have its whole window read and unanswered: the budget, not
# the per-stream bound, is what refuses.
start_server "$work" "" --workers=1 --io_preempts_workers --max_held_bytes="$BUDGET" \
  --max_in_flight_per_stream="$WINDOW" ${SERVER_FLAGS:-}
overload=("$BUILD/bench/overload" --server="$target" --budget="$BUDGET")

"${overload[@]}" --large_clients=0 --idle="$IDLE" --duration=0s | tee "$work/idle.txt"
idle_p99=$(awk '/^small batches idle:/ { print $(NF - 1) }' "$work/idle.txt")

# The large clients run for the warm-up (WARM_UP, 5s: the budget fills),
# the measured DURATION, and a second more, so that the load lasts the whole
# measurement.
nice -n 10 "${overload[@]}" --small=false --idle=0s --large_clients="$LARGE_CLIENTS" \
  --large_window="$WINDOW" --large_n="$LARGE_N" --large_layers="$LARGE_LAYERS" \
  --duration="$(($(sed 's/s$//' <<<"$DURATION") + $(sed 's/s$//' <<<"$WARM_UP") + 1))s" \
  --check >"$work/large.txt" &
large=$!
sleep "${WARM_UP%s}"
status=0
"${overload[@]}" --pid="$server" --large_clients=0 --idle=0s --duration="$DURATION" \
  --idle_p99_ms="$idle_p99" --check || status=1
wait "$large" || status=1
large=
cat "$work/large.txt"
scrape_metrics | grep -E '^kmt_(refused_total|held_limit_bytes)' || true
if [[ -n ${METRICS_OUT:-} ]]; then scrape_metrics >"$METRICS_OUT"; fi
exit "$status"
