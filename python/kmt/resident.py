"""Whole-dataset clustering on resident shards (the Job RPC), from Python:
the points are split into contiguous shards, each loaded once on one
replica's Job stream (several per replica with `streams_per_server`) and
kept there for the job, and the driver the CLI runs (client/resident_job.h,
through the compiled extension kmt._driver) seeds, iterates and relocates
over them. When a stream fails (its replica died or restarted) the shard is
loaded on another replica and the step is asked again with the same
centers, so the result does not change. With the same seed, the
initialisation chooses the centers the server's chooses on all the points in
one batch, and `kmt cluster --mode=whole` chooses.

scikit-learn's rules are options: per-point weights, its tolerance (the
total squared center shift against tol times the mean variance), its
relocation of empty clusters to the points farthest from their centers, and
n_init starts.

Float64 points run as a float64 job: shards held and computed in double on
the replicas, centers carried in double, as one float64 Cluster request
computes them; float32 points (and integers) as a float32 one.

A scipy.sparse matrix is loaded as sparse shards (ShardChunk.points_csr):
its CSR arrays, read in place a chunk at a time, travel and are held as
their nonzeros, never made dense, and are never shifted (as scikit-learn
does not center sparse data).
"""
import dataclasses

import numpy as np
import scipy.sparse as sp

from .client import (ServiceError, check_not_forked, compiled_security, csr_arrays, extension_used,
                     init_name, server_target, status_code)


@dataclasses.dataclass
class ResidentResult:
    centers: np.ndarray        # (k, d) final centers: the job's dtype, or the offset's
    labels: np.ndarray         # (n,) int32 nearest final center, if asked; else None
    objective: float           # of the final centers, over all points
    initial_objective: float   # of the initial centers
    objectives: list           # after each iteration
    iterations_run: int
    shards: int                # shards the points were split into
    shard_moves: int           # shards loaded again on another replica after a failure
    convergence: int = 0       # why the iterations stopped early: a kmt.pb.ConvergenceReason
    relocations: int = 0       # empty clusters moved to far points (relocate-farthest)
    restart_objectives: list = dataclasses.field(default_factory=list)  # with n_init > 1
    best_restart: int = 0
    counts: np.ndarray = None  # (k,) points nearest each final center


def driver():
    """The compiled driver, kmt._driver; an ImportError that says how to get
    it where this installation lacks it."""
    check_not_forked()
    try:
        from . import _driver
    except ImportError as e:
        raise ImportError(
            "resident jobs (kmt.fit_resident, kmt.KMeans beyond one request, kmt.dask) run "
            "kmt's compiled driver, kmt._driver, which this installation of kmt lacks: install "
            "kmt with scripts/install-python-client.sh, which builds it with the project") from e
    extension_used()
    return _driver


def driver_errors(call, *args, **kwargs):
    """`call` of the driver, its errors as ServiceError (the status code and
    message of the step or load that failed)."""
    error = driver().Error
    try:
        return call(*args, **kwargs)
    except error as e:
        code, message = e.args
        raise ServiceError(status_code(code), message) from None


def replica_addresses(target=None):
    """The replica addresses of a target: "host:port", a list "ipv4:a:p,b:q",
    or "dns:///name:port" resolved to every address it has; None: as
    kmt.Client's default ($KMT_SERVER, else localhost:50051)."""
    target = server_target(target)
    if target.startswith("dns:///") and ":" not in target[7:]:
        raise ValueError(f"'{target}' has no port")
    return driver_errors(driver().replica_addresses, target)


def result_of(answer, offset=None):
    """A ResidentResult of the driver's answer (a dict), its centers moved
    back by `offset`."""
    centers = answer["centers"]
    if offset is not None:
        centers = centers.astype(offset.dtype) + offset
    return ResidentResult(
        centers=centers, labels=answer["labels"], objective=answer["objective"],
        initial_objective=answer["initial_objective"], objectives=answer["objectives"],
        iterations_run=answer["iterations_run"], shards=answer["shards"],
        shard_moves=answer["shard_moves"], convergence=answer["convergence"],
        relocations=answer["relocations"],
        restart_objectives=answer["restart_objectives"], best_restart=answer["best_restart"],
        counts=answer["counts"])


def job_dtype(dtype):
    """The dtype a job of points of `dtype` runs in: float64 for float64,
    float32 for anything else."""
    return np.dtype(np.float64) if np.dtype(dtype) == np.float64 else np.dtype(np.float32)


def job_options(k, d, init, starts, offset, iterations, seed, empty_clusters, n_init,
                dtype=np.float32):
    """The options of the driver both entry points share, checked: `init` by
    its names and aliases, `starts` (k, d) or (r, k, d) in the points' own
    coordinates, moved by `offset`; the job runs in `dtype` (job_dtype)."""
    if iterations < 0 or n_init < 1:
        raise ValueError(f"iterations {iterations}, n_init {n_init}: iterations may not be "
                         "negative, n_init must be at least 1")
    if empty_clusters not in ("keep", "relocate-farthest"):
        raise ValueError(f"empty_clusters '{empty_clusters}': expected keep or "
                         "relocate-farthest")
    init = init_name(init, ("kmeans++", "plain-kmeans++", "kmeans||", "random"))
    if starts is not None:
        starts = np.asarray(starts).reshape(-1, k, d)
        if offset is not None:
            starts = starts - offset
        starts = np.ascontiguousarray(starts, dtype=dtype)
    return dict(iterations=int(iterations), seed=int(seed) & (2 ** 64 - 1), init=init,
                float64=np.dtype(dtype) == np.float64,
                kmeans_parallel_rounds=driver().KMEANS_PARALLEL_ROUNDS,
                kmeans_parallel_oversampling=driver().KMEANS_PARALLEL_OVERSAMPLING,
                empty_clusters=empty_clusters, n_init=int(n_init), starts=starts)


