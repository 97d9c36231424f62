#!/usr/bin/env python3
"""kmt.KMeans against FAISS's Kmeans and scikit-learn's KMeans on
embedding-like float32 data, the same points and initial centers, a fixed
number of Lloyd's iterations.

Shapes (--shapes, each n x d : k : iterations; --scale multiplies every n):

  200,000 x 768, k = 256, 10      1,000,000 x 128, k = 1,024, 5
  100,000 x 1,536, k = 100, 10    200,000 x 384, k = 4,096, 3
  1,000,000 x 768, k = 1,024, 3 (3 iterations keep the run to minutes)

Data: embeddings have a low intrinsic dimension, so their clusters overlap
and Lloyd's keeps moving points for tens of iterations. The generator draws
a Gaussian mixture in a --latent-dimensional space (k topics, their means
N(0, --separation^2 I), unit variance, the topics' shares uneven as a
corpus's are: log-normal weights), maps it to d dimensions by a random
Gaussian matrix, adds isotropic noise whose norm is --noise times a topic's
spread, and normalises every point. Seeded by --seed; the initial centers are k
distinct points drawn from --seed + 1.

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
and the script exits 1 after the table. Both sides compute in float32, and
where a point is near a tie the two may label it differently and their
trajectories part; --float64_reference also fits scikit-learn on the points
as float64 (untimed), the trajectory of exact arithmetic on the same
values, and prints both sides' differences to it.

The server's peak resident memory (VmHWM) is reset before each shape's runs
and read after them.

    cmake --build build -j2 --target kmt-server kmt_python_driver
    export KMT_EXTENSION_DIR=build/python/kmt
    /usr/bin/python3 bench/embeddings_bench.py
    /usr/bin/python3 bench/embeddings_bench.py --scale=0.1 --repeats=1
    /usr/bin/python3 bench/embeddings_bench.py --shapes=200000x768:256:10

--results=FILE writes the run's rows, machine, date and command as JSON;
bench/results/embeddings.json is the run docs/core.md shows, and
bench/render_tables.py renders its table there from it.
"""
import argparse
import os
import sys

import faiss
import numpy as np
import sklearn
import sklearn.cluster
from pybench import print_thread_pools, started_server, timed
from render_tables import embeddings_table, write_result

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


def embeddings(n, d, k, latent, separation, noise, seed):
    """The benchmark's data (the module's docstring), float32, (n, d)."""
    rng = np.random.default_rng(seed)
    means = rng.standard_normal((k, latent), dtype=np.float32) * np.float32(separation)
    shares = rng.lognormal(0.0, 1.0, k)
    shares /= shares.sum()
    # The lift keeps a latent vector's norm on average (its rows have norm
    # about 1): noise of variance noise^2 * latent / d per coordinate has
    # noise times the norm of a topic's spread.
    lift = rng.standard_normal((latent, d), dtype=np.float32) / np.float32(np.sqrt(d))
    X = np.empty((n, d), dtype=np.float32)
    for first in range(0, n, BLOCK_ROWS):
        block = X[first:first + BLOCK_ROWS]
        z = means[rng.choice(k, size=len(block), p=shares)]
        z += rng.standard_normal(z.shape, dtype=np.float32)
        np.matmul(z, lift, out=block)
        block += rng.standard_normal(block.shape, dtype=np.float32) * np.float32(
            noise * np.sqrt(latent / d))
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


