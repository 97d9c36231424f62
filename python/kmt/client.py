"""A Python client of kmt-server: numpy arrays in and out.

    client = kmt.Client("localhost:50051")
    result = client.cluster(points, k=10)           # one batch: labels, centers
    for r in client.cluster_batches(kmt.batches(points, 4096), k=10):
        ...                                          # every batch its own task
    whole = client.fit(points, k=10)                 # Lloyd's over all the points

Arrays travel as raw little-endian float32 / int32 bytes (one copy each way,
no per-value conversion) unless the client is made with raw=False. Float64
points travel as float64 bytes, with their centers, weights and offset, and
are clustered in double: the centers and distances come back as float64
(raw=False sends and returns float32 values). Float16 points travel as
float16 bytes (points_f16), half float32's, and are clustered in float32 as
the float32 points of the same values. The server is stateless, so a batch
answered UNAVAILABLE, or left unanswered by a stream that broke with
UNAVAILABLE or that the server cancelled, is sent again on a new stream
(which round-robin may place on another replica), as the C++ client does.

`fit` runs exact Lloyd's over a dataset of any size: each pass sends every
batch with the current centers and no layer, and adds up the per-center point
counts and coordinate sums the server returns (docs/api.md, section 5).

Without a target, a client (and every estimator without `server=`) reaches
the server the KMT_SERVER environment variable names (host:port), else
localhost:50051.
"""
import collections
import contextlib
import dataclasses
import os
import queue
import re
import threading
import time

import grpc
import numpy as np

from . import stubs

pb, rpc = stubs.load()


def enum_names(enum):
    """{name: number} of a proto enum's values, named as the server names
    them (proto/enum_names.h): without the prefix every value shares, in
    lower case, '-' for '_' and '+' for "_PLUS". INIT_PLAIN_KMEANS_PLUS_PLUS
    is "plain-kmeans++", EMPTY_CLUSTERS_RELOCATE_FARTHEST
    "relocate-farthest"."""
    values = enum.DESCRIPTOR.values
    prefix = os.path.commonprefix([v.name for v in values])
    prefix = prefix[:prefix.rfind("_") + 1]
    return {v.name[len(prefix):].replace("_PLUS", "+").replace("_", "-").lower(): v.number
            for v in values}


INITS = enum_names(pb.Init)
EMPTY_CLUSTERS = enum_names(pb.EmptyClusters)
# scikit-learn's spellings of the initialisations, where they differ.
INIT_ALIASES = {"k-means++": "kmeans++", "k-means||": "kmeans||"}

# The server a client reaches without a target: $KMT_SERVER, else this.
DEFAULT_TARGET = "localhost:50051"
# The largest message a client sends or receives unless told otherwise, the
# same as the server's --max_message_bytes default (kMaxMessageBytes in
# proto/channel_tuning.h).
MAX_MESSAGE_BYTES = 64 << 20
# Name resolvers of gRPC targets written as scheme://...; any other scheme
# (http://, grpc://) is a URL, which gRPC would read as a host name.
_GRPC_SCHEMES = ("dns", "unix", "unix-abstract", "ipv4", "ipv6", "vsock")

# The wire's raw encodings.
FLOAT16 = np.dtype("<f2")
FLOAT32 = np.dtype("<f4")
FLOAT64 = np.dtype("<f8")
INT32 = np.dtype("<i4")


class ServiceError(Exception):
    """A call the service could not complete: `code` is a grpc.StatusCode.
    One whose code is UNAVAILABLE (the server cannot be reached, or is
    shutting down) is a ServiceUnavailable, which is also a ConnectionError."""

    def __new__(cls, code, message, *rest):
        if cls is ServiceError and code == grpc.StatusCode.UNAVAILABLE:
            cls = ServiceUnavailable
        return super().__new__(cls, code, message, *rest)

    def __init__(self, code, message):
        super().__init__(code, message)
        self.code = code
        self.message = message

    def __str__(self):
        return f"{self.code.name}: {self.message}"


class ServiceUnavailable(ServiceError, ConnectionError):
    """The server cannot be reached (or is shutting down): UNAVAILABLE.
    `except ConnectionError` catches it as well as `except ServiceError`."""


class ClusterError(ServiceError):
    """A batch the server answered with an error."""

    def __init__(self, request_id, code, message):
        super().__init__(code, message)
        self.request_id = request_id

    def __str__(self):
        return f"{self.request_id}: {super().__str__()}"


@dataclasses.dataclass
class Result:
    """One batch's answer."""
    request_id: str
    labels: np.ndarray            # (n,) int32: nearest final center
    centers: np.ndarray           # (k, d) float32; float64 for float64 points
    objective: float              # sum of squared distances to the final centers
    layer_objectives: np.ndarray  # after each layer, if asked for
    iterations_run: int
    model: str
    converged: bool = False       # stopped before `iterations` layers
    convergence: int = 0          # why: a pb.ConvergenceReason
    distances: np.ndarray = None  # if asked: (n,) to the nearest center, or (n, k); centers' dtype
    restart_objectives: np.ndarray = None  # each restart's objective, if restarts ran
    best_restart: int = 0
    guard_learned_layers: int = 0  # guard=True: layers that kept the learned step
    guard_lloyd_layers: int = 0    # ... and those that kept the Lloyd's step instead
    guard_lloyd_answered: bool = False  # guard=True: exact Lloyd's from the same start answered
    model_version: int = 0        # the version of the model that answered (0: a server without versions)


