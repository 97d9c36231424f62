#!/usr/bin/env python3
"""kmt.KMeans against FAISS's Kmeans and scikit-learn's KMeans on
embedding-like float32 data, the same points and initial centers, a fixed
number of Lloyd's iterations.

Shapes (--shapes, each n x d : k : iterations; --scale multiplies every n):

  200,000 x 768, k = 256, 10      1,000,000 x 128, k = 1,024, 5
  100,000 x 1,536, k = 100, 10    200,000 x 384, k = 4,096, 3
  1,000,000 x 768, k = 1,024, 3 (3 iterations keep the run to minutes)

Data: n unit vectors around k topic directions drawn uniformly on the
sphere, each point its topic's direction plus Gaussian noise of expected
norm --noise (1: a point's cosine to its topic is about 0.71, to another
point of its topic about 0.5), normalised; the topics' shares uneven
(log-normal weights), as a corpus's are. Seeded by --seed, the initial
centers k distinct points drawn from --seed + 1.

The sides, each timed from the numpy array in this process:
  kmt:          kmt.KMeans(k, init=the centers, n_init=1, tol=0,
                max_iter=iterations).fit(X) on a kmt-server started on a
                free loopback port (--server_binary), its labels included;
  FAISS:        faiss.Kmeans(d, k, niter=iterations) .train(X,
                init_centroids=the centers) with every point used
                (max_points_per_centroid = n, min_points_per_centroid = 1);
                its labels (one more assignment) are not in its time, and
                are printed beside it;
  scikit-learn: KMeans(k, algorithm="lloyd", init=the centers, n_init=1,
                tol=0, max_iter=iterations).fit(X), its labels included.
Each is run --repeats times in turns (kmt, FAISS, scikit-learn, then the
reverse order); the median is reported with the range beside it. kmt and
scikit-learn stop earlier if the labels stop changing (n_iter_ is printed);
FAISS runs every iteration.

Objectives: each side's sum of squared distances from the points to its
final centers under its labels, computed here in float64 the same way for
all three (each library's own figure sums in its own precision). kmt's must
equal scikit-learn's within 1e-6 relative: a shape beyond it is flagged,
and the script exits 1 after the table.

The server's peak resident memory (VmHWM) is reset before each shape's runs
and read after them.

    cmake --build build -j2 --target kmt-server kmt_python_driver
    export KMT_EXTENSION_DIR=build/python/kmt
    /usr/bin/python3 bench/embeddings_bench.py
    /usr/bin/python3 bench/embeddings_bench.py --scale=0.1 --repeats=1
    /usr/bin/python3 bench/embeddings_bench.py --shapes=200000x768:256:10
"""
import argparse
import os
import sys

import numpy as np
from pybench import print_thread_pools, started_server, timed

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import kmt  # noqa: E402

SHAPES = "200000x768:256:10,1000000x128:1024:5,100000x1536:100:10,200000x384:4096:3," \
         "1000000x768:1024:3"

# The largest relative difference between kmt's objective and scikit-learn's.
OBJECTIVE_TOLERANCE = 1e-6

# Rows generated, and objectives summed, per block: bounds the float64
# temporaries to a few hundred MiB at d = 1,536.
BLOCK_ROWS = 1 << 15


def parse_shapes(text):
    """"NxD:K:T,..." as [(n, d, k, iterations)]."""
    shapes = []
    for spec in text.split(","):
        try:
            size, k, iterations = spec.split(":")
            n, d = size.split("x")
            shapes.append((int(n), int(d), int(k), int(iterations)))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"shape '{spec}' is not n x d : k : iterations, like 200000x768:256:10")
    return shapes


def embeddings(n, d, topics, noise, seed):
    """The benchmark's data (the module's docstring), float32, (n, d)."""
    rng = np.random.default_rng(seed)
    directions = rng.standard_normal((topics, d), dtype=np.float32)
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    shares = rng.lognormal(0.0, 1.0, topics)
    shares /= shares.sum()
    X = np.empty((n, d), dtype=np.float32)
    for first in range(0, n, BLOCK_ROWS):
        block = X[first:first + BLOCK_ROWS]
        block[:] = rng.standard_normal(block.shape, dtype=np.float32)
        block *= np.float32(noise / np.sqrt(d))
        block += directions[rng.choice(topics, size=len(block), p=shares)]
        block /= np.linalg.norm(block, axis=1, keepdims=True)
    return X


def objective(X, centers, labels):
    """The sum over the points of the squared distance to their label's
    center, in float64."""
    centers = centers.astype(np.float64)
    total = 0.0
    for first in range(0, len(X), BLOCK_ROWS):
        diff = X[first:first + BLOCK_ROWS].astype(np.float64)
        diff -= centers[labels[first:first + BLOCK_ROWS]]
        total += float(np.einsum("ij,ij->", diff, diff))
    return total


