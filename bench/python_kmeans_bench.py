#!/usr/bin/env python3
"""kmt.KMeans against scikit-learn's KMeans on the same data, from the same
initial centers, each timed end to end from a numpy array to fitted
attributes:

  whole:   one n x d float32 dataset (10^6 x 32; --dtype=float64, the same
           points as float64, which both fit in double), k = 64,
           scikit-learn's default tol, both to convergence (kmt: a resident
           job, since the data is larger than one message);
  batches: 64 batches of 4,096 x 32 (the dataset's first rows), k = 16,
           max_iter = 10 each (kmt: kmt.fit_each, every batch on one stream;
           scikit-learn: KMeans(...).fit on each batch in turn).
MiniBatchKMeans has its own, bench/minibatch_bench.py.

Each figure is the median of --repeats runs (the range beside it), the
two sides run in alternation;
--float64_reference also fits scikit-learn on the dataset as float64, whose
iterations and labels both float32 fits are compared with. The
server is --server, or one started from --server_binary on a free loopback
port with its default workers. scikit-learn's BLAS and OpenMP threads are
printed as threadpoolctl reports them (--sklearn_threads limits them: on a
busy machine, libgomp's threads that wait for each other at every small
parallel loop can make two threads many times slower than one).

    build/server/kmt-server --listen=127.0.0.1:50051 --model_dir= &
    /usr/bin/python3 bench/python_kmeans_bench.py --server=127.0.0.1:50051

--results=FILE records the whole fit's and the batches' figures in FILE
(JSON), replacing that workload's earlier runs there, or beside them with
--another_round; bench/results/python_kmeans.json is what docs/python.md
shows, rendered there by bench/render_tables.py.
"""
import argparse
import os
import sys

import numpy as np
from pybench import print_thread_pools, started_server, timed
from render_tables import python_kmeans_workload, record_rows

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import kmt  # noqa: E402


def dataset(n, d, k, seed):
    """n points around k centers in [-1, 1]^d with noise that makes the
    clusters touch, so Lloyd's needs dozens of iterations to settle."""
    rng = np.random.default_rng(seed)
    centers = rng.uniform(-1, 1, size=(k, d)).astype(np.float32)
    points = centers[rng.integers(0, k, size=n)]
    points += rng.normal(0, 0.35, size=(n, d)).astype(np.float32)
    return points


def report(name, ours, theirs, n_iter, inertia):
    ratio = ours[0] / theirs[0]
    print(f"{name}: kmt {ours[0]:.3f} s ({ours[1]:.3f}-{ours[2]:.3f}), scikit-learn "
          f"{theirs[0]:.3f} s ({theirs[1]:.3f}-{theirs[2]:.3f}): {ratio:.2f}x")
    print(f"  n_iter_ kmt {n_iter[0]}, scikit-learn {n_iter[1]}; inertia kmt {inertia[0]:.6g}, "
          f"scikit-learn {inertia[1]:.6g} (relative difference "
          f"{abs(inertia[0] - inertia[1]) / inertia[1]:.1e})")
    return ratio


def same_fits(a, b):
    """Two lists of fitted estimators are equal to the bit."""
    return all(np.array_equal(x.labels_, y.labels_) and
               np.array_equal(x.cluster_centers_, y.cluster_centers_) and x.inertia_ == y.inertia_
               for x, y in zip(a, b))


