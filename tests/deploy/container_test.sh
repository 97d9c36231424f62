#!/usr/bin/env bash
# Builds the Dockerfile with buildah, runs the image with podman, and checks
# that it serves: the model list, a CSV clustered through it by the host's
# kmt, that batch counted on the metrics port; that it runs as a non-root
# user and exits 0 on SIGTERM. Prints the image size and how long each step
# took.
#   tests/deploy/container_test.sh [path/to/kmt]     (as root)
# The image comes from scripts/build-image.sh (no image registry needed).
set -euo pipefail
cd "$(dirname "$0")/../.."
name=kmt-container-test-$$
cli="${1:-build/client/kmt}"
work="$(mktemp -d)"
trap 'podman rm -f "$name" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

step_start=$SECONDS
step() {
  echo "container_test: $1 ($((SECONDS - step_start)) s)" >&2
  step_start=$SECONDS
}

image=$(scripts/build-image.sh)
step "image built"

# runc rather than crun, which refuses hosts that mount cgroup v1 and v2
# side by side; explicit limits, as podman's defaults exceed what a host
# that is itself a container may grant (the server needs well under 4096
# threads). The host's network, and ports the server picks, so that nothing
# else listening is in the way.
podman run -d --name "$name" --runtime=runc --network=host \
  --ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" --ulimit nproc=4096:4096 \
  "$image" \
  --listen=127.0.0.1:0 --port_file=/tmp/port --metrics_listen=127.0.0.1:0 \
  --metrics_port_file=/tmp/metrics_port >/dev/null
for _ in $(seq 300); do
  podman exec "$name" test -s /tmp/metrics_port 2>/dev/null && break
  sleep 0.1
done
port=$(podman exec "$name" cat /tmp/port)
metrics_port=$(podman exec "$name" cat /tmp/metrics_port)
step "container serving on port $port, metrics on $metrics_port"

fail() { echo "container_test: FAILED: $*" >&2; podman logs "$name" >&2; exit 1; }
uid=$(podman exec "$name" id -u)
[[ "$uid" != 0 ]] || fail "the server runs as root"
models=$("$cli" models --server="127.0.0.1:$port")
grep -q '^learned-onehot-d32-k10 ' <<<"$models" || fail "models: $models"
clustered=$("$cli" cluster --server="127.0.0.1:$port" --input=docs/examples/points.csv --k=5 \
  --labels_out="$work/labels.txt" 2>&1)
grep -q '2000 points, 0 failed' <<<"$clustered" || fail "cluster: $clustered"
[[ $(wc -l <"$work/labels.txt") == 2000 ]] || fail "labels: $(wc -l <"$work/labels.txt")"
podman exec "$name" kmt models --server="127.0.0.1:$port" >/dev/null || fail "kmt in the image"
exec 3<>"/dev/tcp/127.0.0.1/$metrics_port"
printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3
metrics=$(cat <&3)
exec 3<&-
grep -Eq '^kmt_build_info\{simd="[^"]*(x86-64|v2|v3|v4)",version="0.1.0"\} 1' <<<"$metrics" ||
  fail "metrics: no build info with the dispatched SIMD level"
grep -q '^kmt_batches_total{code="OK",model="lloyd-onehot"} 1' <<<"$metrics" ||
  fail "metrics: the clustered batch is not counted"
podman stop -t 40 "$name" >/dev/null
[[ $(podman inspect -f '{{.State.ExitCode}}' "$name") == 0 ]] || fail "exit code after SIGTERM"
step "checks passed"

size=$(podman image inspect -f '{{.Size}}' "$image")
echo "container_test: image $image, $((size / 1024 / 1024)) MiB, runs as uid $uid; 1 passed, 0 failed"
