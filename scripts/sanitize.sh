#!/usr/bin/env bash
# Builds the project with sanitizers and runs tests under them.
#   scripts/sanitize.sh address [CTEST_ARGS...]  AddressSanitizer + UBSan, build-asan/,
#                                                the whole suite unless CTEST_ARGS select
#   scripts/sanitize.sh thread  [CTEST_ARGS...]  ThreadSanitizer, build-tsan/, the server
#                                                and client concurrency tests
# Any report fails the test it happens in. Suppressions (scripts/*.supp) are
# for third-party code only, each with its reason.
set -euo pipefail
cd "$(dirname "$0")/.."
kind=${1:?usage: scripts/sanitize.sh address|thread [ctest args]}
shift
here=$(pwd)
case "$kind" in
  address)
    dir=build-asan
    sanitize=address,undefined
    # A small quarantine of freed memory (256 MiB by default), so that the
    # tests that bound the server's memory measure the server, not ASan.
    export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1:quarantine_size_mb=16
    export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
    export LSAN_OPTIONS=suppressions=$here/scripts/lsan.supp:print_suppressions=0
    default_tests=()
    ;;
  thread)
    dir=build-tsan
    sanitize=thread
    export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$here/scripts/tsan.supp
    # The concurrent parts: the worker pool, the service and its streams,
    # shutdown, the client's retries.
    default_tests=(-R "WorkerPool|BatchRunner|Service|ClientRetries|ClusterSums")
    ;;
  *)
    echo "sanitize: unknown kind '$kind' (address or thread)" >&2
    exit 2
    ;;
esac
scripts/install-deps.sh
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKMT_SANITIZE="$sanitize" \
  -DKMT_BUILD_BENCHMARKS=OFF >/dev/null
cmake --build "$dir" -j2
if [[ $# -eq 0 ]]; then set -- "${default_tests[@]}"; fi
ctest --test-dir "$dir" --output-on-failure "$@"
