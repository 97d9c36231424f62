#!/usr/bin/python3
"""kmt.dask.KMeans over a dask.distributed LocalCluster against the C++
resident job (`kmt cluster --mode=whole`) and scikit-learn's KMeans in
process, on the same float32 file (bench/whole_reference --generate: k
Gaussian blobs), the same k and T Lloyd's iterations (tol = 0), both kmt
sides with the same --init (k-means‖, kmt.dask.KMeans's default, or the
service's greedy k-means++ over all points), seeded alike, scikit-learn with
its own k-means++. Prints each side's split (load, init, iterations,
labels), its objective, and the totals' ratios to scikit-learn's (with
--no-sklearn, to the C++ resident job's).

    cmake --build build -j2 --target kmt-server kmt whole_reference
    /usr/bin/python3 bench/dask_bench.py                      # 10^7 x 32, k = 64, T = 20
    /usr/bin/python3 bench/dask_bench.py --init=k-means++     # greedy k-means++ on both
    /usr/bin/python3 bench/dask_bench.py --n=200000 --k=16    # a quick look

Both kmt sides use the same two local replicas (--replicas), one worker
each; the Dask cluster has --workers worker processes of one thread, the
file read by the workers in blocks of --block_rows rows."""
import argparse
import importlib
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=10_000_000)
    p.add_argument("--d", type=int, default=32)
    p.add_argument("--k", type=int, default=64)
    p.add_argument("--iterations", type=int, default=20)
    p.add_argument("--workers", type=int, default=2, help="Dask worker processes")
    p.add_argument("--replicas", type=int, default=2, help="local kmt-server replicas")
    p.add_argument("--block_rows", type=int, default=500_000, help="rows per dask block")
    p.add_argument("--build", default=os.path.join(SOURCE, "build"))
    p.add_argument("--seed", type=int, default=0, help="random_state of both estimators")
    p.add_argument("--init", choices=("k-means||", "k-means++"), default="k-means||",
                   help="both kmt sides' initialisation")
    p.add_argument("--no-sklearn", dest="sklearn", action="store_false",
                   help="leave scikit-learn out (its k-means++ takes most of the run)")
    return p.parse_args()


def read_block(path, n, d, first, end):
    """Rows [first, end) of the raw float32 file, read by a Dask worker."""
    import numpy as np
    return np.array(np.memmap(path, dtype=np.float32, mode="r", shape=(n, d))[first:end])


