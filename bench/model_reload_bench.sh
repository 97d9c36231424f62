#!/bin/bash
# The cost of reloading a model while it serves: batches per second on one
# stream to a learned model whose file is replaced every PERIOD seconds
# (alternating the two largest shipped models' weights, so that each scan
# loads a new file), against the same stream with the file left alone.
# Rounds take turns so that drift in the machine's speed affects both alike.
#
#   bench/model_reload_bench.sh                       # 5 rounds of 10 s each
#   DURATION=3s ROUNDS=2 bench/model_reload_bench.sh  # a quick look
#
# Fails (exit 1) unless every batch was answered OK.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
source bench/lib.sh
DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-5}
PERIOD=${PERIOD:-0.2}
work=$(mktemp -d)
swapper=
trap 'stop_swapper; stop_server; rm -rf "$work"' EXIT
stop_swapper() {
  if [[ -n $swapper ]]; then
    kill "$swapper" 2>/dev/null || true
    wait "$swapper" 2>/dev/null || true
  fi
  swapper=
}

a=models/learned-onehot-d32-k10-kpp-lloyd.kmt
b=models/learned-onehot-d32-k10-kpp.kmt
mkdir -p "$work/models/big/1"
cp "$a" "$work/models/big/1/model.kmt"
start_server "$work" "" --model_dir="$work/models" --model_poll_s="$PERIOD" --workers=1

# Replaces the file every PERIOD seconds, written aside and renamed.
swap() {
  local i=0
  while :; do
    if ((i % 2)); then cp "$a" "$work/models/big/1/.next"; else cp "$b" "$work/models/big/1/.next"; fi
    mv "$work/models/big/1/.next" "$work/models/big/1/model.kmt"
    i=$((i + 1))
    sleep "$PERIOD"
  done
}

# bench: one `kmt bench` run; prints its batches per second.
bench() {
  local out
  out=$("$BUILD/client/kmt" bench --server="$target" --model=big --d=32 --k=10 --n=1024 \
    --iterations=10 --duration="$DURATION" --concurrency=1 2>&1)
  if ! grep -qE "^status OK [0-9]+$" <<<"$out"; then
    echo "$out" >&2
    exit 1
  fi
  awk '/^throughput/ { print $2 }' <<<"$out"
}

loads() { scrape_metrics | awk '/^kmt_model_loads_total/ { print $2 }'; }

echo "| round | no reload (batches/s) | reloading every ${PERIOD} s (batches/s) | reloads in the round |"
echo "|---|---|---|---|"
for round in $(seq "$ROUNDS"); do
  still=$(bench)
  before=$(loads)
  swap &
  swapper=$!
  moving=$(bench)
  stop_swapper
  echo "| $round | $still | $moving | $(($(loads) - before)) |"
done