@dataclasses.dataclass
class FitResult:
    """Lloyd's over a whole dataset."""
    labels: np.ndarray   # (n,) int32
    centers: np.ndarray  # (k, d) float32, or float64 for float64 points on a raw client
    objective: float     # of the final centers on every point
    passes: int          # updates run (fewer than asked if the centers settled)


def init_name(init, accepted, hint=""):
    """The name `init` stands for (scikit-learn's 'k-means++' is 'kmeans++'),
    which must be one of `accepted`; else a ValueError that lists every name
    accepted, scikit-learn's spellings included, after `hint` if given."""
    name = INIT_ALIASES.get(init, init)
    if name in accepted:
        return name
    names = [" or ".join([n, *(a for a, to in INIT_ALIASES.items() if to == n)])
             for n in accepted]
    raise ValueError(f"init {init!r}: {hint + '; ' if hint else ''}expected one of "
                     f"{', '.join(names)}")


def server_target(target=None):
    """The gRPC target a client reaches: `target`, else $KMT_SERVER, else
    localhost:50051. A URL (http://host:port) is refused with a ValueError
    that says what to write instead."""
    where = ""
    if target is None:
        target = os.environ.get("KMT_SERVER") or DEFAULT_TARGET
        where = " (from KMT_SERVER)" if os.environ.get("KMT_SERVER") else ""
    if not isinstance(target, str) or not target:
        raise ValueError(f"server {target!r}: expected 'host:port', such as "
                         f"'{DEFAULT_TARGET}'")
    scheme = re.match(r"([A-Za-z][A-Za-z0-9+.-]*)://", target)
    if scheme and scheme.group(1).lower() not in _GRPC_SCHEMES:
        tls = " (and tls=True for TLS)" if scheme.group(1).lower() in ("https", "grpcs") else ""
        raise ValueError(f"server '{target}'{where}: expected host:port, no scheme, such as "
                         f"'{target[scheme.end():].rstrip('/')}'{tls}; several replicas: "
                         "'ipv4:a:p,b:q' or 'dns:///name:port'")
    return target


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


# gRPC's C++ API, which the compiled extension kmt._driver runs (the C++
# client under cluster_each, the resident-job driver), keeps threads inside
# gRPC that gRPC's fork handlers cannot stop: in a process forked after it
# was used, gRPC works no more, from C++ or from Python (calls fail with "Bad
# file descriptor" or hang; with GRPC_ENABLE_FORK_SUPPORT=true the child
# crashes at the fork). Such a child is told so instead.
_extension = {"used": False, "forked": False}


def extension_used():
    """Notes that this process runs gRPC through kmt._driver."""
    _extension["used"] = True


def _after_fork_in_child():
    _extension["forked"] = _extension["forked"] or _extension["used"]


os.register_at_fork(after_in_child=_after_fork_in_child)


def check_not_forked():
    """A RuntimeError in a process forked after its parent used kmt._driver."""
    if _extension["forked"]:
        raise RuntimeError(
            "kmt: this process was forked from one that had used kmt's compiled extension "
            "(kmt._driver), and gRPC does not work in such a child; start worker processes with "
            "multiprocessing's 'spawn' or 'forkserver' method, or start the parent with "
            "KMT_COMPILED_STREAMS=0 and GRPC_ENABLE_FORK_SUPPORT=true, so that its streams run "
            "on gRPC's Python API with gRPC's fork support, which is off by default (resident "
            "fits run kmt._driver whatever the setting)")


def status_code(code):
    """The grpc.StatusCode of a numeric code."""
    return next((c for c in grpc.StatusCode if c.value[0] == code), grpc.StatusCode.UNKNOWN)


def float32_bytes(values):
    """An array's values as the wire's raw float32 bytes: one conversion if
    the array is not already C-ordered little-endian float32, then one copy."""
    return np.ascontiguousarray(values, dtype=FLOAT32).tobytes()


def _varint(value):
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


# The request's raw arrays: field name -> field number.
_RAW_FIELDS = {field: pb.ClusterRequest.DESCRIPTOR.fields_by_name[field].number
               for field in ("points_f32", "centers_f32", "weights_f32", "points_f64",
                             "centers_f64", "weights_f64", "points_offset_f64", "points_f16")}
_CLUSTER_METHOD = (f"/{pb.DESCRIPTOR.services_by_name['KMeansTransformer'].full_name}"
                   "/Cluster")


