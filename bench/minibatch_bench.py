#!/usr/bin/env python3
"""kmt.MiniBatchKMeans against scikit-learn's MiniBatchKMeans on the same
data, from the same initial centers and random_state, each timed end to
end from a numpy array to fitted attributes (labels_ and inertia_
included): batch_size 4,096, max_iter 3 (so n_steps_ = 3 n // 4,096 on
both sides), tol=0, max_no_improvement=None, n_init=1, float32 points, at
each --shapes entry (n x d, k). kmt loads the points once as a resident
shard on the server and runs the steps in its compiled driver (or, where
a step costs less than a round trip, on the shard itself); since it draws
scikit-learn's batches from the same numpy stream, the two fits take the
same steps, and the script fails if the steps' count differs or the
inertias differ by more than 1%.

Each figure is the median of --repeats runs, the two sides run in
alternation. The server is --server, or one started from --server_binary
on a free loopback port with its default workers. --results=FILE writes
the rows, machine, date and command as JSON; bench/results/minibatch.json
is the run docs/python.md shows (bench/render_tables.py renders it).

    /usr/bin/python3 bench/minibatch_bench.py --results=bench/results/minibatch.json
"""
import argparse
import os
import sys

import numpy as np
from pybench import agreement, print_thread_pools, server_for, timed
from render_tables import minibatch_table, write_result

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import kmt  # noqa: E402


def dataset(n, d, k, seed):
    """n float32 points around k centers in [-1, 1]^d, touching clusters."""
    rng = np.random.default_rng(seed)
    centers = rng.uniform(-1, 1, size=(k, d)).astype(np.float32)
    points = centers[rng.integers(0, k, size=n)]
    points += rng.normal(0, 0.35, size=(n, d)).astype(np.float32)
    return points


def shape(text):
    """'100000x32:16' as (n, d, k)."""
    size, k = text.split(":")
    n, d = size.split("x")
    return int(n), int(d), int(k)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default="", help="the server or replicas to fit on")
    parser.add_argument("--server_binary", default="build/server/kmt-server",
                        help="started on a free port when --server is empty")
    parser.add_argument("--shapes", nargs="+", type=shape,
                        default=[(100_000, 32, 16), (200_000, 768, 256)],
                        help="n x d : k of each fit, e.g. 100000x32:16")
    parser.add_argument("--batch_size", type=int, default=4096)
    parser.add_argument("--max_iter", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--results", default="", help="write the run's results as JSON here")
    parser.add_argument("--sklearn_threads", type=int, default=0,
                        help="scikit-learn's OpenMP and BLAS threads (threadpoolctl); 0: as it is")
    args = parser.parse_args()

    import sklearn.cluster

    with server_for(args.server, args.server_binary) as server:
        print_thread_pools(args.sklearn_threads)
        rows = []
        load_at_start = os.getloadavg()[0]
        for n, d, k in args.shapes:
            X = dataset(n, d, k, args.seed)
            init = X[np.random.default_rng(args.seed + 1).choice(n, size=k, replace=False)]
            options = dict(batch_size=args.batch_size, max_iter=args.max_iter, n_init=1,
                           init=init, random_state=args.seed, tol=0.0,
                           max_no_improvement=None)
            ours, theirs = timed((
                lambda: kmt.MiniBatchKMeans(k, server=server, **options).fit(X),
                lambda: sklearn.cluster.MiniBatchKMeans(k, **options).fit(X)), args.repeats)
            a, b = ours[3], theirs[3]
            if a.n_steps_ != b.n_steps_:
                raise SystemExit(f"kmt took {a.n_steps_} steps, scikit-learn {b.n_steps_}")
            if abs(a.inertia_ - b.inertia_) > 0.01 * b.inertia_:
                raise SystemExit(f"kmt's inertia {a.inertia_} is more than 1% from "
                                 f"scikit-learn's {b.inertia_}")
            rows.append(dict(n=n, d=d, k=k, steps=int(a.n_steps_), repeats=args.repeats,
                             **agreement(ours, theirs)))
            print(minibatch_table(rows)[-1], flush=True)
        print("\n".join(minibatch_table(rows)))
        if args.results:
            write_result(args.results, rows, load_average_at_start=load_at_start)


if __name__ == "__main__":
    main()
