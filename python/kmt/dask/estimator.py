"""kmt.dask.KMeans: kmt.KMeans's parameters and results for a dask array on a
dask.distributed cluster. The workers stream their own blocks to the
replicas as resident shards (kmt.dask.job), each iteration is one small task
per worker, and the initialisation, Lloyd's update, the tolerance, the
relocation of empty clusters and the restarts are the resident driver's
(client/resident_job.h, through kmt._driver), run by the client on the
summed statistics: from the same initial centers, the result is Lloyd's on
all points in one process, and kmt.KMeans's and the CLI's. labels_ stays
on the workers as a dask array; predict, transform and score map the
blocks through the service. A dask array of scipy.sparse blocks is loaded
as sparse shards (their nonzeros) and not shifted, as kmt.KMeans fits
scipy.sparse X."""
import time
from numbers import Number

import dask
import dask.array as da
import distributed
import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_random_state
from sklearn.utils.sparsefuncs import mean_variance_axis
from sklearn.utils.validation import check_is_fitted

from .. import kmeans as _kmeans
from .. import resident
from ..client import pb
from ..served import (check_model_parameters, invalid_input_as_value_error, keep_parameters,
                      model_info, server_of, tls_options)
from .job import DaskJob, is_sparse

# Bytes of the points (float32 or float64; a sparse shard's offsets,
# columns and values) in one chunk of a shard on the wire.
CHUNK_BYTES = 4 << 20


def dask_points(X):
    """X as a dask array chunked by rows only, float32 or float64 (other
    numbers become float64), and its feature names (a dask DataFrame's
    columns) or None."""
    names = None
    if hasattr(X, "to_dask_array") and hasattr(X, "columns"):
        names = np.asarray(X.columns, dtype=object)
        X = X.to_dask_array(lengths=True)
    if not isinstance(X, da.Array):
        raise TypeError(f"kmt.dask.KMeans takes a dask array or a dask DataFrame, not "
                        f"{type(X).__name__}; kmt.KMeans takes data in memory.")
    if X.ndim != 2:
        raise ValueError(f"Expected 2D array, got {X.ndim}D array instead.")
    if X.dtype.kind not in "fiub":
        raise ValueError(f"dtype='numeric' is not compatible with arrays of {X.dtype}")
    if X.dtype not in (np.float32, np.float64):
        X = X.astype(np.float64)
    if X.shape[1] == 0:
        raise ValueError(f"Found array with 0 feature(s) (shape={X.shape}) while a minimum of 1 "
                         "is required.")
    if len(X.chunks[1]) > 1:
        X = X.rechunk({1: -1})
    return X, names


def dask_weights(sample_weight, X):
    """sample_weight (None, a number, an array or a dask array of X's
    length) as a dask array chunked as X's rows, or None."""
    if sample_weight is None:
        return None
    known = not np.isnan(X.shape[0])
    if isinstance(sample_weight, Number):
        if not known:
            raise ValueError("a scalar sample_weight needs X's chunk sizes "
                             "(X.compute_chunk_sizes())")
        return da.full(X.shape[0], sample_weight, chunks=(X.chunks[0],), dtype=X.dtype)
    if not isinstance(sample_weight, da.Array):
        sample_weight = np.asarray(sample_weight)
    if sample_weight.ndim != 1:
        raise ValueError("Sample weights must be 1D array or scalar")
    if not known or np.isnan(sample_weight.shape[0]):
        if len(sample_weight.chunks[0]) != len(X.chunks[0]):
            raise ValueError(f"sample_weight has {len(sample_weight.chunks[0])} blocks, X "
                             f"{len(X.chunks[0])}: with unknown chunk sizes they must match")
        return sample_weight
    if sample_weight.shape[0] != X.shape[0]:
        raise ValueError(f"sample_weight.shape == {sample_weight.shape}, expected "
                         f"{(X.shape[0],)}!")
    if isinstance(sample_weight, da.Array):
        return sample_weight.rechunk((X.chunks[0],))
    return da.from_array(sample_weight, chunks=(X.chunks[0],))


def _predict_block(block, served):
    if block.shape[0] == 0:
        return np.empty(0, dtype=np.int32)
    return served.predict(block)


def _transform_block(block, served):
    if block.shape[0] == 0:
        return np.empty((0, served.n_clusters), dtype=block.dtype)
    return served.transform(block)


