"""kmt.dask: k-means on a dask.distributed cluster, computed by kmt-server.

    import dask.array as da, distributed, kmt.dask
    client = distributed.Client("scheduler:8786")
    X = da.from_zarr("points.zarr")                     # (n, d), chunked by rows
    km = kmt.dask.KMeans(64, n_init=1, server="dns:///kmeans-transformer-headless:50051").fit(X)
    km.cluster_centers_, km.labels_ (a dask array), km.predict(X)

Needs Debian's python3-dask and python3-distributed, on the client and on
every worker, with kmt itself; the client (the process that fits) needs
kmt's compiled driver (scripts/install-python-client.sh)."""
from .estimator import KMeans

__all__ = ["KMeans"]