def dense_rows(points, offset=None):
    """rows(first, end): points[first:end] as a dense array (a sparse matrix
    densified block by block) minus `offset` if given, in the points' dtype
    (float32 if they are integers or float16, a block at a time)."""
    def rows(first, end):
        block = points[first:end]
        if hasattr(block, "toarray"):
            block = block.toarray()
        block = np.asarray(block)
        if block.dtype.kind not in "f" or (block.dtype == np.float16 and offset is None):
            block = block.astype(np.float32)
        # Float16 minus a float32 offset is float32, widened in the one pass.
        return block if offset is None else block - offset
    return rows


def fit_resident(target, points, k, centers=None, iterations=20, tol=0.0, seed=1,
                 plain_seeding=False, labels=True, streams_per_server=1, chunk_bytes=4 << 20,
                 max_moves=3, timeout=None, log=None, *, weights=None, center_tol=None,
                 empty_clusters="keep", offset=None, init=None, n_init=1, on_iteration=None,
                 iteration_objectives=True, **tls):
    """Clusters the (n, d) `points` (an array, a memmap or a scipy.sparse
    matrix, loaded as sparse shards) on the replicas `target` names (as
    replica_addresses reads it), from `centers` (k, d) if given, else from
    `init` over all of them ("kmeans++" or "k-means++", the default, greedy;
    "plain-kmeans++" or `plain_seeding`; "kmeans||" or "k-means||", k-means‖
    as `kmt cluster --init='kmeans||'` runs it; "random"), for up to
    `iterations` Lloyd's steps: fewer once an iteration leaves the centers
    as they were, or once the total squared shift of the centers is at most
    tol times the points' mean per-dimension variance (scikit-learn's rule,
    `kmt cluster --tol`), or at most `center_tol` if that is given instead.
    `centers` of shape (r, k, d) are r starts, each run in turn.

    Float64 points (and offset) run as a float64 job, in double on the
    replicas; others as a float32 one, float16 points sent as float16 (with
    a float32 `offset` the replicas subtract). `weights` (n,) weigh the points
    (scikit-learn's sample_weight). Sparse points take no `offset`.
    `empty_clusters`: "keep" (a center without points stays) or
    "relocate-farthest" (scikit-learn's rule). `offset` (d,) is subtracted
    from every point before it is sent (the mean, for float32's precision);
    given and returned centers are the points' own coordinates. `n_init`
    runs that many initialisations from seeds seed, seed + 1, ...; of all
    runs the lowest objective is kept, and each k-means++ after the first
    loads the shards again. `on_iteration(t, objective, shift, convergence)`
    is called after each update: the objective under the centers the
    iteration started from, the total squared shift it made, and a
    pb.ConvergenceReason if the iterations stop there (else 0). Without
    `iteration_objectives` only the initial and final objectives are
    computed (the others, in `objectives` and to `on_iteration`, are NaN),
    which lets the replicas skip the points their bounds keep. `timeout`
    is each stream's deadline, `log` a function of a line of progress, `tls`
    as kmt.channel() takes it."""
    if not hasattr(points, "toarray"):
        points = np.asarray(points)
    if len(points.shape) != 2:
        raise ValueError(f"points has shape {points.shape}, expected (n, d)")
    n, d = points.shape
    if streams_per_server < 1 or not tol >= 0 or (center_tol is not None and tol > 0):
        raise ValueError(f"streams per server {streams_per_server}, tol {tol}, center_tol "
                         f"{center_tol}: streams at least 1, tol not negative, and not both "
                         "tolerances")
    if k < 1 or n < k:
        raise ValueError(f"k = {k} needs 1 <= k <= n = {n} points")
    dtype = job_dtype(points.dtype)
    options = job_options(k, d, init or ("plain-kmeans++" if plain_seeding else "kmeans++"),
                          centers, None if offset is None else np.asarray(offset), iterations,
                          seed, empty_clusters, n_init, dtype)
    if weights is not None:
        weights = np.ascontiguousarray(np.asarray(weights, dtype=dtype).reshape(-1))
        if len(weights) != n:
            raise ValueError(f"weights has {len(weights)} values for {n} points")
    if offset is not None:
        offset = np.asarray(offset)
    shift = {}
    if sp.issparse(points):
        if offset is not None:
            raise ValueError("sparse points take no offset: shifting would fill their rows")
        rows = None
        shift = dict(csr=csr_arrays(points, dtype))
    elif (not hasattr(points, "toarray") and points.dtype == np.float16
            and (offset is None or offset.dtype == np.float32)):
        # Float16 points travel as float16 (ShardChunk.points_f16), unshifted:
        # the replicas subtract the offset in float32, as this process would.
        rows = lambda first, end: points[first:end]  # noqa: E731
        shift = dict(points_type="f16", points_offset=offset)
    else:
        rows = dense_rows(points, offset)
    answer = driver_errors(
        driver().fit, replica_addresses(target), rows, n, d, k, weights=weights,
        tol=float(tol), center_tol=-1.0 if center_tol is None else float(center_tol),
        labels=bool(labels), streams_per_server=int(streams_per_server),
        chunk_bytes=int(chunk_bytes), max_moves=int(max_moves), timeout=timeout,
        **compiled_security(**tls),
        iteration_objectives=bool(iteration_objectives), log=log, on_iteration=on_iteration,
        **shift, **options)
    return result_of(answer, offset)