def _nearest_block(block, served):
    """Squared distances of the rows to their nearest centers."""
    if block.shape[0] == 0:
        return np.empty(0, dtype=np.float64)
    rows = served._check_test_data(block)
    return served._assign(rows, pb.DISTANCES_NEAREST, labels=False)[1].astype(np.float64)


def _first_not_finite(block):
    """[[rows, the first row not all finite or -1, whether it holds NaN]]."""
    bad = np.flatnonzero(~np.isfinite(block).all(axis=1))
    first = int(bad[0]) if len(bad) else -1
    return np.array([[block.shape[0], first, first >= 0 and np.isnan(block[first]).any()]])


def not_finite(X):
    """The ValueError of scikit-learn's finiteness check for a dask array
    whose column means are not finite, naming the first row at fault (one
    more pass over X): raised once by the client, not by each block's
    task."""
    found = X.map_blocks(_first_not_finite, chunks=((1,) * X.numblocks[0], (3,)),
                         dtype=np.int64).compute()
    row = 0
    for rows, first, nan in found:
        if first >= 0:
            what = "NaN" if nan else f"infinity or a value too large for {X.dtype!r}"
            return ValueError(f"Input X contains {what} (row {row + first}).")
        row += rows
    return ValueError("Input X contains infinity or a value too large: its column means are "
                      "not finite.")


def _sparse_moments(block):
    """Of a scipy.sparse block: (rows, column means, column sums of squared
    deviations from them, None), both float64 (None without rows); or (rows,
    None, None, (row, column, whether NaN)) naming its first value that is
    not finite."""
    block = block.tocsr() if sp.issparse(block) else sp.csr_matrix(block)
    n = block.shape[0]
    finite = np.isfinite(block.data)
    if not finite.all():
        at = int(np.argmin(finite))
        row = int(np.searchsorted(block.indptr, at, side="right")) - 1
        return n, None, None, (row, int(block.indices[at]), bool(np.isnan(block.data[at])))
    if n == 0:
        return 0, None, None, None
    indptr, indices, values = resident.csr_arrays(block, np.float64)
    mean, variance = mean_variance_axis(sp.csr_matrix((values, indices, indptr),
                                                      shape=block.shape), axis=0)
    return n, mean, variance * n, None


def _merged_moments(first, then):
    """The _sparse_moments of two runs of rows, `first`'s before `then`'s,
    as one run's (Chan, Golub and LeVeque's update)."""
    (n_first, mean, squares, bad), (n_then, mean_then, squares_then, bad_then) = first, then
    n = n_first + n_then
    if bad is None and bad_then is not None:
        bad = (n_first + bad_then[0], *bad_then[1:])
    if bad is not None:
        return n, None, None, bad
    if n_first == 0 or n_then == 0:
        return first if n_then == 0 else then
    delta = mean_then - mean
    return (n, mean + delta * (n_then / n),
            squares + squares_then + delta * delta * (n_first * n_then / n), None)


def sparse_statistics(X, *more):
    """One pass over a dask array X of sparse blocks: the mean of its
    columns' variances (scikit-learn's tolerance's, as mean_variance_axis
    gives them for the whole of X: the blocks' moments merged pairwise on
    the workers, so that the client receives one run's), and the values of
    the dask collections `more`, computed with it. A value that is not
    finite is scikit-learn's ValueError, naming its row and column, raised
    once here, before any block is loaded."""
    runs = [dask.delayed(_sparse_moments)(b) for b in X.to_delayed(optimize_graph=False).ravel()]
    while len(runs) > 1:
        runs = [dask.delayed(_merged_moments)(*runs[i:i + 2]) if i + 1 < len(runs) else runs[i]
                for i in range(0, len(runs), 2)]
    (n, _, squares, bad), *more = dask.compute(runs[0], *more)
    if bad is not None:
        row, column, nan = bad
        what = "NaN" if nan else f"infinity or a value too large for {X.dtype!r}"
        raise ValueError(f"Input X contains {what} (row {row}, column {column}).")
    return (float(np.mean(squares / n)) if n else 0.0), more


def _client():
    try:
        return distributed.get_client()
    except ValueError as e:
        raise ValueError("kmt.dask.KMeans runs on a dask.distributed cluster: make a "
                         "distributed.Client first") from e


