#!/usr/bin/env python3
"""kmt.KMeans on a scipy.sparse CSR matrix against scikit-learn's KMeans on
the same matrix, from the same initial centers: TF-IDF-like documents
(bench/sklearn_sparse_iteration.py's: Zipf term frequencies, --n x --d,
about 100 terms a row, unit rows, float32), --iterations Lloyd's
iterations (tol=0, n_init=1, algorithm="lloyd"), each side timed end to end
from the matrix to labels_ and inertia_, in turns, at each k of --ks.

The initial centers are k documents drawn at random (dense k x d, the same
array on both sides). kmt sends the matrix as sparse resident shards
(ShardChunk.points_csr) and computes from the nonzeros (the server it
starts takes messages of up to 512 MiB: each step carries the dense k x d
centers); scikit-learn runs its sparse Lloyd's on every core OpenMP gives
it.

Memory, beside the times: what a kmt fit adds to the client's resident set
(sampled every 5 ms, in a child process that holds only the matrix and the
centers, its resident set before the fit subtracted), and the server's
peak (VmHWM) after that fit on a server started for it; both against the
matrix's CSR bytes and its bytes made dense.

Each time is the median of --repeats runs. --results=FILE records each
row with its machine, date and command in that JSON file, replacing the
row of the same shape; bench/results/sparse.json holds the runs
docs/python.md shows (bench/render_tables.py renders them).

    R=--results=bench/results/sparse.json
    /usr/bin/python3 bench/sparse_bench.py --ks 20 --repeats=3 $R
    /usr/bin/python3 bench/sparse_bench.py --ks 256 --repeats=1 $R
"""
import argparse
import json
import os
import gc
import subprocess
import sys
import threading

import numpy as np
from pybench import agreement, print_thread_pools, server_for, started_server, timed
from render_tables import record_rows, sparse_table, sparse_workload
from sklearn_sparse_iteration import documents

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import kmt  # noqa: E402


# A resident step carries the k x d centers: 134 MB of float32 at k = 256,
# d = 2^17, past the server's default 64 MiB message.
SERVER_FLAGS = ("--max_message_bytes=536870912",)


def initial_centers(x, k, seed):
    """k distinct documents drawn at random, dense (k, d) float32."""
    rows = np.random.default_rng(seed).choice(x.shape[0], size=k, replace=False)
    return np.ascontiguousarray(x[np.sort(rows)].toarray(), dtype=np.float32)


def csr_bytes(x):
    return x.data.nbytes + x.indices.nbytes + x.indptr.nbytes


def server_peak_bytes(pid):
    """The server process's peak resident set (VmHWM)."""
    with open(f"/proc/{pid}/status", encoding="utf-8") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def resident_bytes():
    """This process's resident set now (VmRSS)."""
    with open("/proc/self/status", encoding="utf-8") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def child_fit(args):
    """One kmt fit in this process (run as a child): prints, as JSON, its
    resident bytes before the fit (the interpreter, its libraries, the
    matrix and the initial centers) and the most they reached during it,
    sampled every 5 ms (the peak of getrusage would be the data's making)."""
    x = documents(args.n, args.d, seed=args.seed)
    init = initial_centers(x, args.child_k, args.seed + 1)
    gc.collect()
    before = resident_bytes()
    peak = [before]
    done = threading.Event()

    def sample():
        while not done.wait(0.005):
            peak[0] = max(peak[0], resident_bytes())
    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        kmt.KMeans(args.child_k, init=init, n_init=1, max_iter=args.iterations, tol=0.0,
                   server=args.server).fit(x)
    finally:
        done.set()
        sampler.join()
    print(json.dumps(dict(before=before, after=max(peak[0], resident_bytes()))))


def memory(args, k):
    """(what a kmt fit adds to the client's resident set, the server's
    peak) in bytes, each process fresh."""
    proc, server = started_server(args.server_binary, *SERVER_FLAGS)
    try:
        out = subprocess.run(
            [sys.executable, os.path.abspath(__file__), f"--n={args.n}", f"--d={args.d}",
             f"--seed={args.seed}", f"--iterations={args.iterations}", f"--child_k={k}",
             f"--server={server}"], check=True, capture_output=True, text=True).stdout
        peaks = json.loads(out.strip().splitlines()[-1])
        return peaks["after"] - peaks["before"], server_peak_bytes(proc.pid)
    finally:
        proc.terminate()
        proc.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default="", help="the server or replicas to fit on")
    parser.add_argument("--server_binary", default="build/server/kmt-server",
                        help="started on a free port when --server is empty")
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--d", type=int, default=1 << 17)
    parser.add_argument("--ks", nargs="+", type=int, default=[20, 256])
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=21)
    parser.add_argument("--results", default="", help="write the run's results as JSON here")
    parser.add_argument("--child_k", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_k:
        child_fit(args)
        return

    import sklearn.cluster

    x = documents(args.n, args.d, seed=args.seed)
    with server_for(args.server, args.server_binary, *SERVER_FLAGS) as server:
        print_thread_pools()
        print(f"{x.shape[0]:,} x {x.shape[1]:,}, {x.nnz / x.shape[0]:.1f} nonzeros a row, "
              f"{csr_bytes(x) / 2**20:.0f} MiB as CSR", flush=True)
        rows = []
        load_at_start = os.getloadavg()[0]
        for k in args.ks:
            init = initial_centers(x, k, args.seed + 1)
            options = dict(init=init, n_init=1, max_iter=args.iterations, tol=0.0)
            ours, theirs = timed((
                lambda: kmt.KMeans(k, server=server, **options).fit(x),
                lambda: sklearn.cluster.KMeans(k, algorithm="lloyd", **options).fit(x)),
                args.repeats)
            client_peak, server_peak = memory(args, k)
            rows.append(dict(n=x.shape[0], d=x.shape[1], k=k, nnz=int(x.nnz),
                             iterations=args.iterations, repeats=args.repeats,
                             **agreement(ours, theirs), csr_bytes=csr_bytes(x),
                             dense_bytes=4 * x.shape[0] * x.shape[1],
                             client_peak_bytes=int(client_peak),
                             server_peak_bytes=int(server_peak)))
            print(sparse_table(rows)[-1], flush=True)
        print("\n".join(sparse_table(rows)))
        if args.results:
            # Each k's row replaces the row of the same shape from an earlier
            # run (so k = 256 may take fewer repeats than k = 20).
            record_rows(args.results, [dict(row, load_average_at_start=load_at_start)
                                       for row in rows], sparse_workload)

if __name__ == "__main__":
    main()
