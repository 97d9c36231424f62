#!/usr/bin/env python3
"""Calls kmt-server from a Python pipeline through stubs generated from
proto/ alone. Needs Debian's python3-grpcio and python3-protobuf, and protoc
with the gRPC Python plugin (protobuf-compiler, protobuf-compiler-grpc).

    /usr/bin/python3 docs/examples/python_client.py --server=localhost:50051
"""
import argparse
import os
import random
import sys

import grpc

from kmt_stubs import generate_stubs


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default="localhost:50051")
    parser.add_argument("--proto_dir", default=os.path.join(here, "..", "..", "proto"))
    parser.add_argument("--out_dir", default="/tmp/kmt-python-stubs")
    args = parser.parse_args()

    generate_stubs(args.proto_dir, args.out_dir)
    import kmeans_transformer_pb2 as pb
    import kmeans_transformer_pb2_grpc as rpc

    # 1,000 points in d = 2 around four corners, row-major.
    rng = random.Random(7)
    corners = [(0, 0), (0, 5), (5, 0), (5, 5)]
    points = []
    for i in range(1000):
        cx, cy = corners[i % 4]
        points += [cx + rng.gauss(0, 0.5), cy + rng.gauss(0, 0.5)]

    def batches():
        yield pb.ClusterRequest(request_id="py-1", model="lloyd-onehot", n=1000, d=2,
                                points=points, k=4, iterations=10,
                                init=pb.INIT_KMEANS_PLUS_PLUS, seed=1)
        # A variant with its parameter: randomized k-medoids, centers drawn among
        # the data points with inverse temperature gamma, keyed by the seed.
        yield pb.ClusterRequest(request_id="py-2", model="kmedoids", n=1000, d=2,
                                points=points, k=4, iterations=10,
                                init=pb.INIT_KMEANS_PLUS_PLUS, seed=1, gamma=2.0)

    stub = rpc.KMeansTransformerStub(grpc.insecure_channel(args.server))
    for response in stub.Cluster(batches(), timeout=30):
        if response.HasField("error"):
            print(f"{response.request_id}: error {response.error.code}: "
                  f"{response.error.message}", file=sys.stderr)
            return 1
        centers = [tuple(response.centers[j:j + 2]) for j in range(0, len(response.centers), 2)]
        print(f"{response.request_id}: {len(response.labels)} labels, {len(centers)} centers, "
              f"objective {response.objective:.3f}")
        for c in sorted(centers):
            print(f"  center ({c[0]:.3f}, {c[1]:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
