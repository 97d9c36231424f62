"""kmt: the Python client of kmt-server (kmt.v1.KMeansTransformer), and
scikit-learn estimators served by it (kmt.KMeans, kmt.MiniBatchKMeans and
the variants).

Needs Debian's python3-grpcio, python3-protobuf and python3-numpy, and, to
generate the stubs when used in place from a checkout, protobuf-compiler and
protobuf-compiler-grpc (an installed package carries its stubs). The
estimators need python3-sklearn, imported only when one is first used, and
kmt.dask (kmt.dask.KMeans on a Dask cluster) python3-dask and
python3-distributed.

Resident jobs (kmt.fit_resident, kmt.KMeans beyond one request, kmt.dask)
run the compiled driver kmt._driver, which scripts/install-python-client.sh
builds with the project and installs beside the package; where it is, the
estimators' requests and the Client's streams go through its C++ client
too (without it, through gRPC's Python API). Used in place from
a checkout, the package finds it in the directory KMT_EXTENSION_DIR names
(the build tree's python/kmt).

A client or estimator without a server reaches the one the KMT_SERVER
environment variable names (host:port), else localhost:50051."""
import importlib
import os

if os.environ.get("KMT_EXTENSION_DIR"):
    __path__.append(os.environ["KMT_EXTENSION_DIR"])  # noqa: F821 (the package's own)

from .client import (Client, ClusterError, FitResult, Result, ServiceError, ServiceUnavailable,
                     batches, channel, pb)
from .resident import ResidentResult, fit_resident, replica_addresses

# The project's version, as the top CMakeLists.txt's project() gives it
# (pyproject.toml reads it from here; a test checks the two agree).
__version__ = "0.1.0"

# The estimators (and fit_each) by the module that defines them, imported on
# first use so that the client alone needs no scikit-learn.
_ESTIMATORS = {
    "KMeans": "kmeans",
    "fit_each": "kmeans",
    "MiniBatchKMeans": "minibatch",
    "SoftKMeans": "variants",
    "SphericalKMeans": "variants",
    "TrimmedKMeans": "variants",
    "RobustKMeans": "variants",
    "KMedoids": "variants",
    "ServedModel": "fitted",
    "ModelPublisher": "publish",
}

__all__ = ["Client", "ClusterError", "FitResult", "ResidentResult", "Result", "ServiceError",
           "ServiceUnavailable", "__version__", "batches", "channel", "fit_resident", "pb",
           "replica_addresses", *_ESTIMATORS]


def __getattr__(name):
    if name == "dask":  # kmt.dask: the estimators on a Dask cluster, which need Dask
        return importlib.import_module(".dask", __name__)
    if name in _ESTIMATORS:
        return getattr(importlib.import_module(f".{_ESTIMATORS[name]}", __name__), name)
    raise AttributeError(f"module 'kmt' has no attribute '{name}'")
