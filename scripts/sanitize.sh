#!/usr/bin/env bash
# Builds the project with sanitizers and runs tests under them.
#   scripts/sanitize.sh address    [CTEST_ARGS...]  AddressSanitizer + UBSan, build-asan/,
#                                                   the whole suite unless CTEST_ARGS select
#   scripts/sanitize.sh address-ci                  AddressSanitizer + UBSan on the libraries
#                                                   scripts/fuzz.sh builds (build-fuzz/, clang):
#                                                   the tests labelled `input` (docs/hardening.md
#                                                   says when to run them)
#   scripts/sanitize.sh thread     [CTEST_ARGS...]  ThreadSanitizer, build-tsan/, the tests
#                                                   labelled `concurrent` unless CTEST_ARGS
#                                                   select
#   scripts/sanitize.sh stress-ci                   the tests labelled `stress`, KMT_STRESS_SECONDS
#                                                   (default 10) each, under AddressSanitizer +
#                                                   UBSan (build-fuzz/, as address-ci) and then
#                                                   ThreadSanitizer (build-tsan/), building only
#                                                   kmt-server and the stress test programs
#   scripts/sanitize.sh stress                      the same, 120 s each unless KMT_STRESS_SECONDS
#                                                   says otherwise
# (address-stress and thread-stress are stress-ci's two halves, one
# sanitizer each.)
# Every instrumented process (the tests, and the kmt-server and kmt programs
# they start) writes its reports to DIR/reports/: a report fails the test it
# happens in, and any report file fails the script, so that a report in a
# child process no test watches is not lost. Suppressions (scripts/*.supp)
# are for third-party code only, each with its reason.
set -euo pipefail
cd "$(dirname "$0")/.."
kind=${1:?usage: scripts/sanitize.sh address|address-ci|thread|stress|stress-ci [ctest args]}
shift
here=$(pwd)
targets=(all)
if [[ $kind =~ ^(address-ci|stress|stress-ci)$ && $# -gt 0 ]]; then
  echo "sanitize: $kind runs its own programs and takes no ctest arguments" >&2
  exit 2
fi
if [[ $kind == stress || $kind == stress-ci ]]; then
  # The tests labelled `stress` (tests/CMakeLists.txt): the model directory
  # read every few milliseconds while its files change and every user of the
  # registry races it; resident jobs back to back while replicas are drained
  # and killed (tests-stress builds both programs). Each sanitizer runs them
  # in its own build: a failure under the first does not hide what the
  # second reports.
  default_seconds=10
  [[ $kind == stress ]] && default_seconds=120
  export KMT_STRESS_SECONDS=${KMT_STRESS_SECONDS:-$default_seconds}
  status=0
  "$0" address-stress || status=$?
  "$0" thread-stress || status=$?
  exit "$status"
fi
case "$kind" in
  address | address-ci | address-stress)
    dir=build-asan
    configure=(-DKMT_SANITIZE=address,undefined)
    default_tests=()
    if [[ $kind == address-stress ]]; then
      # On the fuzz targets' libraries, as address-ci: the server and the
      # stress tests are all that is compiled beyond them.
      dir=build-fuzz
      export CXX=clang++
      configure=(-DKMT_FUZZ=ON)
      targets=(kmt-server tests-stress)
      default_tests=(-L stress)
    fi
    if [[ $kind == address-ci ]]; then
      # The tests labelled `input` (tests/CMakeLists.txt): what turns outside
      # bytes into values, and the code that checks and runs them. The
      # libraries are the fuzz targets' (the same sanitizers, plus coverage
      # counters), which CI has just built: only the test programs and what
      # only they link are compiled here.
      dir=build-fuzz
      export CXX=clang++
      configure=(-DKMT_FUZZ=ON)  # and address,undefined
      targets=(tests-input)
      default_tests=(-L input)
    fi
    reports=$here/$dir/reports
    # A small quarantine of freed memory (256 MiB by default), so that the
    # tests that bound the server's memory measure the server, not ASan.
    export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1:quarantine_size_mb=16:log_path=$reports/asan
    export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:log_path=$reports/ubsan
    export LSAN_OPTIONS=suppressions=$here/scripts/lsan.supp:print_suppressions=0
    ;;
  thread | thread-stress)
    dir=build-tsan
    configure=(-DKMT_SANITIZE=thread)
    reports=$here/$dir/reports
    # ignore_noninstrumented_modules: Debian's libraries are not built with
    # ThreadSanitizer, so their calls into intercepted functions (free,
    # memcpy...) would be judged without the locks that order them
    # (scripts/tsan.supp). The longest history keeps both stacks of a report,
    # which the suppressions need to recognise gRPC's code.
    export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:history_size=7:ignore_noninstrumented_modules=1:suppressions=$here/scripts/tsan.supp:log_path=$reports/tsan
    # One OpenMP thread per parallel region. libgomp is not built with
    # ThreadSanitizer, so the barrier that ends a region is invisible to it
    # and every result read after a region would be reported as a race with
    # the thread that wrote it. The server runs each batch on one OpenMP
    # thread anyway (--threads_per_batch=1); what is checked here is the
    # concurrency around the OpenMP regions: workers, streams, clients.
    export OMP_NUM_THREADS=1
    # The tests labelled `concurrent` (tests/CMakeLists.txt): the worker
    # pool, the service and its streams (plaintext and TLS), resident jobs
    # (the Job RPC and the client that drives it), the metrics served while
    # batches update them, shutdown, the client's retries, and the Python
    # client and two replicas against the server; not the tests whose bounds
    # ThreadSanitizer itself breaks.
    default_tests=(-L concurrent)
    if [[ $kind == thread-stress ]]; then
      targets=(kmt-server tests-stress)
      default_tests=(-L stress)
    fi
    ;;
  *)
    echo "sanitize: unknown kind '$kind' (address, address-ci, thread, stress or stress-ci)" >&2
    exit 2
    ;;
esac
scripts/install-deps.sh
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "${configure[@]}" -DKMT_BUILD_TESTS=ON \
  -DKMT_BUILD_BENCHMARKS=OFF >/dev/null
cmake --build "$dir" -j2 --target "${targets[@]}"
rm -rf "$reports"
mkdir -p "$reports"
status=0
if [[ $# -eq 0 ]]; then set -- "${default_tests[@]}"; fi
ctest --test-dir "$dir" --output-on-failure "$@" || status=$?
if [[ -n $(ls -A "$reports") ]]; then
  echo "sanitize: reports in $reports:" >&2
  for report in "$reports"/*; do
    echo "== $report" >&2
    cat "$report" >&2
  done
  exit 1
fi
exit "$status"
