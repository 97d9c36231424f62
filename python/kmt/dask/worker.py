"""The tasks of a kmt.dask fit that run on the Dask workers. A worker that
loads a block opens a Job stream to a replica, sends the block as a resident
shard and keeps the stream open for the fit, in this process's registry
under the worker's address and the fit's id (a scipy.sparse block as a
sparse shard: its nonzeros, ShardChunk.points_csr); each step is one task per
worker, which sends the step to all its shards before reading any answer, so
the replicas compute at once. A block asked of a worker that does not hold it
(the worker that loaded it died, and Dask ran the task elsewhere) answers
`missing`, and one whose replica failed answers `failed`: the client loads
those again and repeats the step for them."""
import dataclasses
import queue
import threading

import grpc
import numpy as np
import scipy.sparse as sp
from distributed import get_worker

from .. import resident
from ..client import FLOAT64, ServiceError, channel, float32_bytes, pb, rpc, status_code

# Stream failures after which the block goes to another replica: the
# replica is gone, restarting or shutting down (client/replica_shards.cc's
# rule). Other codes are the fit's own errors.
REPLICA_FAILED = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED,
                  grpc.StatusCode.ABORTED, grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL)

_lock = threading.Lock()
_held = {}   # (worker address, fit id) -> {block: JobStream}
# (replica, TLS settings) -> (channel, stub): one channel per replica and
# process while fits run there.
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


def float64_bytes(values):
    """An array's values as the wire's raw float64 bytes."""
    return np.ascontiguousarray(values, dtype=FLOAT64).tobytes()


# How long closing a stream waits for the replica's final status before it
# cancels the call instead.
CLOSE_SECONDS = 10.0


class JobStream:
    """One Job stream, fed from a queue, so that a step's requests are sent to
    every shard before any answer is read and the replicas compute at once."""

    def __init__(self, stub, timeout):
        self.requests = queue.SimpleQueue()
        self.answers = stub.Job(iter(self.requests.get, None), timeout=timeout)
        self.failure = None
        self.unanswered = 0  # requests sent whose response has not been read
        self.writes_done = False

    def send(self, request):
        self.requests.put(request)
        self.unanswered += 1

    def receive(self):
        """The next step's response, its labels gathered from the responses
        that follow it; a step's error arrives inside it, a broken stream as
        a ServiceError."""
        if self.failure:
            raise self.failure
        try:
            response = next(self.answers)
            to_follow = response.labels_to_follow
            raw = [response.labels_i32]
            while to_follow > 0:
                more = next(self.answers)
                count = len(more.labels_i32) // 4 + len(more.labels)
                if not count or more.labels_to_follow != to_follow - count:
                    raise ServiceError(grpc.StatusCode.INTERNAL,
                                       f"a job's labels arrived out of step: {to_follow} to "
                                       f"follow, then {count} with "
                                       f"{more.labels_to_follow} to follow")
                response.labels.extend(more.labels)
                raw.append(more.labels_i32)
                to_follow = more.labels_to_follow
            if len(raw) > 1:
                response.labels_i32 = b"".join(raw)
            response.labels_to_follow = 0
            self.unanswered -= 1
            return response
        except grpc.RpcError as e:
            self.failure = ServiceError(e.code(), e.details())
        except StopIteration:
            self.failure = ServiceError(grpc.StatusCode.UNAVAILABLE, "the job stream ended early")
        raise self.failure

    def end_writes(self):
        """Ends the job on the replica (its shard is freed) as the C++ client
        does, with the end of the writes (WritesDone); wait_closed reads the
        status it ends with."""
        if not self.writes_done:
            self.writes_done = True
            self.requests.put(None)

    def wait_closed(self):
        """After end_writes: the replica's final status read, so that a job
        that ended as its client intended ends OK on the server, not
        CANCELLED. A stream that failed, has a request unanswered or does not
        end within CLOSE_SECONDS is cancelled."""
        if self.failure is None and self.unanswered == 0:
            try:
                self.answers.exception(timeout=CLOSE_SECONDS)
            except grpc.FutureTimeoutError:
                pass
        self.answers.cancel()  # a no-op once the call is over

    def close(self):
        """Ends the job on the replica (its shard is freed)."""
        self.end_writes()
        self.wait_closed()


