#!/usr/bin/env python3
"""The Python client's cost of the wire format for one 4,096 x 32 float32
batch: building and serializing the request from a numpy array, and parsing
a response (labels and centers, k = 16) back into numpy arrays, with
repeated fields against raw float32 / int32 bytes. Each figure is the median
of --repeats timings. With --server, also the round trip of one batch
(iterations = 0) through that server both ways.

    /usr/bin/python3 bench/python_payload_bench.py [--server=localhost:50051]
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import kmt  # noqa: E402


def median_ms(run, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--d", type=int, default=32)
    parser.add_argument("--k", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--server", default="", help="also time round trips through it")
    args = parser.parse_args()
    n, d, k = args.n, args.d, args.k
    rng = np.random.default_rng(1)
    points = rng.normal(size=(n, d)).astype(np.float32)
    labels = rng.integers(0, k, size=n).astype(np.int32)
    centers = rng.normal(size=(k, d)).astype(np.float32)

    print(f"one {n} x {d} batch, k = {k}; median of {args.repeats}, in ms")
    print(f"{'encoding':<10} {'build':>8} {'build+ser':>10} {'parse':>8} {'round trip':>11}")
    for raw in (False, True):
        client = kmt.Client(args.server or "localhost:0", raw=raw)
        build = median_ms(lambda: client.request(points, k), args.repeats)
        serialize = median_ms(lambda: client.request(points, k).SerializeToString(),
                              args.repeats)
        response = kmt.pb.ClusterResponse(objective=1.0)
        if raw:
            response.labels_i32 = labels.tobytes()
            response.centers_f32 = centers.tobytes()
        else:
            response.labels.extend(labels)
            response.centers.extend(centers.ravel())
        wire = response.SerializeToString()
        parse = median_ms(lambda: client.result(kmt.pb.ClusterResponse.FromString(wire), d, k),
                          args.repeats)
        got = client.result(kmt.pb.ClusterResponse.FromString(wire), d, k)
        assert np.array_equal(got.labels, labels) and np.array_equal(got.centers, centers)
        trip = ""
        if args.server:
            def one_batch():
                client.cluster(points, k, iterations=0, init="random")
            trip = f"{median_ms(one_batch, args.repeats):>11.3f}"
        print(f"{'raw' if raw else 'repeated':<10} {build:>8.3f} {serialize:>10.3f} {parse:>8.3f} "
              f"{trip}")
        client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