class WireRequest:
    """A ClusterRequest as the stream sends it: `message` holds every field
    but the raw arrays, which `serialize` writes after the message's own
    bytes as length-delimited fields. A parser reads a field that follows a
    message's bytes as one of its fields, so the bytes are those of the
    message with the arrays set, made in one copy of each array (setting a
    bytes field and serialising the message would copy it twice more)."""
    __slots__ = ("message", "arrays")

    def __init__(self, message, arrays=()):
        self.message = message
        self.arrays = list(arrays)  # (field name, C-contiguous little-endian array)

    @property
    def request_id(self):
        return self.message.request_id

    def serialize(self):
        parts = [self.message.SerializeToString()]
        for field, values in self.arrays:
            parts.append(_varint(_RAW_FIELDS[field] << 3 | 2) + _varint(values.nbytes))
            parts.append(memoryview(values).cast("B"))
        return b"".join(parts)

    def to_message(self):
        """The whole ClusterRequest, arrays set."""
        message = pb.ClusterRequest()
        message.CopyFrom(self.message)
        for field, values in self.arrays:
            setattr(message, field, values.tobytes())
        return message


def is_sparse(points):
    """Whether `points` is a scipy.sparse matrix or array (without importing
    scipy for the dense points the client takes on its own)."""
    return hasattr(points, "tocsr") and hasattr(points, "nnz")


def csr_arrays(points, dtype):
    """The (indptr, indices, data) of a sparse matrix in canonical CSR
    (columns sorted within each row, duplicates summed; other formats
    converted once): int64 offsets, int32 columns, values in `dtype`. A
    canonical CSR matrix of those types gives its own arrays; a value that
    is not finite is a ValueError naming it."""
    X = points.tocsr()
    if X.shape[1] > np.iinfo(np.int32).max:
        raise ValueError(f"points has {X.shape[1]} features; sparse points take at most 2^31 - 1")
    indptr = np.ascontiguousarray(X.indptr, dtype=np.int64)
    indices = np.ascontiguousarray(X.indices, dtype=np.int32)
    data = X.data
    if not X.has_canonical_format:
        indptr, indices, data = _canonical_csr(X, indptr, indices)
    data = np.ascontiguousarray(data, dtype=dtype)
    finite = np.isfinite(data)
    if not finite.all():
        at = int(np.argmin(finite))
        row = int(np.searchsorted(indptr, at, side="right")) - 1
        kind = "NaN" if np.isnan(data[at]) else "infinity"
        raise ValueError(f"Input X contains {kind}: {data[at]} at row {row}, column "
                         f"{int(indices[at])}.")
    return indptr, indices, data


def _canonical_csr(X, indptr, indices):
    """CSR matrix X's (indptr, indices, data) with each row's columns sorted
    and a column's entries summed in their order, as new arrays (`indptr`,
    `indices`: X's as int64 and int32): the compiled extension's, whose rows
    take every core, for float32 and float64 X where the package has it,
    else scipy's sum_duplicates on a copy (sort_indices and the sums a row
    at a time on one core)."""
    try:
        from . import _driver
    except ImportError:
        _driver = None
    if _driver is None or X.dtype not in (np.float32, np.float64):
        X = X.copy()
        X.sum_duplicates()
        return (np.ascontiguousarray(X.indptr, dtype=np.int64),
                np.ascontiguousarray(X.indices, dtype=np.int32), X.data)
    return _driver.canonical_csr(indptr, indices, np.ascontiguousarray(X.data))


def _serialize_request(request):
    if isinstance(request, WireRequest):
        return request.serialize()
    return request.SerializeToString()


def _compiled_request(request):
    """A ClusterRequest or WireRequest as kmt._driver takes it: (message
    bytes, [(field number, bytes-like)]), the arrays not copied."""
    if isinstance(request, WireRequest):
        return (request.message.SerializeToString(),
                [(_RAW_FIELDS[field], memoryview(values).cast("B"))
                 for field, values in request.arrays])
    return request.SerializeToString(), []


def _check_offset(request, response):
    """A server that predates points_offset ignores it (unknown fields are
    skipped) and clusters the points unshifted: refused, not taken as the
    shifted answer."""
    message = request.message if isinstance(request, WireRequest) else request
    wide = (any(field == "points_offset_f64" for field, _ in request.arrays)
            if isinstance(request, WireRequest) else len(message.points_offset_f64))
    if ((len(message.points_offset) or wide) and not response.HasField("error")
            and not response.points_offset_applied):
        raise ServiceError(grpc.StatusCode.FAILED_PRECONDITION,
                           f"batch '{message.request_id}': the server did not apply "
                           "points_offset (it predates the field); upgrade the server")


def _raise_if_failed(response):
    """A batch the server answered with an error raises ClusterError."""
    if response.HasField("error"):
        raise ClusterError(response.request_id, status_code(response.error.code),
                           response.error.message)


def _floats(raw, raw64, repeated):
    """A response's values, from its raw float64 field (a float64 request's),
    its raw float32 one, or its repeated one."""
    if raw64:
        return np.frombuffer(raw64, dtype=FLOAT64)
    if raw:
        return np.frombuffer(raw, dtype=FLOAT32)
    return np.asarray(repeated, dtype=np.float32)


def _read(path, what):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise OSError(f"cannot read {what} {path}: {e.strerror}") from e


