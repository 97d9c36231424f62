#!/usr/bin/env python3
"""Clusters points with kmt-server from Python through the kmt package
(python/kmt): one batch, a stream of batches, and Lloyd's over a whole
dataset, numpy arrays in and out. Runs from any directory with Debian's
python3-grpcio, python3-protobuf and python3-numpy, and protoc with the gRPC
Python plugin for the first run (protobuf-compiler, protobuf-compiler-grpc),
or with the package installed by scripts/install-python-client.sh.

    /usr/bin/python3 docs/examples/python_client.py --server=localhost:50051
"""
import argparse
import os
import sys

import numpy as np

try:
    import kmt
except ImportError:  # not installed: the copy in this checkout
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "python"))
    import kmt


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default="localhost:50051")
    args = parser.parse_args()

    # 1,000 points in d = 2 around four corners.
    rng = np.random.default_rng(7)
    corners = np.array([(0, 0), (0, 5), (5, 0), (5, 5)], dtype=np.float32)
    points = corners[np.arange(1000) % 4] + rng.normal(0, 0.5, size=(1000, 2)).astype(np.float32)

    with kmt.Client(args.server, timeout=60) as client:
        print("models:", ", ".join(m.name for m in client.models()))

        # One batch: labels (n,) and centers (k, d) come back as arrays.
        result = client.cluster(points, k=4, iterations=10, seed=1)
        print(f"py-1: {len(result.labels)} labels, {len(result.centers)} centers, "
              f"objective {result.objective:.3f}")
        for c in sorted(map(tuple, result.centers)):
            print(f"  center ({c[0]:.3f}, {c[1]:.3f})")

        # A variant with its parameter: randomized k-medoids, centers drawn
        # among the data points with inverse temperature gamma.
        medoids = client.cluster(points, k=4, iterations=10, model="kmedoids",
                                 parameters={"gamma": 2.0})
        print(f"py-2: kmedoids objective {medoids.objective:.3f}")

        # Batches of 250 points on one stream, each clustered on its own.
        for r in client.cluster_batches(kmt.batches(points, 250, min_size=4), k=4):
            print(f"{r.request_id}: objective {r.objective:.3f}")

        # Exact Lloyd's over all the points, 250 per message.
        whole = client.fit(points, k=4, iterations=20, batch_size=250)
        print(f"whole: {whole.passes} passes, objective {whole.objective:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