def run_shape(args, proc, server, n, d, k, iterations):
    """Times the three sides on one shape and prints what they did: the
    shape's name, its results (a row of the table), and whether kmt's
    objective is within OBJECTIVE_TOLERANCE of scikit-learn's."""
    X = embeddings(n, d, k, args.latent, args.separation, args.noise, args.seed)
    init = X[np.random.default_rng(args.seed + 1).choice(n, size=k, replace=False)]
    name = f"{n:,} x {d:,}, k = {k:,}, {iterations}"
    print(f"\n{name} ({X.nbytes >> 20:,} MiB)", flush=True)

    def kmt_fit():
        return kmt.KMeans(k, init=init, n_init=1, tol=0, max_iter=iterations, server=server,
                          batch_size=args.batch_size).fit(X)

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
    within = difference <= OBJECTIVE_TOLERANCE
    best = min(theirs[0], sk[0])
    print(f"  kmt {seconds(ours)}, n_iter_ {ours[3].n_iter_}; server peak RSS {peak:.2f} GiB\n"
          f"  FAISS {seconds(theirs)}, its labels {faiss_labels[0]:.3f} s more; "
          f"{sum(s['nsplit'] for s in theirs[3].iteration_stats)} empty clusters split\n"
          f"  scikit-learn {seconds(sk)}, n_iter_ {sk[3].n_iter_}\n"
          f"  kmt / best peer {ours[0] / best:.2f}\n"
          f"  objective kmt {objectives[0]:.9g}, FAISS {objectives[1]:.9g}, "
          f"scikit-learn {objectives[2]:.9g}; kmt's relative difference to scikit-learn's "
          f"{difference:.1e}{'' if within else f'  OVER {OBJECTIVE_TOLERANCE:g}'}", flush=True)
    if args.float64_reference:
        exact = sklearn.cluster.KMeans(k, algorithm="lloyd", init=init.astype(np.float64),
                                       n_init=1, tol=0, max_iter=iterations).fit(
                                           X.astype(np.float64))
        reference = objective(X, exact.cluster_centers_, exact.labels_)
        for side, fit, value in (("kmt", ours[3], objectives[0]),
                                 ("scikit-learn", sk[3], objectives[2])):
            print(f"  {side}: objective's relative difference to scikit-learn's on float64 "
                  f"{abs(value - reference) / reference:.1e}, labels equal to its "
                  f"{100 * float((fit.labels_ == exact.labels_).mean()):.3f}%")
    row = {"n": n, "d": d, "k": k, "iterations": iterations, "kmt_s": float(ours[0]),
           "faiss_s": float(theirs[0]), "sklearn_s": float(sk[0]),
           "objective_vs_sklearn": float(difference), "server_peak_rss_gib": float(peak),
           "kmt_n_iter": int(ours[3].n_iter_), "sklearn_n_iter": int(sk[3].n_iter_)}
    return name, row, within


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", type=parse_shapes, default=parse_shapes(SHAPES),
                        help="n x d : k : iterations, comma-separated")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="multiplies every n (at least k points remain)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each side per shape")
    parser.add_argument("--latent", type=int, default=64,
                        help="the dimension of the space the clusters are drawn in")
    parser.add_argument("--separation", type=float, default=2.0,
                        help="the spread of the topics' means, in the topics' own deviations")
    parser.add_argument("--noise", type=float, default=0.5,
                        help="the isotropic noise's norm over a topic's spread")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--batch_size", type=int, default=None,
                        help="kmt.KMeans's batch_size: a smaller X than a message holds runs "
                             "as a resident job, as the full shapes do")
    parser.add_argument("--float64_reference", action="store_true",
                        help="also fit scikit-learn on the points as float64 (untimed; it "
                             "holds four times X's bytes more)")
    parser.add_argument("--server_binary", default="build/server/kmt-server")
    parser.add_argument("--server_flag", action="append", default=[],
                        help="a kmt-server flag, like --server_flag=--max_k=16384 (repeatable)")
    parser.add_argument("--results", default="",
                        help="write the run's results as JSON to this file; "
                             "bench/results/embeddings.json is the run docs/core.md shows, "
                             "rendered there by bench/render_tables.py")
    args = parser.parse_args()

    proc, server = started_server(args.server_binary, *args.server_flag)
    rows, off = [], []
    try:
        load_at_start = os.getloadavg()[0]
        print(f"kmt-server {server}; FAISS {faiss.__version__}, scikit-learn "
              f"{sklearn.__version__}; {os.cpu_count()} CPUs, load average "
              f"{load_at_start:.1f} at the start")
        print_thread_pools()
        for n, d, k, iterations in args.shapes:
            name, row, within = run_shape(args, proc, server, max(k, round(n * args.scale)), d,
                                          k, iterations)
            rows.append(row)
            if not within:
                off.append(name)
    finally:
        proc.terminate()
        proc.wait()
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end\n")
    print("\n".join(embeddings_table(rows)))
    if args.results:
        write_result(args.results, rows, load_average_at_start=load_at_start,
                     load_average_at_end=os.getloadavg()[0], faiss=faiss.__version__,
                     scikit_learn=sklearn.__version__, repeats=args.repeats)
    if off:
        raise SystemExit(f"kmt's objective differs from scikit-learn's by more than "
                         f"{OBJECTIVE_TOLERANCE:g} relative on: {'; '.join(off)}")


if __name__ == "__main__":
    main()
