#!/usr/bin/env python3
"""Predict by model name against predict with the centers in the request,
at k = 1,024 and d = 768 by default: bytes sent and received per call and
time per call.

A kmt-server is started on a free loopback port (--server_binary) watching a
model directory of its own. kmt.KMeans fits --train_n points (2 Lloyd's
iterations from k of them: the centers' values do not change what a predict
costs) and saves the fit there as version 1 of model "bench". Then, for each
--sizes batch of float32 points, in turns in this one process (--repeats
rounds, each timing both ways, the order alternating):

  centers: the estimator's predict, which sends its k x d centers (and their
           mean as points_offset) with every request, and gets them back;
  by name: kmt.ServedModel("bench").predict, which sends the points and the
           name (after one ListModels per call, which resolves the version).

Both return the same labels (checked). Bytes are the serialized request and
response messages of one batch; time is the median of the call's wall
clock, with the range beside it.

    /usr/bin/python3 bench/fitted_predict_bench.py [--sizes=256,4096] [--repeats=15]
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, HERE)
import kmt  # noqa: E402
from pybench import started_server  # noqa: E402


def message_bytes(client, request):
    """(request bytes, response bytes) of one batch."""
    sent = len(request.serialize())
    received = next(client.stream([request])).ByteSize()
    return sent, received


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=1024)
    parser.add_argument("--d", type=int, default=768)
    parser.add_argument("--train_n", type=int, default=8192)
    parser.add_argument("--sizes", default="256,4096", help="points per predict call")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--server_binary", default="build/server/kmt-server")
    args = parser.parse_args()
    k, d = args.k, args.d
    models = tempfile.mkdtemp(prefix="kmt-fitted-bench-")
    proc, server = started_server(args.server_binary, f"--model_dir={models}",
                                  "--model_poll_s=0.05", f"--max_k={max(k, 16384)}")
    try:
        rng = np.random.default_rng(1)
        means = rng.normal(size=(k, d)).astype(np.float32) * 4
        X = (means[rng.integers(0, k, args.train_n)]
             + rng.normal(size=(args.train_n, d)).astype(np.float32))
        estimator = kmt.KMeans(k, init=X[:k], n_init=1, max_iter=2, server=server).fit(X)
        estimator.save_model(os.path.join(models, "bench", "1", "model.kmt"), X=X)
        served = kmt.ServedModel("bench", server=server)
        deadline = time.monotonic() + 60
        while not any(m.name == "bench" for m in kmt.Client(server).models()):
            if time.monotonic() > deadline:
                raise SystemExit("the model did not load")
            time.sleep(0.05)
        client = kmt.Client(server)
        print(f"kmt-server {server}; k = {k}, d = {d}, float32; {os.cpu_count()} CPUs; "
              f"median of {args.repeats} calls each, in turns")
        print(f"{'points':>7} {'way':<8} {'sent':>12} {'received':>12} {'ms/call':>9} "
              f"{'range':>17}")
        for n in (int(s) for s in args.sizes.split(",")):
            Y = (means[rng.integers(0, k, n)] + rng.normal(size=(n, d))).astype(np.float32)
            want = estimator.predict(Y)
            np.testing.assert_array_equal(served.predict(Y), want)
            centers = estimator.cluster_centers_
            offset = centers.mean(axis=0)
            block = Y if n >= k else np.concatenate([Y, centers])
            ways = {
                "centers": (lambda: estimator.predict(Y),
                            client.wire_request(block, k, iterations=0,
                                                centers=centers - offset,
                                                points_offset=offset)),
                "by name": (lambda: served.predict(Y),
                            client.wire_request(Y, 0, model="bench", iterations=0)),
            }
            times = {way: [] for way in ways}
            for r in range(args.repeats):
                for way in (ways if r % 2 == 0 else reversed(list(ways))):
                    start = time.perf_counter()
                    labels = ways[way][0]()
                    times[way].append(time.perf_counter() - start)
                    assert np.array_equal(labels, want), way
            for way, (_, request) in ways.items():
                sent, received = message_bytes(client, request)
                t = [1e3 * s for s in times[way]]
                print(f"{n:>7} {way:<8} {sent:>12,} {received:>12,} "
                      f"{statistics.median(t):>9.2f} {min(t):>8.2f}-{max(t):<8.2f}")
            ratio = statistics.median(times["centers"]) / statistics.median(times["by name"])
            print(f"{n:>7} by name is {ratio:.2f}x as fast")
    finally:
        proc.terminate()
        proc.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
