"""The tasks of a kmt.dask fit that run on the Dask workers. A worker that
loads a block opens a Job stream to a replica, sends the block as a resident
shard and keeps the stream open for the fit, in this process's registry
under the worker's address and the fit's id; each step is one task per
worker, which sends the step to all its shards before reading any answer, so
the replicas compute at once. A block asked of a worker that does not hold it
(the worker that loaded it died, and Dask ran the task elsewhere) answers
`missing`, and one whose replica failed answers `failed`: the client loads
those again and repeats the step for them."""
import dataclasses
import threading

import numpy as np
from distributed import get_worker

from .. import resident
from ..client import ServiceError, channel, pb, rpc

# Stream failures after which the block goes to another replica.
REPLICA_FAILED = resident.REPLICA_FAILED

_lock = threading.Lock()
_held = {}   # (worker address, fit id) -> {block: resident._JobStream}
# (replica, TLS settings) -> (channel, stub): one channel per replica and
# process while fits run there.
_channels = {}


@dataclasses.dataclass(frozen=True)
class FitSpec:
    """What every task of one fit needs to know."""
    fit_id: str
    d: int
    offset: np.ndarray  # (d,) subtracted from every point before it is sent
    chunk_bytes: int    # of a shard's chunks on the wire
    timeout: float      # each Job stream's deadline in seconds, or None
    tls: tuple          # kmt.channel's TLS options as (name, value) pairs


def _stub(replica, tls):
    with _lock:
        found = _channels.get((replica, tls))
        if found is None:
            options = [("grpc.max_receive_message_length", -1),
                       ("grpc.max_send_message_length", -1)]
            opened = channel(replica, options=options, **dict(tls))
            found = (opened, rpc.KMeansTransformerStub(opened))
            _channels[(replica, tls)] = found
        return found[1]


def _shards(spec, address=None):
    with _lock:
        return _held.setdefault((address or get_worker().address, spec.fit_id), {})


def _checked_rows(block, offset, index):
    """rows(first, end) of a block as kmt.resident sends them, refusing what
    scikit-learn's check_array refuses."""
    rows = resident.dense_rows(block, offset)

    def checked(first, end):
        x = rows(first, end)
        if not np.isfinite(x).all():
            raise ValueError(f"Input X contains NaN or infinity (in block {index}).")
        return x
    return checked


def load(spec, block, index, weights, replica, seeded, groups):
    """Loads block `index` (with its `weights`, or None) on `replica` as one
    shard held by this worker, then replays `seeded` (k-means++ centers
    chosen before the block moved) and `groups` (k-means‖'s) if any:
    (status, worker, points, weight), status "ok",
    or ("failed", code, message) when the replica failed. Bad input raises
    ValueError, as scikit-learn's checks do."""
    n = block.shape[0]
    if weights is not None:
        weights = np.asarray(weights, dtype=np.float32).reshape(-1)
        if len(weights) != n:
            raise ValueError(f"sample_weight has {len(weights)} values for the {n} samples of "
                             f"block {index}.")
        if not np.isfinite(weights).all():
            raise ValueError(f"Input sample_weight contains NaN or infinity (in block {index}).")
        if (weights < 0).any():
            raise ValueError("Negative values in data passed to `sample_weight`")
    total = float(n if weights is None else weights.astype(np.float64).sum())
    address = get_worker().address
    if n == 0:
        return "ok", address, 0, 0.0
    stream = resident._JobStream(_stub(replica, spec.tls), spec.timeout)
    try:
        resident.load_shard(stream, _checked_rows(block, spec.offset, index), weights, n, spec.d,
                            spec.chunk_bytes, seeded, groups)
    except ServiceError as e:
        stream.close()
        if e.code in REPLICA_FAILED:
            return ("failed", e.code, e.message), address, n, total
        raise
    except BaseException:
        stream.close()
        raise
    shards = _shards(spec)
    with _lock:
        old = shards.pop(index, None)
        shards[index] = stream
    if old is not None:
        old.close()
    return "ok", address, n, total


def step(spec, requests, asked, keep_labels):
    """One step on this worker's shards: `asked` lists (block, index into
    `requests`, serialized JobRequests). Returns ({block: ("ok", serialized
    JobResponse) | ("missing",) | ("failed", code, message)}, {block: labels}),
    the labels taken out of the responses when `keep_labels`, so that they
    stay on the worker."""
    shards = _shards(spec)
    parsed = [pb.JobRequest.FromString(r) for r in requests]
    answers, labels, sent = {}, {}, []
    for block, r in asked:
        stream = shards.get(block)
        if stream is None:
            answers[block] = ("missing",)
            continue
        stream.send(parsed[r])
        sent.append(block)
    for block in sent:
        try:
            response = shards[block].receive()
        except ServiceError as e:
            answers[block] = ("failed", e.code, e.message)
            continue
        if keep_labels and not response.HasField("error"):
            labels[block] = resident.step_labels(response).copy()
            response.ClearField("labels")
            response.ClearField("labels_i32")
        answers[block] = ("ok", response.SerializeToString())
    return answers, labels


def answers_of(stepped):
    """The answers of a step whose labels stay on the worker."""
    return stepped[0]


def labels_of(stepped, block):
    """Block `block`'s labels from a step that kept them."""
    found = stepped[1].get(block)
    if found is None:
        raise RuntimeError(f"the labels of block {block} were lost with the worker that held "
                           "them, after the fit ended; predict(X) computes them again")
    return found


def farthest(block, weights, labels, centers, offset, first, m):
    """The candidates of block rows for scikit-learn's relocation of m
    empty clusters: the m points of positive weight farthest from their own
    centers (distances as kmt.resident computes them, the lower index first
    among equal ones), as (global indices, rows as sent, weights or None,
    labels)."""
    x = resident.dense_rows(block, offset)(0, block.shape[0])
    distances = ((x.astype(np.float32) - centers[labels]) ** 2).sum(axis=1)
    positions = np.arange(len(labels))
    if weights is not None:
        weights = np.asarray(weights, dtype=np.float32).reshape(-1)
        positions = np.flatnonzero(weights > 0)
    far = positions[np.lexsort((positions, -distances[positions]))[:m]]
    far.sort()
    return (first + far, x[far], None if weights is None else weights[far], labels[far])


def rows_at(block, offset, positions):
    """The block's rows at `positions` as sent (minus `offset`)."""
    return resident.dense_rows(block, offset)(0, block.shape[0])[positions]


def release(fit_id, dask_worker=None):
    """Ends the fit's Job streams held by this worker (Client.run)."""
    with _lock:
        shards = _held.pop((dask_worker.address, fit_id), {})
        # Without a fit, no channel: an open one delays the worker's exit.
        idle = [] if _held else list(_channels.values())
        if idle:
            _channels.clear()
    resident.close_streams(shards.values())
    for opened, _ in idle:
        opened.close()
    return len(shards)
