#!/bin/bash
# k-means‖ against greedy k-means++ over all points, on shards resident on
# local kmt-server replicas, and against scikit-learn's k-means++ in this
# process, on the same data (K Gaussian blobs) in the same script. For each
# initialisation: its time, k-means‖'s rounds and candidates, the objective
# right after it and after Lloyd's to convergence (scikit-learn's tol rule),
# and the time of one Lloyd's iteration, which the init time is divided by.
# k-means‖ runs over one replica (2 shards) and over two (1 shard each): the
# same shards, so the same result, which the script checks.
#
#   bench/kmeans_parallel_bench.sh                  # 10^6 x 32 float32, k = 64
#   N=10000000 bench/kmeans_parallel_bench.sh       # 10^7 x 32 (1.2 GiB)
#   N=1000000 K=1024 bench/kmeans_parallel_bench.sh
#   N=20000 K=8 bench/kmeans_parallel_bench.sh      # a quick look
#
# GREEDY=0 leaves greedy k-means++ out, SKLEARN=0 scikit-learn; RUNS lists
# k-means‖'s rounds to run (default "2"), ELLS its oversampling factors l / k
# (default "1"), each with each.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
source bench/lib.sh
N=${N:-1000000}
D=${D:-32}
K=${K:-64}
T=${T:-100}
TOL=${TOL:-1e-4}
SEED=${SEED:-1}
GREEDY=${GREEDY:-1}
SKLEARN=${SKLEARN:-1}
RUNS=${RUNS:-2}
ELLS=${ELLS:-1}
work=$(mktemp -d)
second=
trap 'stop_server; if [[ -n $second ]]; then kill "$second" 2>/dev/null || true; fi; rm -rf "$work"' EXIT

"$BUILD/bench/whole_reference" --generate --n="$N" --d="$D" --k="$K" \
  --points="$work/points.f32" --centers="$work/unused.csv"
echo "data: $N x $D float32 ($(($(stat -c %s "$work/points.f32") >> 20)) MiB), $K blobs, k = $K," \
  "tol $TOL, at most $T iterations, seed $SEED; $(allowed_cpus | wc -l) CPUs; load: $(uptime)"

mkdir -p "$work/b"
start_server "$work/b" "" --max_resident_bytes=$((10 << 30)) --workers=1
second=$server
second_target=$target
start_server "$work" "" --max_resident_bytes=$((10 << 30)) --workers=2

# run NAME SERVER STREAMS [kmt flags...]: one job, its summary line.
run() {
  local name=$1 servers=$2 streams=$3
  shift 3
  "$BUILD/client/kmt" cluster --mode=whole --server="$servers" --streams="$streams" \
    --input="$work/points.f32" --d="$D" --k="$K" --iterations="$T" --tol="$TOL" \
    --seed="$SEED" --centers_out="$work/$name.centers.npy" "$@" >"$work/$name.log" 2>&1
  awk -v name="$name" '
    /^initial objective/ { initial = $3 }
    /^final objective/ { final = $3; iterations = $5 }
    /^resident:/ {
      for (i = 1; i <= NF; ++i) {
        if ($i == "init") init = $(i + 1) + 0
        if ($i == "iterations" && $(i + 3) ~ /each/) each = substr($(i + 2), 2) + 0
      }
    }
    /^k-means\|\|:.*rounds/ { rounds = $2; candidates = $4 }
    END {
      printf "%-28s init %8.3f s = %6.2f iterations | rounds %3s, candidates %6s | objective after init %.6g, converged %.6g after %d iterations (%.3f s each)\n",
        name, init, init / each, rounds == "" ? "-" : rounds, candidates == "" ? "-" : candidates,
        initial, final, iterations, each
    }' "$work/$name.log"
}

pair="ipv4:$target,$second_target"
for rounds in $RUNS; do
  for ell in $ELLS; do
    name="kmeans||-R$rounds-l${ell}k"
    flags=(--init='kmeans||' --kmeans_parallel_rounds="$rounds"
      --kmeans_parallel_oversampling="$ell")
    run "$name-1replica" "$target" 2 "${flags[@]}"
    run "$name-2replicas" "$pair" 1 "${flags[@]}"
    if ! cmp -s "$work/$name-1replica.centers.npy" "$work/$name-2replicas.centers.npy"; then
      echo "k-means|| gave other centers on two replicas than on one" >&2
      exit 1
    fi
  done
done
if [[ $GREEDY == 1 ]]; then run "greedy-kmeans++" "$pair" 1 --init=kmeans++; fi
echo "server peak resident memory: $(awk '/VmHWM/ { print $2 / 1024 " MiB" }' "/proc/$server/status")"
stop_server
kill "$second" 2>/dev/null || true
second=

if [[ $SKLEARN == 1 ]]; then
  /usr/bin/python3 - "$work/points.f32" "$D" "$K" "$T" "$TOL" "$SEED" <<'EOF'
import sys
import time

import numpy as np
from sklearn.cluster import KMeans, kmeans_plusplus
from sklearn.metrics import pairwise_distances_argmin_min

path, d, k, t, tol, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), \
    float(sys.argv[5]), int(sys.argv[6])
x = np.fromfile(path, dtype=np.float32).reshape(-1, d)
start = time.perf_counter()
centers, _ = kmeans_plusplus(x, k, random_state=seed)
init = time.perf_counter() - start
_, distances = pairwise_distances_argmin_min(x, centers)
initial = float(np.sum(distances.astype(np.float64) ** 2))
start = time.perf_counter()
fit = KMeans(k, init=centers, n_init=1, max_iter=t, tol=tol, random_state=seed).fit(x)
each = (time.perf_counter() - start) / max(fit.n_iter_, 1)
print(f"{'scikit-learn k-means++':<28} init {init:8.3f} s = {init / each:6.2f} iterations | "
      f"rounds   -, candidates      - | objective after init {initial:.6g}, converged "
      f"{fit.inertia_:.6g} after {fit.n_iter_} iterations ({each:.3f} s each)")
EOF
fi
