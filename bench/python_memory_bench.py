#!/usr/bin/env python3
"""The client's peak memory in kmt.KMeans(...).fit(X) of a large array: the
process's peak resident set (getrusage's ru_maxrss) before the fit (the
interpreter, its libraries and X) and after it, against X's size.

X is --n x --d of --dtype (float32 or float16), standard normal values made
a block at a time (no float64 copy), fitted from its first k rows with
--iterations Lloyd's iterations and scikit-learn's tol; above one message
(or above --batch_size) that is a resident job. The server is --server, or
one started from --server_binary on a free loopback port. Run one dtype per
process: a peak is the process's own.

    /usr/bin/python3 bench/python_memory_bench.py --n=200000 --d=768
    /usr/bin/python3 bench/python_memory_bench.py --n=200000 --d=768 --dtype=float16
"""
import argparse
import os
import resource
import sys
import time

import numpy as np
from pybench import started_server

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import kmt  # noqa: E402

MIB = 1 << 20


def peak_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default="", help="the server or replicas to fit on")
    parser.add_argument("--server_binary", default="build/server/kmt-server",
                        help="started when --server is not given")
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--d", type=int, default=768)
    parser.add_argument("--k", type=int, default=256)
    parser.add_argument("--iterations", type=int, default=2)
    parser.add_argument("--dtype", choices=["float32", "float16"], default="float32")
    parser.add_argument("--batch_size", type=int, default=None,
                        help="kmt.KMeans's batch_size (default: as many as one message holds)")
    parser.add_argument("--verbose", type=int, default=0, help="kmt.KMeans's verbose")
    args = parser.parse_args()

    proc, server = (None, args.server) if args.server else started_server(args.server_binary)
    try:
        rng = np.random.default_rng(1)
        X = np.empty((args.n, args.d), dtype=args.dtype)
        for first in range(0, args.n, 10_000):
            rows = min(10_000, args.n - first)
            X[first:first + rows] = rng.standard_normal((rows, args.d), dtype=np.float32)
        before = peak_bytes()
        start = time.perf_counter()
        fitted = kmt.KMeans(args.k, init=X[:args.k].astype(np.float32), n_init=1,
                            max_iter=args.iterations, server=server,
                            batch_size=args.batch_size, verbose=args.verbose).fit(X)
        seconds = time.perf_counter() - start
        after = peak_bytes()
        print(f"{args.n} x {args.d} {args.dtype}, k = {args.k}, {fitted.n_iter_} iterations "
              f"in {seconds:.1f} s: X {X.nbytes / MIB:.0f} MiB; peak RSS before the fit "
              f"{before / MIB:.0f} MiB, after {after / MIB:.0f} MiB: {after / X.nbytes:.2f}x X, "
              f"the fit's own {(after - before) / MIB:.0f} MiB")
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait()


if __name__ == "__main__":
    main()
