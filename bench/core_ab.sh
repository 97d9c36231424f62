#!/bin/bash
# Two builds of core_bench, before and after a change, in turns on the same
# machine: ROUNDS rounds, each running both binaries once (the order flips
# every round), so drift in the machine's speed falls on both alike. Prints,
# per benchmark, the median seconds per layer of each and their ratio.
#
#   bench/core_ab.sh BEFORE_CORE_BENCH AFTER_CORE_BENCH
#   ROUNDS=3 FILTER='FastPathLayer' MIN_TIME=1 bench/core_ab.sh ...
set -euo pipefail
before=${1:?usage: core_ab.sh BEFORE_CORE_BENCH AFTER_CORE_BENCH}
after=${2:?usage: core_ab.sh BEFORE_CORE_BENCH AFTER_CORE_BENCH}
ROUNDS=${ROUNDS:-5}
FILTER=${FILTER:-'FastPathLayer|DensePathLayer/(1024|4096)'}
MIN_TIME=${MIN_TIME:-1}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# run LABEL BINARY: appends "label benchmark seconds_per_layer" lines.
run() {
  "$2" --benchmark_filter="$FILTER" --benchmark_min_time="$MIN_TIME" \
    --benchmark_format=csv 2>/dev/null |
    awk -F, -v label="$1" '
      NR == 1 { for (i = 1; i <= NF; ++i) if ($i ~ /s_per_layer/) col = i; next }
      col && $1 ~ /^"?BM_/ { gsub(/"/, "", $1); print label, $1, $col }' >>"$work/times"
}

for ((r = 0; r < ROUNDS; ++r)); do
  if ((r % 2 == 0)); then
    run before "$before"
    run after "$after"
  else
    run after "$after"
    run before "$before"
  fi
done

echo "| benchmark | before s/layer | after s/layer | after / before | rounds |"
echo "|---|---|---|---|---|"
sort -k2,2 -k1,1 -k3,3g "$work/times" | awk '
  function median(a, n) { return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
  function flush() {
    if (name == "") return
    b = median(bs, nb); a = median(as, na)
    printf "| %s | %.4g | %.4g | %.3f | %d |\n", name, b, a, a / b, nb
  }
  $2 != name { flush(); name = $2; nb = 0; na = 0 }
  $1 == "before" { bs[++nb] = $3 }
  $1 == "after"  { as[++na] = $3 }
  END { flush() }'
