#!/usr/bin/env bash
# The image's kernels against a -march=native build on the same machine: the
# same whole-dataset job (`kmt cluster --mode=whole`, 10^6 x 32 float32,
# k = 64, from the same given centers to a fixed point or T iterations, one
# shard) against three servers in turns: the image's (scripts/build-image.sh,
# run with podman on the host's network), one built with KMT_NATIVE=ON
# (build-native/, configured and built here if missing) and the default
# dispatched build (build/). Prints the time per iteration of each, as the
# client reports it: the medians and their ratios to the native build's.
#   bench/container_bench.sh [ROUNDS]     (as root; default 5)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
N=${N:-1000000}
D=${D:-32}
K=${K:-64}
T=${T:-20}
work=$(mktemp -d)
name=kmt-container-bench-$$
pids=()
trap 'podman rm -f "$name" >/dev/null 2>&1 || true; kill "${pids[@]}" 2>/dev/null || true;
      rm -rf "$work"' EXIT

image=$(scripts/build-image.sh)
cmake --build build -j2 --target kmt-server kmt whole_reference >/dev/null
cmake -S . -B build-native -DCMAKE_BUILD_TYPE=Release -DKMT_NATIVE=ON -DKMT_BUILD_TESTS=OFF \
  >/dev/null
cmake --build build-native -j2 --target kmt-server >/dev/null

# host_server NAME BUILD: a server of that build on a free loopback port.
declare -A target
host_server() {
  "$2/server/kmt-server" --model_dir= --listen=127.0.0.1:0 --metrics_listen=127.0.0.1:0 \
    --port_file="$work/$1.port" --max_resident_bytes=$((4 << 30)) 2>"$work/$1.log" &
  pids+=($!)
  for _ in $(seq 100); do [[ -s $work/$1.port ]] && break; sleep 0.1; done
  target[$1]=127.0.0.1:$(cat "$work/$1.port")
}
host_server native build-native
host_server dispatch build
# As tests/deploy/container_test.sh runs it.
podman run -d --name "$name" --runtime=runc --network=host \
  --ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" --ulimit nproc=4096:4096 "$image" \
  --model_dir= --listen=127.0.0.1:0 --port_file=/tmp/port --metrics_listen=127.0.0.1:0 \
  --max_resident_bytes=$((4 << 30)) >/dev/null
for _ in $(seq 300); do podman exec "$name" test -s /tmp/port 2>/dev/null && break; sleep 0.1; done
target[image]=127.0.0.1:$(podman exec "$name" cat /tmp/port)
image_simd=$(podman logs "$name" 2>&1 | grep -o 'simd [^;]*' | head -1)

build/bench/whole_reference --generate --n="$N" --d="$D" --k="$K" \
  --points="$work/points.f32" --centers="$work/init.csv"
echo "data: $N x $D float32, k = $K, $T iterations, one shard; image: $image_simd"
for ((r = 1; r <= rounds; ++r)); do
  for side in native image dispatch; do
    build/client/kmt cluster --mode=whole --server="${target[$side]}" --streams=1 \
      --input="$work/points.f32" --d="$D" --k="$K" --iterations="$T" --tol=0 --init=given \
      --centers_in="$work/init.csv" --labels_out="$work/labels.$side" >"$work/run.log" 2>&1
    each=$(grep -o 'iterations [0-9.]* ([0-9.]* each)' "$work/run.log" | grep -o '([0-9.]*' |
      tr -d '(')
    [[ -n $each ]] || { cat "$work/run.log" >&2; exit 1; }
    echo "$side $each" >>"$work/times"
  done
  cmp -s "$work/labels.native" "$work/labels.image" || { echo "labels differ" >&2; exit 1; }
done
python3 - "$work/times" <<'PY'
import statistics, sys
times = {}
for line in open(sys.argv[1]):
    side, t = line.split()
    times.setdefault(side, []).append(float(t))
native = statistics.median(times["native"])
print("| server | seconds per iteration (median) | ratio to native |")
print("|---|---|---|")
for side in ("native", "image", "dispatch"):
    t = statistics.median(times[side])
    print(f"| {side} | {t:.4f} | {t / native:.3f} |")
PY