def main():
    args = parse()
    os.environ.update(KMT_SERVER_BINARY=os.path.join(args.build, "server/kmt-server"),
                      KMT_CLI=os.path.join(args.build, "client/kmt"), KMT_SOURCE_DIR=SOURCE)
    sys.path[:0] = [os.path.join(SOURCE, "tests/deploy"), os.path.join(SOURCE, "python")]
    import dask
    import dask.array as da
    import distributed
    import numpy as np
    import sklearn
    import sklearn.cluster
    from harness import Server

    import kmt.dask

    n, d, k, T = args.n, args.d, args.k, args.iterations
    work = tempfile.mkdtemp(prefix="kmt-dask-bench-")
    path = os.path.join(work, "points.f32")
    subprocess.run([os.path.join(args.build, "bench/whole_reference"), "--generate", f"--n={n}",
                    f"--d={d}", f"--k={k}", f"--points={path}",
                    f"--centers={os.path.join(work, 'init.csv')}"], check=True)
    print(f"data: {n} x {d} float32 ({os.path.getsize(path) >> 20} MiB), k = {k}, T = {T}; "
          f"load average {os.getloadavg()[0]:.1f} at the start", flush=True)
    replicas = [Server("--model_dir=", "--workers=1", f"--max_resident_bytes={8 << 30}")
                for _ in range(args.replicas)]
    target = "ipv4:" + ",".join(r.address for r in replicas)
    rows = {}
    try:
        # kmt.dask.KMeans: the workers read their blocks of the file.
        with distributed.LocalCluster(n_workers=args.workers, threads_per_worker=1,
                                      processes=True, dashboard_address=None) as cluster, \
                distributed.Client(cluster) as client:
            X = da.concatenate([
                da.from_delayed(dask.delayed(read_block)(path, n, d, first,
                                                         min(n, first + args.block_rows)),
                                shape=(min(n, first + args.block_rows) - first, d),
                                dtype=np.float32)
                for first in range(0, n, args.block_rows)])
            # The workers import kmt (and make its stubs) before the clock starts.
            client.run(importlib.import_module, "kmt.dask.worker")
            started = time.perf_counter()
            km = kmt.dask.KMeans(k, init=args.init, n_init=1, max_iter=T, tol=0.0,
                                 random_state=args.seed, server=target).fit(X)
            fitted = time.perf_counter()
            labels = km.labels_.compute()
            fetched = time.perf_counter()
            s = km.fit_seconds_
            rows["kmt.dask"] = dict(
                load=s["statistics"] + s["load"], init=s["init"], iterations=s["iterations"],
                labels=s["labels"], total=fitted - started, objective=km.inertia_,
                iters=km.n_iter_,
                note=f"statistics pass {s['statistics']:.2f} s + shards {s['load']:.2f} s; "
                     f"labels_.compute() to the client {fetched - fitted:.2f} s more")
            del labels
        # The C++ resident job over the same replicas, one shard each, its
        # initialisation seeded as kmt.dask.KMeans seeds the service's (its
        # shards are not the Dask blocks, so k-means‖ may choose others).
        seed = int(np.random.RandomState(args.seed).randint(np.iinfo(np.int32).max))
        started = time.perf_counter()
        out = subprocess.run(
            [os.environ["KMT_CLI"], "cluster", "--mode=whole", f"--server={target}",
             "--streams=1", f"--input={path}", f"--d={d}", f"--k={k}", f"--iterations={T}",
             "--tol=0",
             f"--init={args.init.replace('-', '')}", f"--seed={seed}",
             f"--labels_out={os.path.join(work, 'labels.npy')}",
             f"--centers_out={os.path.join(work, 'centers.npy')}"],
            check=True, capture_output=True, text=True).stdout
        total = time.perf_counter() - started
        summary = [line for line in out.splitlines() if line.startswith("resident:")][-1]
        split = dict(re.findall(r"(load|init|iterations|labels|write) ([0-9.]+)", summary))
        rows["kmt cluster --mode=whole"] = dict(
            load=float(split["load"]), init=float(split["init"]),
            iterations=float(split["iterations"]), labels=float(split["labels"]), total=total,
            objective=float(re.search(r"final objective ([0-9.e+]+)", out).group(1)), iters=T,
            note=f"labels written {float(split['write']):.2f} s")
    finally:
        for r in replicas:
            r.stop()
    reference = rows["kmt cluster --mode=whole"]["total"]
    if args.sklearn:
        # scikit-learn in process: its k-means++, then Lloyd's from those centers.
        started = time.perf_counter()
        points = np.fromfile(path, dtype=np.float32).reshape(n, d)
        loaded = time.perf_counter()
        centers, _ = sklearn.cluster.kmeans_plusplus(points, k, random_state=args.seed)
        seeded = time.perf_counter()
        sk = sklearn.cluster.KMeans(k, init=centers, n_init=1, max_iter=T, tol=0.0).fit(points)
        done = time.perf_counter()
        rows[f"scikit-learn {sklearn.__version__}"] = dict(
            load=loaded - started, init=seeded - loaded, iterations=done - seeded, labels=0.0,
            total=done - started, objective=float(sk.inertia_), iters=sk.n_iter_,
            note="labels in the iterations (its last E-step)")
        reference = rows[f"scikit-learn {sklearn.__version__}"]["total"]
    os.remove(path)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    print(f"| side | load | init | iterations (each) | labels | total | / "
          f"{'scikit-learn' if args.sklearn else 'kmt cluster'} | objective | notes |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, r in rows.items():
        print(f"| {name} | {r['load']:.2f} s | {r['init']:.2f} s | {r['iterations']:.2f} s "
              f"({r['iterations'] / max(r['iters'], 1):.3f}) | {r['labels']:.2f} s | "
              f"{r['total']:.2f} s | {r['total'] / reference:.2f} | {r['objective']:.6g} | "
              f"{r['note']} |")


if __name__ == "__main__":
    main()
