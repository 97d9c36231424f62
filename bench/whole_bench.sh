#!/bin/bash
# Whole-dataset clustering end to end against the in-process core on the
# same data in the same script: `kmt cluster --mode=whole` on shards
# resident on a local kmt-server (file read, transfer, iterations, labels
# written) and bench/whole_reference (file read, the core's Lloyd's on every
# CPU, labels written), from the same given initial centers, each stopping
# after at most T iterations or the first that changes no label. The core
# runs twice: as the shards assign (the bounds where they pay) and with every
# distance computed (products), the fast path before the bounds. Prints each
# run's split (load, init, iterations, labels) and the ratios of the totals,
# then the objective of k-means++ over all points on the resident shards
# against k-means++ on a 65,536-point sample (the pass-per-iteration form).
#
#   bench/whole_bench.sh                    # 10^6 x 32 float32, k = 64, T = 10
#   T=1000 bench/whole_bench.sh             # to convergence
#   N=10000000 bench/whole_bench.sh         # also prints the server's peak memory
#   N=20000 K=8 ROUNDS=1 bench/whole_bench.sh   # a quick look
#
# ROUNDS (3) alternates the two sides that many times; the ratio is taken
# between the summed totals.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
source bench/lib.sh
N=${N:-1000000}
D=${D:-32}
K=${K:-64}
T=${T:-10}
ROUNDS=${ROUNDS:-3}
STREAMS=${STREAMS:-$(allowed_cpus | wc -l)}
work=$(mktemp -d)
trap 'stop_server; rm -rf "$work"' EXIT

# Nanoseconds, so that bash's integers add the times up; awk divides.
now() { date +%s%N; }
"$BUILD/bench/whole_reference" --generate --n="$N" --d="$D" --k="$K" \
  --points="$work/points.f32" --centers="$work/init.csv"
echo "data: $N x $D float32 ($(($(stat -c %s "$work/points.f32") >> 20)) MiB), k = $K, T = $T," \
  "$STREAMS shards on one local replica ($(allowed_cpus | wc -l) CPUs)"

start_server "$work" "" --max_resident_bytes=$((8 << 30))
service_total=0
core_total=0
products_total=0
core_run() {  # core_run ASSIGNMENT: the in-process run, labels to labels.$1
  "$BUILD/bench/whole_reference" --points="$work/points.f32" --d="$D" \
    --centers="$work/init.csv" --iterations="$T" --tol=0 --assignment="$1" \
    --labels_out="$work/labels.$1" >"$work/$1.log"
}
for round in $(seq "$ROUNDS"); do
  t0=$(now)
  "$BUILD/client/kmt" cluster --mode=whole --server="$target" --streams="$STREAMS" \
    --input="$work/points.f32" --d="$D" --k="$K" --iterations="$T" --tol=0 --init=given \
    --centers_in="$work/init.csv" --labels_out="$work/labels.service" \
    --centers_out="$work/centers.service" >"$work/service.log" 2>&1
  t1=$(now)
  core_run auto
  t2=$(now)
  core_run products
  t3=$(now)
  service=$((t1 - t0))
  core=$((t2 - t1))
  products=$((t3 - t2))
  service_total=$((service_total + service))
  core_total=$((core_total + core))
  products_total=$((products_total + products))
  echo "round $round: service  $(grep -h '^resident:' "$work/service.log")"
  grep -h '^final objective' "$work/service.log" | sed "s/^/round $round: service  /" || true
  echo "round $round: core     $(cat "$work/auto.log")"
  echo "round $round: products $(cat "$work/products.log")"
  awk -v round="$round" -v service="$service" -v core="$core" -v products="$products" 'BEGIN {
    printf "round %d: end to end %.3f s, in-process %.3f s, products %.3f s; end to end / products %.2f\n",
      round, service / 1e9, core / 1e9, products / 1e9, service / products }'
  for other in auto products; do
    if ! cmp -s "$work/labels.service" "$work/labels.$other"; then
      echo "labels differ between the service and the core ($other)" >&2
      exit 1
    fi
  done
done
awk -v rounds="$ROUNDS" -v service="$service_total" -v core="$core_total" \
  -v products="$products_total" 'BEGIN {
  printf "total over %d rounds: end to end %.3f s, in-process %.3f s, in-process products %.3f s\n",
    rounds, service / 1e9, core / 1e9, products / 1e9
  printf "  ratios: end to end / in-process %.2f, end to end / products %.2f, in-process / products %.2f (labels equal)\n",
    service / core, service / products, core / products }'
echo "server peak resident memory: $(awk '/VmHWM/ { print $2 / 1024 " MiB" }' "/proc/$server/status")"

# Initialisation over all points against a sample.
"$BUILD/client/kmt" cluster --mode=whole --server="$target" --streams="$STREAMS" \
  --input="$work/points.f32" --d="$D" --k="$K" --iterations=0 >"$work/init_all.log" 2>&1
"$BUILD/client/kmt" cluster --mode=whole --resident=false --server="$target" \
  --input="$work/points.f32" --d="$D" --k="$K" --iterations=0 --batch_size=65536 \
  >"$work/init_sample.log" 2>&1
all=$(awk '/^initial objective/ { print $3 }' "$work/init_all.log")
init_seconds=$(sed -n 's/.*init \([0-9.]*\),.*/\1/p' "$work/init_all.log")
sample=$(awk '/^final objective/ { print $3 }' "$work/init_sample.log")
awk -v n="$N" -v all="$all" -v seconds="$init_seconds" -v sample="$sample" 'BEGIN {
  printf "k-means++ objective: over all %d points %.6g (%.3f s), on a 65,536-point sample %.6g (ratio %.4f)\n",
    n, all, seconds, sample, all / sample }'
