#!/bin/bash
# Soak: kmt-server (exact models and the shipped learned ones, on free
# loopback ports) under saturating mixed traffic for DURATION (10m): batch
# sizes from 256 to 16,384 points, exact and learned models, bad batches,
# streams whose deadline passes before or during the compute. Prints what
# was answered, the server's memory growth after the warm-up and the
# per-second p99 latency; writes the samples to OUT/soak.csv and a plot of
# RSS and p99 over time to OUT/soak.svg. Exit 1 if a batch went unanswered,
# a stream ended unexplained, or the memory after the warm-up grew more than
# RSS_GROWTH_MB (32) over its warm-up maximum.
#
#   bench/soak.sh                  # 10 minutes
#   DURATION=30s bench/soak.sh     # the test suite's version
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
source bench/lib.sh
DURATION=${DURATION:-10m}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
trap 'stop_server' EXIT
start_server "$OUT" "" --model_dir=models --workers=2
"$BUILD/bench/soak" --server="$target" --pid="$server" --duration="$DURATION" \
  --csv="$OUT/soak.csv" --rss_growth_mb="${RSS_GROWTH_MB:-32}"
python3 bench/plot_soak.py "$OUT/soak.csv" "$OUT/soak.svg"
echo "samples: $OUT/soak.csv, plot: $OUT/soak.svg"
