#!/bin/bash
# A learned model trained on a user's own data, end to end (docs/learning.md,
# "Trained on your own data"): a dataset bundled with scikit-learn exported
# to .npy (bench/sklearn_data.py: digits, or breast_cancer standardised),
# kmt-train on subsets of its first TRAIN_ROWS rows for each training seed
# (two at a time, one thread each, niced: the machine is shared; a model
# file already in OUT is kept), each measured by kmt-train against Lloyd's
# on the validation rows that follow (half of the rest) from greedy
# k-means++ and random-subset starts, its hand-over layer chosen there, and
# written even when it is not ahead (--write_behind_lloyd), so that the
# table below shows every seed; then kmt-eval on subsets of the last rows
# (of each size in EVAL_POINTS) from both starts, every model with the
# hand-over its training chose and guarded, each mean ± its standard error
# over tasks. Prints a table of the validation results, one row per seed.
#
#   bench/data_train.sh                                   # digits, seeds 1 2 3
#   DATASET=breast_cancer TRAIN_ROWS=400 bench/data_train.sh
#   SEEDS=1 STEPS=100 TASKS=32 OUT=/tmp/d bench/data_train.sh   # a short run
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
DATASET=${DATASET:-digits}
OUT=${OUT:-/tmp/$DATASET-train}
SEEDS=${SEEDS:-1 2 3}
PARALLEL=${PARALLEL:-2}
STEPS=${STEPS:-4000}
BATCH=${BATCH:-32}
N=${N:-128}
K=${K:-10}
TRAIN_ROWS=${TRAIN_ROWS:-1200}
EVAL_POINTS=${EVAL_POINTS:-256 128}
TASKS=${TASKS:-320}
EVAL_SEED=${EVAL_SEED:-1000003}
mkdir -p "$OUT"
/usr/bin/python3 bench/sklearn_data.py "$DATASET" "$OUT/data.npy"
rows=$(/usr/bin/python3 -c "import numpy, sys; print(numpy.load(sys.argv[1]).shape[0])" "$OUT/data.npy")
validation_end=$((TRAIN_ROWS + (rows - TRAIN_ROWS + 1) / 2))

train() {
  OMP_NUM_THREADS=1 /usr/bin/time -v nice -n 10 "$BUILD/tools/kmt-train" \
    --data="$OUT/data.npy" --data_train_rows=0:"$TRAIN_ROWS" --n="$N" --k="$K" \
    --init=kmeans++,random --steps="$STEPS" --batch="$BATCH" --seed="$1" \
    --name="learned-onehot-$DATASET-k$K-seed$1" --write_behind_lloyd \
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

# The validation results kmt-train printed, one row per seed.
{
  echo "| seed | hand-over layer | from greedy k-means++ | from random subsets | ahead |"
  echo "|---|---|---|---|---|"
  for seed in $SEEDS; do
    log="$OUT/train-seed$seed.log"
    plus=$(grep -o "kmeans++ starts, [0-9]* steps): [-+0-9.]* +- [0-9.]*" "$log" | sed 's/.*: //')
    random=$(grep -o "random starts, [0-9]* steps): [-+0-9.]* +- [0-9.]*" "$log" | sed 's/.*: //')
    layer=$(grep -o "Lloyd's after layer [0-9]*" "$log" | grep -o "[0-9]*$")
    ahead=$(grep -q "^NOT ahead" "$log" && echo no || echo yes)
    echo "| $seed | $layer | ${plus/+-/±} | ${random/+-/±} | $ahead |"
  done
} | tee "$OUT/validation.md"

models=$(for seed in $SEEDS; do printf '%s,' "$OUT/seed$seed.kmt"; done)
for points in $EVAL_POINTS; do
  /usr/bin/time -v "$BUILD/tools/kmt-eval" --models="${models%,}" --data="$OUT/data.npy" \
    --data_rows="$validation_end": --data_points="$points" \
    --scenarios=data,data-kmeans++ \
    --tasks="$TASKS" --seed="$EVAL_SEED" --guard --standard_errors \
    --out_md="$OUT/table-n$points.md" 2> >(tee "$OUT/eval-n$points-stderr.log" >&2) |
    tee "$OUT/eval-n$points.txt"
done