def compiled_security(tls=False, ca=None, cert=None, key=None, server_name=None):
    """The TLS settings `channel` takes, as the compiled driver's and
    client's keyword arguments: TLS when `tls` or any file is given, the
    files' paths ("" where none)."""
    return dict(tls=bool(tls or ca or cert or key), ca=ca or "", cert=cert or "", key=key or "",
                server_name=server_name or "")


def channel(target, options=(), tls=False, ca=None, cert=None, key=None, server_name=None):
    """A gRPC channel to `target` (as server_target reads it): plaintext, or
    TLS when `tls` is true or any file is given. `ca` is the PEM CA to trust
    (None: the system's roots), `cert` and `key` the client's PEM certificate
    and key for mutual TLS, and `server_name` the name to verify in the
    server's certificate when it is not the target's host."""
    target = server_target(target)
    options = list(options)
    if not (tls or ca or cert or key):
        return grpc.insecure_channel(target, options=options)
    if bool(cert) != bool(key):
        raise ValueError("mutual TLS needs both a client certificate and its key")
    credentials = grpc.ssl_channel_credentials(
        root_certificates=_read(ca, "CA") if ca else None,
        private_key=_read(key, "key") if key else None,
        certificate_chain=_read(cert, "certificate") if cert else None)
    if server_name:
        options.append(("grpc.ssl_target_name_override", server_name))
    return grpc.secure_channel(target, credentials, options=options)


class _Entry:
    """A batch of one Cluster call: its place in the caller's order and its
    sends so far."""
    __slots__ = ("index", "attempts", "pushbacks", "request")

    def __init__(self, index, request):
        self.index, self.attempts, self.pushbacks, self.request = index, 0, 0, request


def _pushback(response, entry, client):
    """The pause in seconds a batch's refusal asks for before it is sent
    again, as gRPC's grpc-retry-pushback-ms: RESOURCE_EXHAUSTED with a
    retry pushback of 0 or more, while the batch has pushbacks left; else
    None."""
    error = response.error
    if (error.code != grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]
            or not error.HasField("retry_pushback_ms") or error.retry_pushback_ms < 0
            or entry.pushbacks >= client.max_pushbacks):
        return None
    return error.retry_pushback_ms / 1000


class _StreamClosed(Exception):
    """Ends a compiled stream whose caller stopped reading (stream())."""