def reset_peak_memory(pid):
    """Sets the process's VmHWM to its current resident size (proc(5),
    clear_refs)."""
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")


def peak_memory_gib(pid):
    """The process's VmHWM in GiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / (1 << 20)
    raise SystemExit(f"/proc/{pid}/status has no VmHWM")


def seconds(figures):
    median, low, high = figures[:3]
    return f"{median:.3f} s ({low:.3f}-{high:.3f})"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", type=parse_shapes, default=parse_shapes(SHAPES),
                        help="n x d : k : iterations, comma-separated")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="multiplies every n (at least k points remain)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each side per shape")
    parser.add_argument("--noise", type=float, default=1.0,
                        help="the expected norm of a point's noise before normalising")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--batch_size", type=int, default=None,
                        help="kmt.KMeans's batch_size: a smaller X than a message holds runs "
                             "as a resident job, as the full shapes do")
    parser.add_argument("--server_binary", default="build/server/kmt-server")
    parser.add_argument("--server_flag", action="append", default=[],
                        help="a kmt-server flag, like --server_flag=--max_k=16384 (repeatable)")
    args = parser.parse_args()

    import faiss
    import sklearn
    import sklearn.cluster

    proc, server = started_server(args.server_binary, *args.server_flag)
    rows, off = [], []
    try:
        print(f"kmt-server {server}; FAISS {faiss.__version__}, scikit-learn "
              f"{sklearn.__version__}; {os.cpu_count()} CPUs, load average "
              f"{os.getloadavg()[0]:.1f} at the start")
        print_thread_pools()
        for n, d, k, iterations in args.shapes:
            n = max(k, round(n * args.scale))
            X = embeddings(n, d, k, args.noise, args.seed)
            init = X[np.random.default_rng(args.seed + 1).choice(n, size=k, replace=False)]
            name = f"{n:,} x {d:,}, k = {k:,}, {iterations}"
            print(f"\n{name} ({X.nbytes >> 20:,} MiB)", flush=True)

            def kmt_fit():
                return kmt.KMeans(k, init=init, n_init=1, tol=0, max_iter=iterations,
                                  server=server, batch_size=args.batch_size).fit(X)

            def faiss_fit():
                fit = faiss.Kmeans(d, k, niter=iterations, max_points_per_centroid=n,
                                   min_points_per_centroid=1, seed=args.seed)
                fit.train(X, init_centroids=init)
                return fit

            def sklearn_fit():
                return sklearn.cluster.KMeans(k, algorithm="lloyd", init=init, n_init=1, tol=0,
                                              max_iter=iterations).fit(X)
            reset_peak_memory(proc.pid)
            ours, theirs, sk = timed((kmt_fit, faiss_fit, sklearn_fit), args.repeats)
            peak = peak_memory_gib(proc.pid)

            faiss_labels = timed((lambda: theirs[3].assign(X)[1].ravel(),), 1)[0]
            objectives = (objective(X, ours[3].cluster_centers_, ours[3].labels_),
                          objective(X, theirs[3].centroids, faiss_labels[3]),
                          objective(X, sk[3].cluster_centers_, sk[3].labels_))
            difference = abs(objectives[0] - objectives[2]) / objectives[2]
            best = min(theirs[0], sk[0])
            flag = "" if difference <= OBJECTIVE_TOLERANCE else \
                f"  OVER {OBJECTIVE_TOLERANCE:g}"
            print(f"  kmt {seconds(ours)}, n_iter_ {ours[3].n_iter_}; server peak RSS "
                  f"{peak:.2f} GiB\n"
                  f"  FAISS {seconds(theirs)}, its labels {faiss_labels[0]:.3f} s more\n"
                  f"  scikit-learn {seconds(sk)}, n_iter_ {sk[3].n_iter_}\n"
                  f"  kmt / best peer {ours[0] / best:.2f}\n"
                  f"  objective kmt {objectives[0]:.9g}, FAISS {objectives[1]:.9g}, "
                  f"scikit-learn {objectives[2]:.9g}; kmt's relative difference to "
                  f"scikit-learn's {difference:.1e}{flag}", flush=True)
            rows.append(f"| {name} | {ours[0]:.3g} s | {theirs[0]:.3g} s | {sk[0]:.3g} s | "
                        f"{ours[0] / best:.2f} | {difference:.1e} | {peak:.2f} GiB |")
            if flag:
                off.append(name)
            del X, ours, theirs, sk
    finally:
        proc.terminate()
        proc.wait()
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end\n")
    print("| n × d, k, iterations | kmt | FAISS | scikit-learn | kmt / best peer | "
          "objective vs scikit-learn | server peak RSS |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    if off:
        raise SystemExit(f"kmt's objective differs from scikit-learn's by more than "
                         f"{OBJECTIVE_TOLERANCE:g} relative on: {'; '.join(off)}")


if __name__ == "__main__":
    main()
