"""kmt: the Python client of kmt-server (kmt.v1.KMeansTransformer).

Needs Debian's python3-grpcio, python3-protobuf and python3-numpy, and, to
generate the stubs, protobuf-compiler and protobuf-compiler-grpc."""
from .client import Client, ClusterError, FitResult, Result, batches, pb

__all__ = ["Client", "ClusterError", "FitResult", "Result", "batches", "pb"]
