#!/usr/bin/env python3
"""Exact Lloyd's on a dataset kept resident on kmt-server replicas (the Job
RPC), driven from Python through stubs generated from proto/ alone. Needs
Debian's python3-grpcio and python3-protobuf, and protoc with the gRPC Python
plugin (protobuf-compiler, protobuf-compiler-grpc).

    /usr/bin/python3 docs/examples/python_resident_job.py \\
        --servers=localhost:50051,localhost:50052 --points=points.f32 --d=8 --k=6
"""
import argparse
import array
import os
import sys

import grpc

from kmt_stubs import generate_stubs


class Shard:
    """One Job stream: requests go in through a queue, answers come back in
    order, one per request."""

    def __init__(self, stub, points, n, d, chunk_points=65536):
        import queue
        self.requests = queue.Queue()
        self.answers = stub.Job(iter(self.requests.get, None))
        for first in range(0, n, chunk_points):
            values = points[first * d:min(n, first + chunk_points) * d]
            self.send(pb.JobRequest(shard=pb.ShardChunk(n=n, d=d, points=values)))
        self.loaded = 0
        for _ in range(0, n, chunk_points):
            self.loaded = self.receive().points_loaded

    def send(self, request):
        self.requests.put(request)

    def receive(self):
        answer = next(self.answers)
        if answer.HasField("error"):
            raise RuntimeError(f"job step failed: {answer.error.code} {answer.error.message}")
        # A large shard's labels continue in the responses that follow.
        while answer.labels_to_follow > 0:
            more = next(self.answers)
            answer.labels.extend(more.labels)
            answer.labels_to_follow = more.labels_to_follow
        return answer

    def close(self):
        self.requests.put(None)  # ends the stream; the replica frees the shard


def main():
    global pb
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", default="localhost:50051", help="comma-separated replicas")
    parser.add_argument("--points", required=True, help="raw float32 file, n x d row-major")
    parser.add_argument("--d", type=int, required=True)
    parser.add_argument("--k", type=int, default=6)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--labels_out", default="")
    parser.add_argument("--proto_dir", default=os.path.join(here, "..", "..", "proto"))
    parser.add_argument("--out_dir", default="/tmp/kmt-python-stubs")
    args = parser.parse_args()

    generate_stubs(args.proto_dir, args.out_dir)
    import kmeans_transformer_pb2
    import kmeans_transformer_pb2_grpc as rpc
    pb = kmeans_transformer_pb2

    points = array.array("f")
    with open(args.points, "rb") as f:
        points.frombytes(f.read())
    d, k = args.d, args.k
    n = len(points) // d

    # One contiguous shard per replica, kept there while its stream is open.
    servers = args.servers.split(",")
    options = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]
    shards = []
    for s, address in enumerate(servers):
        first, last = n * s // len(servers), n * (s + 1) // len(servers)
        stub = rpc.KMeansTransformerStub(grpc.insecure_channel(address, options=options))
        shards.append(Shard(stub, points[first * d:last * d], last - first, d))

    # Given initial centers: the first k points. Each step sends only the
    # centers; the shards' counts and sums add up to one Lloyd's update.
    centers = list(points[:k * d])
    for t in range(args.iterations + 1):
        last = t == args.iterations
        step = pb.AssignStep(k=k, centers=centers, return_labels=last)
        for shard in shards:
            shard.send(pb.JobRequest(assign=step))
        answers = [shard.receive() for shard in shards]
        objective = sum(a.objective for a in answers)
        if last:
            break
        counts = [sum(a.center_counts[j] for a in answers) for j in range(k)]
        sums = [sum(a.center_sums[i] for a in answers) for i in range(k * d)]
        for j in range(k):
            if counts[j]:
                # float32, as the server's centers are
                centers[j * d:(j + 1) * d] = array.array(
                    "f", [v / counts[j] for v in sums[j * d:(j + 1) * d]])
    labels = [label for a in answers for label in a.labels]
    for shard in shards:
        shard.close()
    if args.labels_out:
        with open(args.labels_out, "w") as out:
            out.writelines(f"{label}\n" for label in labels)
    print(f"{len(labels)} labels on {len(shards)} replicas, {k} centers, "
          f"objective {objective:.6f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
