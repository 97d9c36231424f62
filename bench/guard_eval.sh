#!/bin/bash
# The guarded learned models against Lloyd's and against the unguarded
# models (docs/learning.md, "The guard"): kmt-eval on fresh tasks in the
# training distribution from random-subset and greedy k-means++ centers, and
# off it (dimensions of unequal scales and offsets, Cauchy noise, half and
# double scale, scikit-learn's bundled datasets at d = 32), every model run
# as it is and guarded (--guard), each mean ± its standard error over tasks.
#
#   bench/guard_eval.sh                      # 320 tasks of seed 1000003
#   TASKS=64 OUT=/tmp/g bench/guard_eval.sh  # a short run
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
OUT=${OUT:-/tmp/guard-eval}
TASKS=${TASKS:-320}
SEED=${SEED:-1000003}
MODELS=${MODELS:-models/learned-onehot-d32-k10.kmt,models/learned-binary-d32-k10.kmt,models/learned-onehot-d32-k10-kpp.kmt}
mkdir -p "$OUT"
/usr/bin/python3 bench/guard_datasets.py "$OUT/data"
data=$(ls "$OUT"/data/*.npy | paste -sd,)
/usr/bin/time -v "$BUILD/tools/kmt-eval" --models="$MODELS" --guard --standard_errors \
  --tasks="$TASKS" --seed="$SEED" \
  --scenarios=random,kmeans++,unequal-dimensions,cauchy,half-scale,double-scale,iris,iris-kmeans++,wine,wine-kmeans++,breast_cancer,breast_cancer-kmeans++,digits,digits-kmeans++ \
  --data="$data" --out_md="$OUT/table.md" 2> >(tee "$OUT/stderr.log" >&2) | tee "$OUT/stdout.txt"
