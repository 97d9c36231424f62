"""A Python client of kmt-server: numpy arrays in and out.

    client = kmt.Client("localhost:50051")
    result = client.cluster(points, k=10)           # one batch: labels, centers
    for r in client.cluster_batches(kmt.batches(points, 4096), k=10):
        ...                                          # every batch its own task
    whole = client.fit(points, k=10)                 # Lloyd's over all the points

`fit` runs exact Lloyd's over a dataset of any size: each pass sends every
batch with the current centers and no layer, and adds up the per-center point
counts and coordinate sums the server returns (docs/api.md, section 5).
"""
import dataclasses

import grpc
import numpy as np

from . import stubs

pb, rpc = stubs.load()

INITS = {
    "kmeans++": pb.INIT_KMEANS_PLUS_PLUS,
    "plain-kmeans++": pb.INIT_PLAIN_KMEANS_PLUS_PLUS,
    "random": pb.INIT_RANDOM,
    "given": pb.INIT_GIVEN,
}


class ClusterError(Exception):
    """A batch the server answered with an error."""

    def __init__(self, request_id, code, message):
        super().__init__(f"{request_id}: {code.name}: {message}")
        self.request_id = request_id
        self.code = code  # a grpc.StatusCode
        self.message = message


@dataclasses.dataclass
class Result:
    """One batch's answer."""
    request_id: str
    labels: np.ndarray            # (n,) int32: nearest final center
    centers: np.ndarray           # (k, d) float32
    objective: float              # sum of squared distances to the final centers
    layer_objectives: np.ndarray  # after each layer, if asked for
    iterations_run: int
    model: str


@dataclasses.dataclass
class FitResult:
    """Lloyd's over a whole dataset."""
    labels: np.ndarray   # (n,) int32
    centers: np.ndarray  # (k, d) float32
    objective: float     # of the final centers on every point
    passes: int          # update passes run (fewer than asked if the centers settled)


def batches(points, batch_size, min_size=1):
    """Consecutive row blocks of an (n, d) array (a numpy memmap works, and is
    read a block at a time), each of `batch_size` rows; a last block shorter
    than `min_size` (say k, as every batch needs n >= k) joins the one before."""
    n = len(points)
    starts = list(range(0, n, batch_size))
    if len(starts) > 1 and n - starts[-1] < min_size:
        starts.pop()
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else n
        yield points[start:end]


def _status(code):
    return next((c for c in grpc.StatusCode if c.value[0] == code), grpc.StatusCode.UNKNOWN)


class Client:
    """One channel to a server (or to several: "dns:///host:port" with
    round-robin over every address)."""

    def __init__(self, target="localhost:50051", max_message_bytes=64 << 20, timeout=None):
        self.timeout = timeout
        self.channel = grpc.insecure_channel(target, options=[
            ("grpc.max_receive_message_length", max_message_bytes),
            ("grpc.max_send_message_length", max_message_bytes),
            ("grpc.lb_policy_name", "round_robin")])
        self.stub = rpc.KMeansTransformerStub(self.channel)

    def close(self):
        self.channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.close()

    def models(self):
        """The served models (kmt.v1.ModelInfo messages)."""
        return list(self.stub.ListModels(pb.ListModelsRequest(), timeout=self.timeout).models)

    @staticmethod
    def request(points, k, model="lloyd-onehot", iterations=20, init=None, seed=1,
                centers=None, request_id="", **fields):
        """A ClusterRequest for an (n, d) array. `init` is a key of INITS;
        None leaves it to the model's default (ModelInfo.default_init).
        `fields` are any other request fields: parameters (the algorithm's,
        a dict such as {"beta": 2}), return_trajectory, ..."""
        points = np.ascontiguousarray(points, dtype=np.float32)
        if points.ndim != 2:
            raise ValueError(f"points has shape {points.shape}, expected (n, d)")
        if centers is not None:
            init = "given"
        if init is not None:
            fields["init"] = INITS[init]
        r = pb.ClusterRequest(request_id=request_id, model=model, n=points.shape[0],
                              d=points.shape[1], k=k, iterations=iterations, seed=seed, **fields)
        r.points.extend(points.ravel())
        if centers is not None:
            r.centers.extend(np.ascontiguousarray(centers, dtype=np.float32).ravel())
        return r

    def _stream(self, requests):
        """Sends the requests on one stream; yields the responses in order,
        raising ClusterError for a failed batch."""
        for r in self.stub.Cluster(requests, timeout=self.timeout):
            if r.HasField("error"):
                raise ClusterError(r.request_id, _status(r.error.code), r.error.message)
            yield r

    @staticmethod
    def _result(r, d):
        return Result(request_id=r.request_id, labels=np.asarray(r.labels, dtype=np.int32),
                      centers=np.asarray(r.centers, dtype=np.float32).reshape(-1, d),
                      objective=r.objective,
                      layer_objectives=np.asarray(r.layer_objectives, dtype=np.float64),
                      iterations_run=r.iterations_run, model=r.model)

    def cluster(self, points, k, **options):
        """Clusters one batch; options as in request()."""
        return next(self.cluster_batches([points], k, **options))

    def cluster_batches(self, blocks, k, **options):
        """Clusters every array of `blocks` (any iterable, e.g. batches())
        as its own task on one stream, yielding a Result per block in order.
        Blocks are read as the stream needs them, so memory stays bounded."""
        dims = []

        def requests():
            for i, block in enumerate(blocks):
                r = self.request(block, k, request_id=f"batch-{i}", **options)
                dims.append(r.d)
                yield r
        for i, r in enumerate(self._stream(requests())):
            yield self._result(r, dims[i])

    def fit(self, points, k, iterations=20, batch_size=4096, init=None, seed=1,
            centers=None, sample_size=65536, model="lloyd-onehot"):
        """Exact Lloyd's over all of `points` ((n, d), any n), `batch_size`
        rows per message: initial centers given, or chosen by the server's
        `init` on a uniform sample of `sample_size` rows; then up to
        `iterations` passes, stopping early once a pass leaves the centers
        unchanged; then one pass for the labels."""
        n, d = points.shape
        if centers is None:
            rows = np.random.default_rng(seed).choice(n, size=min(n, sample_size), replace=False)
            centers = self.cluster(points[np.sort(rows)], k, model=model, iterations=0,
                                   init=init, seed=seed).centers
        centers = np.asarray(centers, dtype=np.float32).reshape(k, d)

        def one_pass(centers, sums):
            requests = (self.request(block, k, model=model, iterations=0, centers=centers,
                                     request_id=f"batch-{i}", return_cluster_sums=sums,
                                     omit_labels=sums)
                        for i, block in enumerate(batches(points, batch_size, min_size=k)))
            return self._stream(requests)

        passes = 0
        for passes in range(1, iterations + 1):
            counts, sums = np.zeros(k), np.zeros((k, d))
            for r in one_pass(centers, True):
                counts += np.asarray(r.center_counts)
                sums += np.asarray(r.center_sums).reshape(k, d)
            updated = centers.copy()
            filled = counts > 0  # an empty cluster keeps its center
            updated[filled] = (sums[filled] / counts[filled, None]).astype(np.float32)
            if np.array_equal(updated, centers):
                break
            centers = updated
        labels, objective = [], 0.0
        for r in one_pass(centers, False):
            labels.append(np.asarray(r.labels, dtype=np.int32))
            objective += r.objective
        return FitResult(labels=np.concatenate(labels), centers=centers, objective=objective,
                         passes=passes)