def compare_streams(name, fit, repeats):
    """`fit()` (a list of fitted estimators) with its client's stream in the
    C++ client (Client.cluster_each) and through gRPC's Python API
    (KMT_COMPILED_STREAMS=0), in alternation: the medians of the wall time
    and of this process's CPU time, and the fits equal."""
    def python_api():
        before = os.environ.get("KMT_COMPILED_STREAMS")
        os.environ["KMT_COMPILED_STREAMS"] = "0"
        try:
            return fit()
        finally:
            if before is None:
                del os.environ["KMT_COMPILED_STREAMS"]
            else:
                os.environ["KMT_COMPILED_STREAMS"] = before
    ways = dict(zip(("the C++ client", "gRPC's Python API"), timed((fit, python_api), repeats)))
    same = same_fits(*(way[3] for way in ways.values()))
    for way, (wall, _, _, _, cpu) in ways.items():
        print(f"  {name} through {way}: {wall:.4f} s, the client's CPU {cpu:.4f} s")
    print(f"  the same fits both ways: {same}")
    if not same:
        raise SystemExit(f"{name}'s fits differ between the two streams")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default="", help="the server or replicas to fit on")
    parser.add_argument("--server_binary", default="build/server/kmt-server",
                        help="started on a free port when --server is empty")
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--d", type=int, default=32)
    parser.add_argument("--k", type=int, default=64)
    parser.add_argument("--batches", type=int, default=64, help="0: skip the batches")
    parser.add_argument("--batch_n", type=int, default=4096)
    parser.add_argument("--batch_k", type=int, default=16)
    parser.add_argument("--batch_iterations", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--skip_whole", action="store_true")
    parser.add_argument("--sklearn_threads", type=int, default=0,
                        help="scikit-learn's OpenMP and BLAS threads (threadpoolctl); 0: as it is")
    parser.add_argument("--dtype", choices=["float32", "float64"], default="float32",
                        help="the whole fit's points (the batches stay float32)")
    parser.add_argument("--float64_reference", action="store_true",
                        help="also fit scikit-learn on the whole dataset as float64 (untimed)")
    parser.add_argument("--streams", action="store_true",
                        help="also time kmt.fit_each through the C++ client against gRPC's "
                             "Python API, in alternation")
    parser.add_argument("--results", default="",
                        help="record the whole fit's and the batches' figures in this JSON file")
    parser.add_argument("--another_round", action="store_true",
                        help="with --results: keep the workloads' earlier runs there as rounds")
    args = parser.parse_args()

    import sklearn.cluster
    recorded = []

    proc = None
    server = args.server
    if not server:
        proc, server = started_server(args.server_binary)
    try:
        print_thread_pools(args.sklearn_threads)
        points = dataset(max(args.n, args.batches * args.batch_n), args.d, args.k, args.seed)
        if not args.skip_whole:
            X = points[:args.n].astype(args.dtype)
            init = X[np.random.default_rng(args.seed + 1).choice(len(X), size=args.k,
                                                                 replace=False)]
            ours, theirs = timed((
                lambda: kmt.KMeans(args.k, init=init, n_init=1, server=server).fit(X),
                lambda: sklearn.cluster.KMeans(args.k, init=init, n_init=1).fit(X)), args.repeats)
            agree = float((ours[3].labels_ == theirs[3].labels_).mean())
            ratio = report(f"whole fit, {args.n} x {args.d} {args.dtype}, k = {args.k}", ours,
                           theirs, (ours[3].n_iter_, theirs[3].n_iter_),
                           (ours[3].inertia_, theirs[3].inertia_))
            recorded.append(dict(workload="whole", dtype=args.dtype, n=args.n, d=args.d, k=args.k,
                                 repeats=args.repeats, kmt_s=ours[0], sklearn_s=theirs[0],
                                 ratio=ratio))
            print(f"  labels equal to scikit-learn's: {100 * agree:.3f}% of points")
            if args.float64_reference:
                # scikit-learn sums float32 points in float32; kmt in double.
                exact = sklearn.cluster.KMeans(args.k, init=init.astype(np.float64), n_init=1).fit(
                    X.astype(np.float64))
                for name, fit in (("kmt", ours[3]), ("scikit-learn float32", theirs[3])):
                    print(f"  scikit-learn on the points as float64: n_iter_ {exact.n_iter_}, "
                          f"inertia {exact.inertia_:.6g}; {name}'s labels equal to its: "
                          f"{100 * float((fit.labels_ == exact.labels_).mean()):.3f}%")

        if args.batches:
            blocks = [points[i * args.batch_n:(i + 1) * args.batch_n] for i in range(args.batches)]
            rng = np.random.default_rng(args.seed + 2)
            inits = [b[rng.choice(len(b), size=args.batch_k, replace=False)] for b in blocks]
            options = dict(n_init=1, max_iter=args.batch_iterations)

            def sklearn_batches():
                return [sklearn.cluster.KMeans(args.batch_k, init=init, **options).fit(b)
                        for b, init in zip(blocks, inits)]

            def kmt_batches():
                return kmt.fit_each(kmt.KMeans(args.batch_k, server=server, **options), blocks,
                                    inits=inits)
            if args.streams:
                compare_streams("kmt.fit_each", kmt_batches, args.repeats)
            ours, theirs = timed((kmt_batches, sklearn_batches), args.repeats)
            ratio = report(f"{args.batches} batches of {args.batch_n} x {args.d}, k = {args.batch_k}, "
                           f"max_iter = {args.batch_iterations}", ours, theirs,
                           (sum(f.n_iter_ for f in ours[3]), sum(f.n_iter_ for f in theirs[3])),
                           (sum(f.inertia_ for f in ours[3]), sum(f.inertia_ for f in theirs[3])))
            recorded.append(dict(workload="batches", dtype="float32", batches=args.batches,
                                 n=args.batch_n, d=args.d, k=args.batch_k,
                                 max_iter=args.batch_iterations, repeats=args.repeats,
                                 kmt_s=ours[0], sklearn_s=theirs[0], ratio=ratio))

        if args.results and recorded:
            record_rows(args.results, recorded, python_kmeans_workload, args.another_round)
    finally:
        if proc:
            proc.terminate()
            proc.wait()


if __name__ == "__main__":
    main()