class _FallbackCall:
    """stream()'s call where the package lacks the compiled extension (or
    KMT_COMPILED_STREAMS is 0), through gRPC's Python API, with the C++
    client's retries (client/cluster_client.h): one Cluster call over as
    many streams as it takes; each stream writes retries first, then new
    requests, at most `window` unanswered, and ends its writes after
    `batches_per_stream` or once a batch came back UNAVAILABLE; what a
    stream leaves unanswered goes to the next one."""

    def __init__(self, client, requests):
        self.client = client
        self.source = iter(requests)
        self.next_index = 0
        self.exhausted = False
        self.retry = []      # entries to send again, in request order
        self.done = {}       # index -> response, answered and not yet yielded
        self.next_delivery = 0
        self.failed_streams = 0  # in a row, without an answer
        self.resume_at = None  # time.monotonic() when pushed-back batches may go out again

    def _next(self):
        if self.retry:
            return self.retry.pop(0)
        if self.exhausted:
            return None
        request = next(self.source, None)
        if request is None:
            self.exhausted = True
            return None
        entry = _Entry(self.next_index, request)
        self.next_index += 1
        return entry

    def responses(self):
        """The responses, in request order."""
        first = True
        while self.retry or not self.exhausted:
            if not first and (self.retry or self.failed_streams):
                # Back off before a stream that re-sends, more after each failure;
                # or as long as the server asked, the pushback replacing the backoff.
                attempts = max(self.failed_streams, self.retry[0].attempts if self.retry else 0)
                if self.resume_at is not None:
                    time.sleep(max(0.0, self.resume_at - time.monotonic()))
                    self.resume_at = None
                else:
                    time.sleep(min(2.0, 0.05 * (1 << min(attempts, 6))))
            first = False
            yield from self._stream()
        while self.next_delivery in self.done:
            yield self._deliver()

    def _deliver(self):
        response = self.done.pop(self.next_delivery)
        self.next_delivery += 1
        return response

    def _stream(self):
        client = self.client
        lock = threading.Condition()
        sent = collections.deque()  # on this stream, unanswered, in order
        requeue = []
        # Set under the lock: once "stop" is, writes() takes no more batches.
        state = {"stop": False, "source_error": None}

        def writes():
            # Runs on gRPC's thread; the caller's requests are read here.
            for _ in range(client.batches_per_stream):
                with lock:
                    lock.wait_for(lambda: state["stop"] or len(sent) < client.window)
                    if state["stop"]:
                        return
                    try:
                        entry = self._next()
                    except Exception as e:  # the caller's own, raised on the caller's thread
                        state["source_error"] = e
                        self.exhausted = True
                        entry = None
                    if entry is None:
                        return
                    entry.attempts += 1
                    sent.append(entry)
                yield entry.request

        call = client.cluster_call(writes(), timeout=client.timeout)
        status, details, answered = grpc.StatusCode.OK, "", False
        try:
            for response in call:
                with lock:
                    if not sent:  # more responses than requests: not our server
                        call.cancel()
                        raise ServiceError(grpc.StatusCode.INTERNAL,
                                           "the server answered more batches than were sent")
                    entry = sent.popleft()
                    lock.notify_all()
                answered = True
                self.failed_streams = 0
                if (response.error.code == grpc.StatusCode.UNAVAILABLE.value[0]
                        and entry.attempts < client.max_attempts):
                    # The server is draining: the batch goes out again, on a
                    # fresh stream once this one has ended.
                    with lock:
                        state["stop"] = True
                        lock.notify_all()
                    client.resent += 1
                    requeue.append(entry)
                    continue
                pause = _pushback(response, entry, client)
                if pause is not None:
                    # The server's budget is full: this batch, and the ones
                    # after it, go out on a fresh stream once the pause has passed.
                    with lock:
                        state["stop"] = True
                        lock.notify_all()
                    entry.pushbacks += 1
                    client.resent += 1
                    resume = time.monotonic() + pause
                    self.resume_at = resume if self.resume_at is None else max(self.resume_at,
                                                                               resume)
                    requeue.append(entry)
                    continue
                _check_offset(entry.request, response)
                self.done[entry.index] = response
                while self.next_delivery in self.done:
                    yield self._deliver()
        except grpc.RpcError as e:
            status, details = e.code(), e.details()
            if status == grpc.StatusCode.RESOURCE_EXHAUSTED and "larger than max" in details:
                details = _too_large(details, client.max_message_bytes)
        finally:
            with lock:
                state["stop"] = True
                lock.notify_all()
            call.cancel()  # a no-op once the call is over; ends it if the caller stopped reading
        if state["source_error"] is not None:
            raise state["source_error"]
        # CANCELLED: the server's, on a stream opened as its drain began.
        retriable = status in (grpc.StatusCode.OK, grpc.StatusCode.UNAVAILABLE,
                               grpc.StatusCode.CANCELLED)
        for entry in sent:
            if not retriable or entry.attempts >= client.max_attempts:
                why = "stream ended early" if status == grpc.StatusCode.OK else details
                raise ServiceError(
                    status if status != grpc.StatusCode.OK else grpc.StatusCode.UNAVAILABLE,
                    f"kmt-server at {client.target}: batch '{entry.request.request_id}' "
                    f"unanswered after {entry.attempts} attempts: {why}")
            client.resent += 1
            requeue.append(entry)
        if not retriable:
            raise ServiceError(status, details)
        if status != grpc.StatusCode.OK and not answered:
            self.failed_streams += 1
            if self.failed_streams >= client.max_attempts:
                raise ServiceError(status, f"kmt-server at {client.target}: "
                                           f"{self.failed_streams} streams in a row failed "
                                           f"without an answer: {details}")
        self.retry = sorted(self.retry + requeue, key=lambda e: e.index)


class _Session:
    """Client.session(): one compiled stream for calls made one at a time."""

    def __init__(self, client):
        self._client = client
        self._compiled = None  # kmt._driver.Session, opened by the first call

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.close()

    def close(self):
        if self._compiled is not None:
            self._compiled.close()
            self._compiled = None

    def call(self, request):
        """The response to one request, as Client.stream() would yield it."""
        check_not_forked()
        client = self._client
        compiled, compiled_error = client._compiled_client()
        if compiled is None:
            answers = []
            client.cluster_each([request], answers.append)
            return answers[0]
        if self._compiled is None:
            self._compiled = compiled.session()
        with client._compiled_call(compiled, compiled_error):
            data = self._compiled.send(_compiled_request(request))
        response = pb.ClusterResponse.FromString(data)
        _raise_if_failed(response)
        _check_offset(request, response)
        return response


def _too_large(details, max_message_bytes):
    """gRPC's "message larger than max" with what to do instead."""
    return (f"{details}: one request carries at most max_message_bytes = "
            f"{max_message_bytes / (1 << 20):g} MiB (and the server's --max_message_bytes). "
            "For one clustering of more points: kmt.KMeans (a resident fit when X exceeds one "
            "request), kmt.fit_resident, or Client.fit(points, k, batch_size=...); for "
            "independent batches: Client.cluster_batches(kmt.batches(points, batch_size), k)")


