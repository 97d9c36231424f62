#!/bin/bash
# A learned model trained on a user's own data, end to end (docs/learning.md,
# "Trained on your own data"): scikit-learn's digits exported to .npy,
# kmt-train on subsets of its first 1,200 rows for each training seed (two
# at a time, one thread each, niced: the machine is shared; a model file
# already in OUT is kept), then kmt-eval on subsets of the other 597 rows
# (of each size in EVAL_POINTS) from random-subset and greedy k-means++
# centers, every model as trained, handed over to Lloyd's steps after
# LLOYD_AFTER layers, and guarded, each mean ± its standard error over tasks.
#
#   bench/digits_train.sh                                  # seeds 1 2 3
#   SEEDS=1 STEPS=100 TASKS=32 OUT=/tmp/d bench/digits_train.sh   # a short run
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
OUT=${OUT:-/tmp/digits-train}
SEEDS=${SEEDS:-1 2 3}
PARALLEL=${PARALLEL:-2}
STEPS=${STEPS:-4000}
BATCH=${BATCH:-32}
N=${N:-128}
EVAL_POINTS=${EVAL_POINTS:-256 128}
TASKS=${TASKS:-320}
EVAL_SEED=${EVAL_SEED:-1000003}
LLOYD_AFTER=${LLOYD_AFTER:-10}
mkdir -p "$OUT"
/usr/bin/python3 bench/digits_data.py "$OUT/digits.npy"

train() {
  OMP_NUM_THREADS=1 /usr/bin/time -v nice -n 10 "$BUILD/tools/kmt-train" \
    --data="$OUT/digits.npy" --data_train_rows=0:1200 --n="$N" --init=kmeans++,random \
    --steps="$STEPS" --batch="$BATCH" --seed="$1" --name="learned-onehot-digits-k10-seed$1" \
    --out="$OUT/seed$1.kmt" >"$OUT/train-seed$1.log" 2>&1
}
for seed in $SEEDS; do
  [ -f "$OUT/seed$seed.kmt" ] && continue
  train "$seed" &
  while [ "$(jobs -rp | wc -l)" -ge "$PARALLEL" ]; do wait -n; done
done
while [ "$(jobs -rp | wc -l)" -gt 0 ]; do wait -n; done
for seed in $SEEDS; do
  grep -hs "^wrote\|Elapsed (wall\|User time" "$OUT/train-seed$seed.log" || true
done | tee "$OUT/training-times.txt"

models=$(for seed in $SEEDS; do printf '%s,' "$OUT/seed$seed.kmt"; done)
for points in $EVAL_POINTS; do
  /usr/bin/time -v "$BUILD/tools/kmt-eval" --models="${models%,}" --data="$OUT/digits.npy" \
    --data_rows=1200: --data_points="$points" --scenarios=digits,digits-kmeans++ \
    --tasks="$TASKS" --seed="$EVAL_SEED" --lloyd_after="$LLOYD_AFTER" --guard --standard_errors \
    --out_md="$OUT/table-n$points.md" 2> >(tee "$OUT/eval-n$points-stderr.log" >&2) |
    tee "$OUT/eval-n$points.txt"
done
