#!/usr/bin/env python3
"""The fast path, its bound-based assignment, FAISS and scikit-learn's
`lloyd` and `elkan` on the same data from the same initial centers, to
convergence (an iteration that changes no label) or to a cap, in one script.

build/bench/bounds_bench runs ours (products; bounds with the double sums
added again at every layer; bounds with exact sums updated by the moved
points, with every layer's objective and with the last one alone, as a
request without a trajectory runs) and FAISS (a fixed
number of iterations: it has no convergence test) and writes the problem's
points and initial centers as .npy; scikit-learn then runs on those files
(tol=0 is its strict convergence: it stops when no label changes). Times are
wall-clock; the ratios are against the products run of the same script.

  nice -n 5 python3 bench/bounds_peers.py --n 1000000 --d 32 --k 64 --data 2
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
from sklearn.cluster import KMeans


def run_ours(binary, n, d, k, data, cap, dump):
    env = dict(os.environ, BOUNDS_BENCH_DUMP=dump, BOUNDS_BENCH_N=str(n), BOUNDS_BENCH_CAP=str(cap))
    pattern = f"BM_Lloyd/n:{n}/d:{d}/k:{k}/data:{data}/|BM_Faiss/n:{n}/d:{d}/k:{k}/data:{data}/"
    out = subprocess.run(
        [binary, f"--benchmark_filter={pattern}", "--benchmark_format=json"],
        env=env, check=True, capture_output=True, text=True).stdout
    rows = []
    for b in json.loads(out)["benchmarks"]:
        name = b["name"]
        if name.startswith("BM_Faiss"):
            label = "FAISS (flat L2)"
        else:
            path = int(name.split("/path:")[1].split("/")[0])
            sums = int(name.split("/sums:")[1].split("/")[0])
            label = {0: "fast path, products", 1: "fast path, bounds (auto)",
                     2: "fast path, bounds (forced)"}[path]
            label += ", exact sums" if sums == 1 else ", double sums"
            objectives = int(name.split("/objectives:")[1].split("/")[0])
            label += ", every layer's objective" if objectives == 1 else ", the last objective"
        seconds = b["real_time"] / 1e3  # milliseconds
        rows.append((label, int(b["layers"]), seconds, b.get("settled"), b.get("gemm_s")))
    return rows


def run_sklearn(points, init, cap, algorithm):
    model = KMeans(n_clusters=init.shape[0], init=init, n_init=1, max_iter=cap, tol=0,
                   algorithm=algorithm)
    start = time.perf_counter()
    model.fit(points)
    return int(model.n_iter_), time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", default="build/bench/bounds_bench")
    parser.add_argument("--n", type=int, default=1000000)
    parser.add_argument("--d", type=int, default=32)
    parser.add_argument("--k", type=int, default=64)
    parser.add_argument("--data", type=int, default=2,
                        help="0: blobs from k-means++, 1: uniform, 2: blobs from a random subset")
    parser.add_argument("--cap", type=int, default=300)
    parser.add_argument("--skip-elkan", action="store_true")
    args = parser.parse_args()

    print(f"load average before: {os.getloadavg()}", file=sys.stderr)
    with tempfile.TemporaryDirectory() as dump:
        rows = run_ours(args.binary, args.n, args.d, args.k, args.data, args.cap, dump)
        stem = f"{dump}/n{args.n}_d{args.d}_k{args.k}_data{args.data}"
        points = np.load(stem + "_points.npy")
        init = np.load(stem + "_init.npy")
    for algorithm in ["lloyd"] + ([] if args.skip_elkan else ["elkan"]):
        iterations, seconds = run_sklearn(points, init, args.cap, algorithm)
        rows.append((f"scikit-learn {algorithm}", iterations, seconds, None, None))
    print(f"load average after: {os.getloadavg()}", file=sys.stderr)

    reference = next(r for r in rows if r[0].startswith("fast path, products"))
    ref_per_layer = reference[2] / reference[1]
    gemm = next((r[4] for r in rows if r[4]), None)
    print(f"n = {args.n}, d = {args.d}, k = {args.k}, data {args.data}, cap {args.cap}"
          + (f", GEMM bound {gemm * 1e3:.1f} ms/iteration" if gemm else ""))
    print("| run | iterations | total s | ms/iteration | total / products | per iteration / products |")
    print("|---|---|---|---|---|---|")
    for label, iterations, seconds, _, _ in rows:
        per = seconds / max(iterations, 1)
        total_ratio = f"{seconds / reference[2]:.2f}" if "FAISS" not in label else "-"
        print(f"| {label} | {iterations} | {seconds:.2f} | {per * 1e3:.1f} | {total_ratio} | "
              f"{per / ref_per_layer:.2f} |")


if __name__ == "__main__":
    main()