def close_streams(streams):
    """Closes Job streams, their writes ended at once and their statuses
    read after, so that closing many takes one round trip."""
    streams = list(streams)
    for stream in streams:
        stream.end_writes()
    for stream in streams:
        stream.wait_closed()


def _step_error(response):
    return ServiceError(status_code(response.error.code), response.error.message)


def _wire(float64):
    """(bytes per value, encoder, field suffix) of a float64 or float32 shard."""
    return (8, float64_bytes, "f64") if float64 else (4, float32_bytes, "f32")


def dense_chunks(rows, weights, count, d, chunk_bytes, float64=False):
    """A dense shard of `count` points as ShardChunks of about `chunk_bytes`
    of raw points: rows(first, end) are its points [first, end) as the
    replica is to hold them, `weights` (count,) theirs or None; a float64
    shard's as float64."""
    width, encode, suffix = _wire(float64)
    chunk = max(1, chunk_bytes // (width * d))
    for start in range(0, count, chunk):
        end = min(count, start + chunk)
        message = pb.ShardChunk(n=count, d=d, count_label_changes=True,
                                **{f"points_{suffix}": encode(rows(start, end))})
        if weights is not None:
            setattr(message, f"weights_{suffix}", encode(weights[start:end]))
        yield message


def sparse_chunks(csr, weights, d, chunk_bytes, float64=False):
    """A sparse shard, `csr` (indptr, indices, values) as resident.csr_arrays
    gives them, as ShardChunks of points_csr: each as many rows as
    `chunk_bytes` holds of their offsets, columns, values (and weights), at
    least one, as client/replica_shards.cc sizes them, so that the bytes on
    the wire follow the nonzeros, not d."""
    indptr, indices, values = csr
    count = len(indptr) - 1
    width, encode, suffix = _wire(float64)
    # The bytes of rows [0, i): the chunk from `first` ends at the last i
    # whose bytes from first fit.
    row_bytes = 8 + (width if weights is not None else 0)
    cumulative = np.arange(count + 1, dtype=np.int64) * row_bytes + indptr * (4 + width)
    first = 0
    while first < count:
        end = int(np.searchsorted(cumulative, cumulative[first] + chunk_bytes, side="right")) - 1
        end = min(count, max(first + 1, end))
        a, b = indptr[first], indptr[end]
        csr_points = pb.CsrPoints(
            indptr_i64=np.ascontiguousarray(indptr[first:end + 1] - a, dtype="<i8").tobytes(),
            indices_i32=np.ascontiguousarray(indices[a:b], dtype="<i4").tobytes(),
            shard_nnz=int(indptr[-1]), float64=float64,
            **{f"values_{suffix}": encode(values[a:b])})
        message = pb.ShardChunk(n=count, d=d, count_label_changes=True, points_csr=csr_points)
        if weights is not None:
            setattr(message, f"weights_{suffix}", encode(weights[first:end]))
        yield message
        first = end


def load_shard(stream, chunks, count, replays=()):
    """Sends a shard of `count` points on a fresh Job stream, its
    ShardChunks `chunks` (dense_chunks or sparse_chunks) read as they are
    sent, reading the acknowledgements a few chunks behind. Then the shard
    takes the centers its seeding steps took in before it moved there
    (`replays`, note_replays') into its distances, in the same steps, so
    that its distances are those it had to the bit."""
    loaded, unacknowledged = 0, 0

    def acknowledged():
        r = stream.receive()
        if r.HasField("error"):
            raise _step_error(r)
        return r.points_loaded
    for message in chunks:
        stream.send(pb.JobRequest(shard=message))
        unacknowledged += 1
        # At most a few chunks in flight: the points are not copied whole.
        while unacknowledged > 4:
            loaded, unacknowledged = acknowledged(), unacknowledged - 1
    while unacknowledged:
        loaded, unacknowledged = acknowledged(), unacknowledged - 1
    if loaded != count:
        raise ServiceError(grpc.StatusCode.INTERNAL,
                           f"the replica holds {loaded} of {count} points")
    for replay in replays:
        stream.send(pb.JobRequest.FromString(replay))
        r = stream.receive()
        if r.HasField("error"):
            raise _step_error(r)


def note_replays(shard, request):
    """Keeps a shard's answered `request`, if it is a seeding step that took
    centers into its distances, as a step of its add_centers alone (in the
    form they came in), serialized, for a reload to replay (load_shard)."""
    for kind in ("seed", "kmeans_parallel"):
        if not request.HasField(kind):
            continue
        kept = pb.JobRequest()
        step = getattr(kept, kind)
        for field, value in getattr(request, kind).ListFields():
            if not field.name.startswith("add_centers"):
                continue
            if field.label == field.LABEL_REPEATED:
                getattr(step, field.name).extend(value)
            else:
                setattr(step, field.name, value)
        if kept.HasField(kind):
            shard.replays.append(kept.SerializeToString())


def step_labels(answer):
    """An assign step's labels (as the shard answered them: raw or repeated)
    as an int32 array."""
    if answer.labels_i32:
        return np.frombuffer(answer.labels_i32, dtype="<i4").astype(np.int32, copy=False)
    return np.asarray(answer.labels, dtype=np.int32)



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


def _chunks(spec, block, index, weights):
    """Block `index`'s ShardChunks: a sparse fit's as a sparse shard (CSR,
    another format converted to CSR once; a dense block too, so that every
    shard of the fit is sparse), another's as a dense one (a scipy.sparse
    block made dense a chunk at a time)."""
    if spec.sparse:
        try:
            csr = resident.csr_arrays(block if sp.issparse(block) else sp.csr_matrix(block),
                                      np.float64 if spec.float64 else np.float32)
        except ValueError as e:
            raise ValueError(f"block {index}: {e}") from None
        return sparse_chunks(csr, weights, spec.d, spec.chunk_bytes, spec.float64)
    return dense_chunks(_checked_rows(block, spec.offset, index), weights, block.shape[0],
                        spec.d, spec.chunk_bytes, spec.float64)


def load(spec, block, index, weights, replica, replays):
    """Loads block `index` (with its `weights`, or None) on `replica` as one
    shard held by this worker, then replays `replays` (note_replays' steps
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
    stream = JobStream(_stub(replica, spec.tls), spec.timeout)
    try:
        load_shard(stream, _chunks(spec, block, index, weights), n, replays)
    except ServiceError as e:
        stream.close()
        # Only a broken stream is the replica's failure; an answer it gave
        # (a shard it cannot hold, one that arrived short) is the fit's.
        if stream.failure is not None and e.code in REPLICA_FAILED:
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
    JobResponse) | ("missing",) | ("failed", code, message) | ("error", code,
    message)}, {block: labels}): "failed" when the replica is gone (its
    stream broke with a REPLICA_FAILED code: it died or was drained), "error"
    when the stream ended for the fit's own reason; the labels taken out of
    the responses when `keep_labels`, so that they stay on the worker."""
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
            gone = shards[block].failure is not None and e.code in REPLICA_FAILED
            answers[block] = ("failed" if gone else "error", e.code, e.message)
            continue
        if keep_labels and not response.HasField("error"):
            labels[block] = step_labels(response).copy()
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


def release(fit_id, dask_worker=None):
    """Ends the fit's Job streams held by this worker (Client.run)."""
    with _lock:
        shards = _held.pop((dask_worker.address, fit_id), {})
        # Without a fit, no channel: an open one delays the worker's exit.
        idle = [] if _held else list(_channels.values())
        if idle:
            _channels.clear()
    close_streams(shards.values())
    for opened, _ in idle:
        opened.close()
    return len(shards)
