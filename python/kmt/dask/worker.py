"""The tasks of a kmt.dask fit that run on the Dask workers. A worker that
loads a block opens a Job stream to a replica, sends the block as a resident
shard and keeps the stream open for the fit, in this process's registry
under the worker's address and the fit's id (a scipy.sparse block as a
sparse shard: its nonzeros, ShardChunk.points_csr); each step is one task per
worker, which sends the step to all its shards before reading any answer, so
the replicas compute at once. The stream is the C++ client's
(client/shard_stream.h, through kmt._driver.Replica.load): the chunked load
with its acknowledgements (through a memory file to a replica on this
machine), the replays, the steps and the rule that tells a replica's failure
from the fit's own errors are those of every other resident job. A block
asked of a worker that does not hold it (the worker that loaded it died, and
Dask ran the task elsewhere) answers `missing`, and one whose replica failed
answers `failed`: the client loads those again and repeats the step for
them."""
import dataclasses
import threading

import numpy as np
import scipy.sparse as sp
from distributed import get_worker

from .. import resident
from ..client import ServiceError, compiled_security, pb, status_code

_lock = threading.Lock()
_held = {}   # (worker address, fit id) -> {block: kmt._driver.Shard}
# (replica, TLS settings) -> kmt._driver.Replica: one channel per replica
# and process while fits run there.
_channels = {}


@dataclasses.dataclass(frozen=True)
class FitSpec:
    """What every task of one fit needs to know."""
    fit_id: str
    d: int
    offset: np.ndarray  # (d,) subtracted from every point before it is sent, or None
    chunk_bytes: int    # of a shard's chunks on the wire
    timeout: float      # each Job stream's deadline in seconds, or None
    tls: tuple          # kmt.channel's TLS options as (name, value) pairs
    float64: bool = False  # float64 shards (float64 X), held and computed in double
    sparse: bool = False   # sparse shards (X of scipy.sparse blocks), unshifted


def close_streams(shards):
    """Closes shards' Job streams, their writes ended at once and their
    statuses read after, so that closing many takes one round trip."""
    shards = list(shards)
    for shard in shards:
        shard.end_writes()
    for shard in shards:
        shard.close()


def step_labels(answer):
    """An assign step's labels (as the shard answered them: raw or repeated)
    as an int32 array."""
    if answer.labels_i32:
        return np.frombuffer(answer.labels_i32, dtype="<i4").astype(np.int32, copy=False)
    return np.asarray(answer.labels, dtype=np.int32)



def _replica(replica, tls):
    with _lock:
        found = _channels.get((replica, tls))
        if found is None:
            found = resident.driver().Replica(replica, **compiled_security(**dict(tls)))
            _channels[(replica, tls)] = found
        return found


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


def _source(spec, block, index):
    """Block `index`'s points as Replica.load takes them: a sparse fit's as
    CSR arrays (another format converted to CSR once; a dense block too, so
    that every shard of the fit is sparse), another's as rows (a
    scipy.sparse block made dense a chunk at a time)."""
    if spec.sparse:
        try:
            csr = resident.csr_arrays(block if sp.issparse(block) else sp.csr_matrix(block),
                                      np.float64 if spec.float64 else np.float32)
        except ValueError as e:
            raise ValueError(f"block {index}: {e}") from None
        return {"csr": csr}
    return {"rows": _checked_rows(block, spec.offset, index)}


def load(spec, block, index, weights, replica, replays):
    """Loads block `index` (with its `weights`, or None) on `replica` as one
    shard held by this worker, then replays `replays` (DaskJob's shards' steps
    from before the block moved) if any:
    (status, worker, points, weight), status "ok",
    or ("failed", code, message) when the replica failed. Bad input raises
    ValueError, as scikit-learn's checks do."""
    n = block.shape[0]
    if weights is not None:
        weights = np.asarray(weights, dtype=np.float64 if spec.float64 else np.float32)
        weights = weights.reshape(-1)
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
    driver = resident.driver()
    try:
        stream = _replica(replica, spec.tls).load(
            n, spec.d, weights=weights, float64=spec.float64, chunk_bytes=spec.chunk_bytes,
            timeout=spec.timeout, replays=list(replays), **_source(spec, block, index))
    except driver.ReplicaFailed as e:
        code, message = e.args
        return ("failed", status_code(code), message), address, n, total
    except driver.Error as e:
        # An answer the replica gave (a shard it cannot hold, one that
        # arrived short) is the fit's error.
        code, message = e.args
        raise ServiceError(status_code(code), message) from None
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
    JobResponse) | ("missing",) | ("failed", code, message) | ("error", code,
    message)}, {block: labels}): "failed" when the replica is gone (its
    stream broke as client/shard_stream.h's ReplicaGone has it: it died or
    was drained), "error" when the stream ended for the fit's own reason;
    the labels taken out of the responses when `keep_labels`, so that they
    stay on the worker."""
    shards = _shards(spec)
    driver = resident.driver()
    answers, labels, sent = {}, {}, []

    def failed(block, e):
        code, message = e.args
        gone = isinstance(e, driver.ReplicaFailed)
        answers[block] = ("failed" if gone else "error", status_code(code), message)
    for block, r in asked:
        stream = shards.get(block)
        if stream is None:
            answers[block] = ("missing",)
            continue
        try:
            stream.send(requests[r])
            sent.append(block)
        except driver.Error as e:
            failed(block, e)
    for block in sent:
        try:
            answer = shards[block].receive()
        except driver.Error as e:
            failed(block, e)
            continue
        if keep_labels:
            response = pb.JobResponse.FromString(answer)
            if not response.HasField("error"):
                labels[block] = step_labels(response).copy()
                response.ClearField("labels")
                response.ClearField("labels_i32")
                answer = response.SerializeToString()
        answers[block] = ("ok", answer)
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


def release(fit_id, dask_worker=None):
    """Ends the fit's Job streams held by this worker (Client.run)."""
    with _lock:
        shards = _held.pop((dask_worker.address, fit_id), {})
        # Without a fit, no channel: an open one delays the worker's exit
        # (each closes once its last shard has).
        if not _held:
            _channels.clear()
    close_streams(shards.values())
    return len(shards)
