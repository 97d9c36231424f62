"""kmt: the Python client of kmt-server (kmt.v1.KMeansTransformer).

Needs Debian's python3-grpcio, python3-protobuf and python3-numpy, and, to
generate the stubs when used in place from a checkout, protobuf-compiler and
protobuf-compiler-grpc (an installed package carries its stubs)."""
from .client import (Client, ClusterError, FitResult, Result, ServiceError, batches, channel,
                     pb)
from .resident import ResidentResult, fit_resident, replica_addresses

__all__ = ["Client", "ClusterError", "FitResult", "ResidentResult", "Result", "ServiceError",
           "batches", "channel", "fit_resident", "pb", "replica_addresses"]
