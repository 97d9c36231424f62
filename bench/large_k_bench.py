#!/usr/bin/env python3
"""The initialisations at large k on one served batch: for each --inits
method, the server's compute_seconds and the objective of a batch of 0
Lloyd's iterations (the initialisation and the assignment every batch ends
with) and of --iterations iterations, on n x d float32 points drawn around
an 8-dimensional Gaussian latent space (as embeddings overlap), seed 3.
Each figure is one run (k-means++ at k = 16,384 takes minutes); the
methods run in turn on one server.

    cmake --build build -j2 --target kmt-server
    /usr/bin/python3 bench/large_k_bench.py --n=200000 --d=32 --k=16384
"""
import argparse
import os
import sys

import numpy as np
from pybench import started_server

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import kmt  # noqa: E402


def dataset(n, d, seed):
    """n points: an 8-dimensional standard normal projected to d, plus noise
    of standard deviation 0.3 in every dimension."""
    rng = np.random.default_rng(seed)
    latent = rng.standard_normal((n, 8)).astype(np.float32)
    projection = rng.standard_normal((8, d)).astype(np.float32)
    return latent @ projection + 0.3 * rng.standard_normal((n, d)).astype(np.float32)


def run(client, points, k, init, iterations):
    """(compute seconds, objective) of one batch."""
    got = []
    client.cluster_each([client.wire_request(points, k, init=init, iterations=iterations,
                                             seed=3)], got.append)
    if got[0].error.code:
        raise SystemExit(f"{init}: {got[0].error.message}")
    return got[0].timing.compute_seconds, got[0].objective


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=200000)
    parser.add_argument("--d", type=int, default=32)
    parser.add_argument("--k", type=int, default=16384)
    parser.add_argument("--iterations", type=int, default=1)
    parser.add_argument("--inits", default="two-level,random,kmeans++")
    parser.add_argument("--server", help="a running server; default: one started here")
    parser.add_argument("--server_binary", default="build/server/kmt-server")
    args = parser.parse_args()
    process = None
    address = args.server
    if address is None:
        process, address = started_server(args.server_binary, "--workers=1")
    try:
        client = kmt.Client(address)
        points = dataset(args.n, args.d, 3)
        print(f"n = {args.n}, d = {args.d}, k = {args.k}")
        print(f"| init | seconds, 0 iterations | objective | seconds, {args.iterations} "
              f"| objective |")
        print("|---|---|---|---|---|")
        for init in args.inits.split(","):
            start = run(client, points, args.k, init, 0)
            after = run(client, points, args.k, init, args.iterations)
            print(f"| {init} | {start[0]:.2f} | {start[1]:.6g} | {after[0]:.2f} | "
                  f"{after[1]:.6g} |", flush=True)
    finally:
        if process is not None:
            process.terminate()
            process.wait()


if __name__ == "__main__":
    main()