class Client:
    """One channel to a server, "host:port" with no scheme (or to several:
    "dns:///host:port" or "ipv4:a:p,b:q" with round-robin over every
    address); None: $KMT_SERVER, else localhost:50051.

    `timeout` is the deadline in seconds of each call (each stream of
    cluster_batches, each models()); None: none. `tls`, `ca`, `cert`, `key`
    and `server_name` are as in channel(). `max_attempts` sends of one batch
    on UNAVAILABLE, the first included; `max_pushbacks` times one batch is
    sent again after the server refused it RESOURCE_EXHAUSTED with a retry
    pushback (its budget of requests held was full), each after the pause
    the server asked for, before the refusal is the answer;
    `window` batches in flight on one stream; `batches_per_stream` before a
    stream ends and the next is balanced anew. `raw=False` sends and reads
    repeated fields instead of raw bytes (for servers that predate them)."""

    def __init__(self, target=None, max_message_bytes=MAX_MESSAGE_BYTES, timeout=None, *,
                 tls=False, ca=None, cert=None, key=None, server_name=None, max_attempts=3,
                 window=8, batches_per_stream=64, raw=True, max_pushbacks=8):
        check_not_forked()
        if max_pushbacks < 0:
            raise ValueError(f"max_pushbacks {max_pushbacks} is negative")
        if max_attempts < 1 or window < 1 or batches_per_stream < 1:
            raise ValueError(f"max_attempts {max_attempts}, window {window}, batches_per_stream "
                             f"{batches_per_stream}: each must be at least 1")
        self.target = server_target(target)
        self.max_message_bytes = max_message_bytes
        self.timeout = timeout
        self.max_attempts = max_attempts
        self.max_pushbacks = max_pushbacks
        self.window = window
        self.batches_per_stream = batches_per_stream
        self.raw = raw
        # Batches sent again after UNAVAILABLE or a pushback, over this client's life.
        self.resent = 0
        self.security = compiled_security(tls, ca, cert, key, server_name)
        # (kmt._driver.Client, its error type), made by the first cluster_each
        self._compiled = None
        self._compiled_lock = threading.Lock()
        self.channel = channel(self.target, options=[
            ("grpc.max_receive_message_length", max_message_bytes),
            ("grpc.max_send_message_length", max_message_bytes),
            ("grpc.lb_policy_name", "round_robin")],
            tls=tls, ca=ca, cert=cert, key=key, server_name=server_name)
        self.stub = rpc.KMeansTransformerStub(self.channel)
        # Cluster with WireRequests as well as messages.
        self.cluster_call = self.channel.stream_stream(
            _CLUSTER_METHOD, request_serializer=_serialize_request,
            response_deserializer=pb.ClusterResponse.FromString)

    def close(self):
        self.channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.close()

    def models(self):
        """The served models (kmt.v1.ModelInfo messages)."""
        check_not_forked()
        try:
            return list(self.stub.ListModels(pb.ListModelsRequest(), timeout=self.timeout).models)
        except grpc.RpcError as e:
            raise ServiceError(e.code(), f"kmt-server at {self.target}: {e.details()}") from e

    def request(self, points, k, model="lloyd-onehot", iterations=20, init=None, seed=1,
                centers=None, weights=None, parameters=None, request_id="", **fields):
        """A ClusterRequest for an (n, d) array. `init` is a key of INITS or
        scikit-learn's 'k-means++'; None leaves it to the model's default
        (ModelInfo.default_init).
        `centers` (k, d) are given initial centers, `weights` (n,) per-point
        weights, `parameters` the algorithm's parameters by name, as
        ModelInfo.parameters names them ({"beta": 2.0}). `fields` are any
        other request fields: return_trajectory, tol, n_init, guard (a
        learned model's guarded form), points_offset, ... Float64 points
        send every array (points_offset too) as float64, to be clustered in
        double; other points send them as float32, but for float16 points,
        which go as float16 and are clustered in float32."""
        wire = self.wire_request(points, k, model=model, iterations=iterations, init=init,
                                 seed=seed, centers=centers, weights=weights,
                                 parameters=parameters, request_id=request_id, **fields)
        return wire.to_message()

    def wire_request(self, points, k, model="lloyd-onehot", iterations=20, init=None, seed=1,
                     centers=None, weights=None, parameters=None, request_id="", **fields):
        """The same request as request() as a WireRequest, which stream()
        sends with one copy of each array: what the client's own calls
        send."""
        sparse = is_sparse(points)
        if not sparse:
            points = np.asarray(points)
        if len(points.shape) != 2:
            raise ValueError(f"points has shape {points.shape}, expected (n, d)")
        for name in ("beta", "tau", "gamma"):
            if name in fields:
                raise TypeError(f"{name} is an algorithm parameter: pass "
                                f"parameters={{'{name}': ...}}")
        if centers is not None:
            init = "given"
        if init is not None:
            hint = ("k-means|| runs over resident shards (kmt.fit_resident, "
                    "kmt.KMeans(init='k-means||')), not in one request"
                    if INIT_ALIASES.get(init, init) == "kmeans||" else "")
            fields["init"] = INITS[init_name(init, INITS, hint)]
        r = pb.ClusterRequest(request_id=request_id, model=model, n=points.shape[0],
                              d=points.shape[1], k=k, iterations=iterations, seed=seed,
                              raw_response=self.raw, **fields)
        if parameters:
            r.parameters.update(parameters)
        arrays = []
        payloads = [("points", points), ("centers", centers), ("weights", weights)]
        wide = points.dtype.kind == "f" and points.dtype.itemsize == 8
        offset = None
        if wide and len(r.points_offset):
            # The offset as given, not the message's float32 copy of it.
            offset = np.asarray(fields["points_offset"], dtype=np.float64)
            r.ClearField("points_offset")
        kind, dtype = "f32", FLOAT32
        if wide and self.raw:
            # Float64 points: every payload float64, clustered in double.
            kind, dtype = "f64", FLOAT64
            payloads.append(("points_offset", offset))
        elif offset is not None:
            payloads[0] = ("points", points - offset)  # in double, as the server would
        if sparse:
            # Their nonzeros (points_csr), unshifted: shifting would fill
            # the rows.
            if offset is not None or len(r.points_offset):
                raise ValueError("sparse points take no points_offset: shifting would fill "
                                 "their rows")
            indptr, indices, values = csr_arrays(points, dtype)
            csr = r.points_csr
            csr.indptr_i64 = np.asarray(indptr, dtype="<i8").tobytes()
            csr.indices_i32 = np.asarray(indices, dtype=INT32).tobytes()
            if kind == "f64":
                csr.values_f64, csr.float64 = values.tobytes(), True
            else:
                csr.values_f32 = values.tobytes()
            payloads[0] = ("points", None)
        for name, values in payloads:
            if values is None:
                continue
            if self.raw and name == "points" and values.dtype == np.float16:
                # Sent as they are (2 bytes a value): the server widens each
                # to float32 exactly and fits in float32.
                arrays.append(("points_f16", np.ascontiguousarray(values, dtype=FLOAT16)))
            elif self.raw:
                arrays.append((f"{name}_{kind}", np.ascontiguousarray(values, dtype=dtype)))
            else:
                getattr(r, name).extend(np.ascontiguousarray(values, dtype=np.float32).ravel())
        return WireRequest(r, arrays)

    def stream(self, requests):
        """Sends ClusterRequests or WireRequests (any iterable, read as the
        stream needs them) and yields the responses in order, UNAVAILABLE retried; raises
        ClusterError for a failed batch and ServiceError for a call that
        retries could not cure (DEADLINE_EXCEEDED after `timeout`, ...).
        Runs in kmt's compiled client (cluster_each, on a thread of its
        own, at most `window` responses ahead of the caller) where the
        package has it; else through gRPC's Python API. A caller that stops
        early waits for the batches in flight to be answered."""
        check_not_forked()
        compiled, _ = self._compiled_client()
        if compiled is None:
            for r in _FallbackCall(self, requests).responses():
                _raise_if_failed(r)
                yield r
            return
        yield from self._compiled_stream(requests)

    def _compiled_stream(self, requests):
        """stream() on the compiled client: cluster_each runs on a thread and
        hands each response over through a queue of `window`."""
        answers = queue.Queue(maxsize=max(1, self.window))
        closed = threading.Event()  # set once the caller stops reading
        end, failure = object(), []

        def put(item):
            """Whether `item` went into the queue before the caller stopped."""
            while not closed.is_set():
                try:
                    answers.put(item, timeout=0.05)
                    return True
                except queue.Full:
                    pass
            return False

        def deliver(response):
            if not put(response):
                raise _StreamClosed()

        def run():
            try:
                self.cluster_each(requests, deliver)
            except _StreamClosed:
                pass
            except BaseException as e:  # the caller's to see, in order
                failure.append(e)
            finally:
                put(end)

        worker = threading.Thread(target=run, name="kmt-stream", daemon=True)
        worker.start()
        try:
            while (r := answers.get()) is not end:
                yield r
        finally:
            closed.set()
            worker.join()
        if failure:
            raise failure[0]

    def cluster_each(self, requests, on_response):
        """Sends ClusterRequests or WireRequests (any iterable, read as the
        stream needs them) and calls `on_response(response)` for each, in
        request order; raises as stream() does, and what `on_response` or
        the requests raise. Runs the stream in kmt's compiled client
        (kmt._driver) where the package has it: the requests and responses
        are then all the Python the stream costs."""
        check_not_forked()
        compiled, compiled_error = self._compiled_client()
        if compiled is None:
            for response in self.stream(requests):
                on_response(response)
            return
        source, sent = iter(requests), collections.deque()

        def next_request():
            request = next(source, None)
            if request is None:
                return None
            sent.append(request)
            return _compiled_request(request)

        def deliver(data):
            request, response = sent.popleft(), pb.ClusterResponse.FromString(data)
            _raise_if_failed(response)
            _check_offset(request, response)
            on_response(response)
        with self._compiled_call(compiled, compiled_error):
            compiled.cluster(next_request, deliver)

    def session(self):
        """A context for requests sent one at a time, each after the answer
        to the one before (a mini-batch's steps): its `call(request)` sends a
        ClusterRequest or WireRequest and returns the response, raising as
        stream() does. With kmt's compiled client the calls share one stream,
        opened by the first and ended with the context (or close()), so each
        costs a round trip rather than a stream of its own; UNAVAILABLE is
        retried on a fresh stream. Without it, each call is a stream."""
        return _Session(self)

    @contextlib.contextmanager
    def _compiled_call(self, compiled, compiled_error):
        """Counts the compiled client's resends into this client's and
        raises its errors as ServiceError."""
        resent = compiled.resent
        try:
            yield
        except compiled_error as e:
            code, details = status_code(e.args[0]), e.args[1]
            if code == grpc.StatusCode.RESOURCE_EXHAUSTED and "larger than max" in details:
                details = _too_large(details, self.max_message_bytes)
            raise ServiceError(code, f"kmt-server at {self.target}: {details}") from None
        finally:
            self.resent += compiled.resent - resent

    def _compiled_client(self):
        """kmt._driver.Client for this client's settings and the errors it
        raises; (None, None) where the package lacks the compiled extension,
        or where KMT_COMPILED_STREAMS is 0."""
        if os.environ.get("KMT_COMPILED_STREAMS") == "0":
            return None, None
        with self._compiled_lock:
            if self._compiled is None:
                try:
                    from . import _driver
                except ImportError:
                    return None, None
                extension_used()
                self._compiled = _driver.Client(
                    self.target, max_message_bytes=self.max_message_bytes,
                    max_attempts=self.max_attempts, max_pushbacks=self.max_pushbacks,
                    window=self.window,
                    batches_per_stream=self.batches_per_stream, timeout=self.timeout,
                    **self.security), _driver.Error
            return self._compiled

    @staticmethod
    def result(r, d, k, all_distances=False):
        """A ClusterResponse of a batch in d dimensions with k clusters as a
        Result; `all_distances`: the request asked for DISTANCES_ALL. Raw
        arrays are views of the response's bytes (read-only)."""
        labels = (np.frombuffer(r.labels_i32, dtype=INT32) if r.labels_i32
                  else np.asarray(r.labels, dtype=np.int32))
        distances = _floats(r.distances_f32, r.distances_f64, r.distances)
        return Result(request_id=r.request_id, labels=labels,
                      centers=_floats(r.centers_f32, r.centers_f64, r.centers).reshape(-1, d),
                      objective=r.objective,
                      layer_objectives=np.asarray(r.layer_objectives, dtype=np.float64),
                      iterations_run=r.iterations_run, model=r.model, converged=r.converged,
                      convergence=r.convergence,
                      distances=(distances.reshape(-1, k) if all_distances else distances)
                      if distances.size else None,
                      restart_objectives=np.asarray(r.restart_objectives, dtype=np.float64),
                      best_restart=r.best_restart,
                      guard_learned_layers=r.guard_learned_layers,
                      guard_lloyd_layers=r.guard_lloyd_layers,
                      guard_lloyd_answered=r.guard_lloyd_answered,
                      model_version=r.model_version)

    def cluster(self, points, k, **options):
        """Clusters one batch; options as in request()."""
        request = self.wire_request(points, k, request_id="batch-0", **options)
        answers = []
        self.cluster_each([request], answers.append)
        return self.result(answers[0], request.message.d, k,
                           options.get("return_distances") == pb.DISTANCES_ALL)

    def cluster_batches(self, blocks, k, **options):
        """Clusters every array of `blocks` (any iterable, e.g. batches())
        as its own task on one stream, yielding a Result per block in order.
        Blocks are read as the stream needs them, so memory stays bounded."""
        dims = []
        all_distances = options.get("return_distances") == pb.DISTANCES_ALL

        def requests():
            for i, block in enumerate(blocks):
                r = self.wire_request(block, k, request_id=f"batch-{i}", **options)
                dims.append(r.message.d)
                yield r
        for i, r in enumerate(self.stream(requests())):
            yield self.result(r, dims[i], k, all_distances)

    def fit(self, points, k, iterations=20, batch_size=4096, init=None, seed=1,
            centers=None, sample_size=65536, model="lloyd-onehot"):
        """Exact Lloyd's over all of `points` ((n, d), any n): initial centers
        given, or chosen by the server's `init` (of `model`) on a uniform
        sample of `sample_size` rows; then up to `iterations` updates,
        stopping early once one leaves the centers unchanged; then the
        labels under the final centers. It runs as kmt.fit_resident runs a
        job, in the compiled driver on this client's replicas: the points
        loaded once as resident shards, `batch_size` rows a chunk. Float64
        points on a raw client run in double, the centers kept in double;
        otherwise in float32."""
        from .resident import fit_resident
        n, d = points.shape
        if batch_size < 1:
            raise ValueError(f"batch_size {batch_size} is not positive")
        if centers is None:
            rows = np.random.default_rng(seed).choice(n, size=min(n, sample_size), replace=False)
            centers = self.cluster(points[np.sort(rows)], k, model=model, iterations=0,
                                   init=init, seed=seed).centers
        dtype = np.float64 if self.raw and points.dtype == np.float64 else np.float32
        points = np.asarray(points, dtype=dtype)
        centers = np.array(centers, dtype=dtype).reshape(k, d)
        result = fit_resident(self.target, points, k, centers=centers, iterations=iterations,
                              chunk_bytes=batch_size * d * points.itemsize, timeout=self.timeout,
                              **self.security)
        return FitResult(labels=result.labels, centers=result.centers.astype(dtype),
                         objective=result.objective, passes=result.iterations_run)
