#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, AddressSanitizer + UBSan) into
# build-fuzz/ and runs each for SECONDS (default 60) from its checked-in seed
# corpus. An input slower than 1 s, a crash, a sanitizer report or a leak
# fails the run; a failing input is written to build-fuzz/artifacts/.
#   scripts/fuzz.sh [SECONDS] [TARGET...]   targets: cluster_request model_file point_reader
#                                           shard_chunk
# SECONDS 0 builds the targets and runs none (.ci/run builds them while the
# test suite runs).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
targets=("$@")
[[ ${#targets[@]} -eq 0 ]] && targets=(cluster_request model_file point_reader shard_chunk)

scripts/install-deps.sh
# Configured as scripts/sanitize.sh address-ci configures the same directory
# (the tests too), so that neither step makes the other regenerate it.
CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKMT_FUZZ=ON \
  -DKMT_BUILD_TESTS=ON -DKMT_BUILD_BENCHMARKS=OFF >/dev/null
cmake --build build-fuzz -j2 --target "${targets[@]/%/_fuzz}"

[[ $seconds -eq 0 ]] && exit 0
mkdir -p build-fuzz/artifacts
for t in "${targets[@]}"; do
  # New inputs go to a scratch corpus; the seeds stay as checked in.
  work=build-fuzz/corpus/$t
  mkdir -p "$work"
  echo "fuzz: $t for ${seconds}s" >&2
  OMP_NUM_THREADS=1 build-fuzz/fuzz/${t}_fuzz "$work" "fuzz/corpus/$t" \
    -max_total_time="$seconds" -timeout=1 -rss_limit_mb=2048 -max_len=65536 \
    -artifact_prefix=build-fuzz/artifacts/${t}- -print_final_stats=1 2>build-fuzz/$t.log ||
    { tail -50 build-fuzz/$t.log >&2; exit 1; }
  grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb|cov: " build-fuzz/$t.log | tail -3 >&2
done
