#!/usr/bin/env bash
# The kernels at every SIMD level this CPU runs against a -march=native build
# of the same sources, on the same machine, in turns: bench/simd_bench from
# build/ (the default, dispatched build: each level in one process) and from
# build-native/ (KMT_NATIVE=ON, configured and built here if missing), ROUNDS
# times each, alternating, then one table of the median time per benchmark
# and its ratio to the native build's.
#   bench/simd_levels.sh [ROUNDS]   (default 5)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
cmake --build build -j2 --target simd_bench >/dev/null
cmake -S . -B build-native -DCMAKE_BUILD_TYPE=Release -DKMT_NATIVE=ON -DKMT_BUILD_TESTS=OFF \
  >/dev/null
cmake --build build-native -j2 --target simd_bench >/dev/null
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for ((r = 1; r <= rounds; ++r)); do
  build/bench/simd_bench --benchmark_format=csv >"$out/dispatch-$r.csv" 2>/dev/null
  build-native/bench/simd_bench --benchmark_format=csv >"$out/native-$r.csv" 2>/dev/null
done
python3 - "$out" "$rounds" <<'PY'
import csv, glob, statistics, sys
out, rounds = sys.argv[1], sys.argv[2]
times = {}
for path in sorted(glob.glob(f"{out}/*.csv")):
    with open(path) as f:
        rows = [line for line in f if line.startswith("name,") or line.startswith('"BM_')]
    for row in csv.DictReader(rows):
        name = row["name"].strip('"').removesuffix("/real_time")
        scale = {"ms": 1e-3, "us": 1e-6, "ns": 1e-9}[row["time_unit"]]
        times.setdefault(name, []).append(float(row["real_time"]) * scale)
print(f"median of {rounds} alternated runs; ratio: time / the native build's")
print("| benchmark | level | median | ratio |")
print("|---|---|---|---|")
for bench in sorted({n.rsplit("/", 1)[0] for n in times}):
    native = statistics.median(times[f"{bench}/native"])
    for name in sorted(n for n in times if n.rsplit("/", 1)[0] == bench):
        t = statistics.median(times[name])
        unit, div = ("ms", 1e-3) if t >= 1e-3 else ("us", 1e-6)
        print(f"| {bench} | {name.rsplit('/', 1)[1]} | {t / div:.3f} {unit} | {t / native:.3f} |")
PY