class KMeans(_kmeans.KMeans):
    """kmt.KMeans for a dask array on a dask.distributed cluster (the
    process's default Client): the same parameters but streams_per_server
    (each non-empty block is one shard) and guard (Lloyd's only), attributes
    and results; `fit` takes a dask array (n, d) chunked by rows, or a dask
    DataFrame, and sample_weight as a dask array, an array or a number.
    A dask array of scipy.sparse blocks (CSR; other formats converted once
    per block) is loaded as sparse shards, its nonzeros, never made dense
    and not shifted, as kmt.KMeans takes scipy.sparse X.

    The workers load their own blocks on the replicas `server` names (a
    list "ipv4:a:p,b:q", or "dns:///name:port" for every address of a
    headless Service), block i on replica i mod R; every iteration sends only
    the centers, one task per worker. A worker that dies costs its blocks a
    reload and the step a repetition, and a replica that dies the same on
    another replica: the result does not change. init 'k-means||' (the
    default, as dask-ml's) is k-means‖ over the shards, 'k-means++' the
    service's greedy k-means++ over all points (either the same as
    kmt.KMeans's for the same seed), 'random' and given centers as
    kmt.KMeans.

    labels_ is a dask array held by the workers (chunked as X's rows);
    predict, transform and score take dask arrays (mapped over their blocks,
    each through the service) or data in memory (as kmt.KMeans).
    fit_seconds_: the fit's time by phase (statistics: X's mean and
    variance, load, init, iterations, labels).
    """

    _parameter_constraints = {name: constraint for name, constraint
                              in _kmeans.KMeans._parameter_constraints.items()
                              if name not in ("streams_per_server", "guard")}

    def __init__(self, n_clusters=8, *, init="k-means||", n_init="warn", max_iter=300, tol=1e-4,
                 verbose=0, random_state=None, copy_x=True, algorithm="lloyd",
                 server=None, model="lloyd-onehot", tls=False, ca=None, cert=None,
                 key=None, server_name=None, timeout=None, batch_size=None,
                 empty_clusters="relocate-farthest"):
        keep_parameters(self, locals())

    def _guard(self):
        return False  # Lloyd's only

    def _iteration_done(self, t, objective, shift, convergence):
        """After each iteration (kmt.resident's on_iteration): the verbose
        lines."""
        if self.verbose:
            _kmeans.resident_progress(self._absolute_tol)(t, objective, shift, convergence)

    def _fit(self, X, sample_weight, distances):
        client = _client()
        self._validate_params()
        X, names = dask_points(X)
        weights = dask_weights(sample_weight, X)
        self._check_params_vs_input(X)
        info = model_info(self, self.model)
        parameters = check_model_parameters(self, info, self._model_parameters())
        if not _kmeans.resident_capable(info, parameters):
            raise ValueError(f"kmt.dask.KMeans runs Lloyd's only, not the server's model "
                             f"'{info.name}'.")
        self._note_model(info)
        k = self.n_clusters
        log = (lambda line: print(f"kmt.dask: {line}")) if self.verbose > 1 else None
        seconds = dict.fromkeys(("statistics", "load", "init", "iterations", "labels"), 0.0)
        started = time.perf_counter()
        # One pass over X: its mean is subtracted from the points sent, as
        # kmt.KMeans and scikit-learn do (not from sparse points, which it
        # would fill), and its variance scales tol. Bad values are found
        # here, so that the fit fails once, not in each block's task.
        weight_checks = (() if weights is None
                         else (da.isfinite(weights).all(), (weights < 0).any()))
        if is_sparse(X):
            offset = None
            variance, weight_checks = sparse_statistics(X, *weight_checks)
        else:
            offset, variance, *weight_checks = dask.compute(
                X.mean(axis=0), X.var(axis=0).mean() if self.tol else 0.0, *weight_checks)
            offset = np.asarray(offset, dtype=X.dtype)
            if not np.isfinite(offset).all():
                raise not_finite(X)
        if weight_checks and not weight_checks[0]:
            raise ValueError("Input sample_weight contains NaN or infinity.")
        if weight_checks and weight_checks[1]:
            raise ValueError("Negative values in data passed to `sample_weight`")
        self._absolute_tol = float(variance * self.tol)
        random_state = check_random_state(self.random_state)
        starts = self._starts(X, offset, random_state)
        seed = int(random_state.randint(np.iinfo(np.int32).max))
        now = time.perf_counter()
        seconds["statistics"], started = now - started, now
        job = DaskJob(client, X, weights, offset, resident.replica_addresses(server_of(self)),
                      CHUNK_BYTES, self.timeout, tls_options(self), log)
        try:
            with invalid_input_as_value_error():
                n = job.load_all()
                if n < k:
                    raise ValueError(f"n_samples={n} should be >= n_clusters={k}.")
                if weights is not None and not job.total_weight > 0:
                    raise ValueError("sample_weight is zero everywhere: no point would count")
                now = time.perf_counter()
                seconds["load"], started = now - started, now
                best = self._restarts(job, starts, offset, seed, seconds, log)
        finally:
            job.close()
        result, labels, counts = best
        pieces, held = [], iter(labels)
        for count in job.block_counts:
            pieces.append(da.from_delayed(next(held), shape=(count,), dtype=np.int32) if count
                          else da.zeros((0,), dtype=np.int32))
        centers = result.centers.astype(X.dtype)
        if offset is not None:
            centers += offset
        self._keep_fit((centers, da.concatenate(pieces), float(result.objective),
                        int(result.iterations_run), None), distinct=int((counts > 0).sum()))
        self.n_features_in_ = X.shape[1]
        if names is not None:
            self.feature_names_in_ = names
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        self.fit_seconds_ = seconds
        return None

    def _restarts(self, job, starts, offset, seed, seconds, log):
        """The driver's run over the shards, each start in turn; the best
        one's result, its label futures and its points per cluster."""
        random = starts is None and self.init == "random"
        options = resident.job_options(self.n_clusters, job.spec.d, self.init if starts is None
                                       else "kmeans++", starts, offset, self.max_iter, seed,
                                       self.empty_clusters, self._n_init,
                                       resident.job_dtype(job.dtype))
        answer = resident.driver_errors(
            resident.driver().drive, job, job.spec.d, self.n_clusters,
            weights=job.all_weights() if random and job.weighted else None,
            weighted=job.weighted, sparse=job.spec.sparse, center_tol=self._absolute_tol,
            labels=True, iteration_objectives=bool(self.verbose), log=log,
            on_iteration=self._iteration_done, **options)
        result = resident.result_of(answer)
        seconds["init"] += answer["init_seconds"]
        seconds["labels"] += answer["labels_seconds"]
        seconds["iterations"] += sum(answer["iteration_seconds"])
        return result, job.label_sets[result.best_restart], result.counts

    def _served(self):
        """kmt.KMeans with this fit's centers, to assign points in memory (on
        the workers too, so with the server this process reaches)."""
        served = _kmeans.KMeans(**{**self.get_params(), "server": server_of(self)})
        for name in ("cluster_centers_", "n_features_in_", "_n_features_out", "_unit_norm",
                     "_offset_used"):
            setattr(served, name, getattr(self, name))
        return served

    def _dask_test_data(self, X):
        X, _ = dask_points(X)
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features, but {type(self).__name__} is "
                             f"expecting {self.n_features_in_} features as input.")
        return X

    def predict(self, X, sample_weight=None):
        """The index of each sample's nearest center: a dask array for a
        dask array (its blocks through the service), else as kmt.KMeans."""
        check_is_fitted(self)
        if not isinstance(X, da.Array):
            return self._served().predict(X, sample_weight)
        return self._dask_test_data(X).map_blocks(_predict_block, self._served(), drop_axis=1,
                                                  dtype=np.int32)

    def transform(self, X):
        """Euclidean distances to every center, (n, k): a dask array for a
        dask array, else as kmt.KMeans."""
        check_is_fitted(self)
        if not isinstance(X, da.Array):
            return self._served().transform(X)
        X = self._dask_test_data(X)
        return X.map_blocks(_transform_block, self._served(),
                            chunks=(X.chunks[0], (self.n_clusters,)), dtype=X.dtype)

    def score(self, X, y=None, sample_weight=None):
        """Minus the (weighted) sum of squared distances to the nearest
        centers."""
        check_is_fitted(self)
        if not isinstance(X, da.Array):
            return self._served().score(X, sample_weight=sample_weight)
        X = self._dask_test_data(X)
        squared = X.map_blocks(_nearest_block, self._served(), drop_axis=1, dtype=np.float64)
        weights = dask_weights(sample_weight, X)
        total = squared.sum() if weights is None else (squared * weights).sum()
        return -float(total.compute())
