"""What every kmt estimator shares: the connection to kmt-server, the served
models' descriptions, input checks as scikit-learn's, and the assignment of
points to fitted centers (predict, transform, score) as batches of
iterations=0 requests.

Connections and ListModels answers are kept per process and per settings,
never on the estimator, so an estimator pickles, clones and crosses process
boundaries (GridSearchCV's workers) as scikit-learn's do.
"""
import contextlib
import os
import threading
import warnings
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from sklearn.base import (BaseEstimator, ClassNamePrefixFeaturesOutMixin, ClusterMixin,
                          TransformerMixin)
from sklearn.utils._param_validation import Hidden, Interval, InvalidParameterError, StrOptions
from sklearn.utils.validation import (_assert_all_finite, _check_sample_weight,
                                      _is_arraylike_not_scalar, check_is_fitted)

from . import client as _client
from .resident import dense_rows

# The server's default --max_message_bytes, which with its --max_points
# (ModelInfo.max_points) bounds one request unless batch_size says otherwise.
MESSAGE_BYTES = _client.MAX_MESSAGE_BYTES
# Room in a message for everything but the per-point arrays.
MESSAGE_SLACK = 1 << 20
# The model that assigns points to given centers for predict and transform.
ASSIGN_MODEL = "lloyd-onehot"

_lock = threading.Lock()
_clients = {}
_models = {}


def server_of(estimator):
    """The target the estimator reaches: its `server`, else $KMT_SERVER, else
    localhost:50051 (kmt.Client's default)."""
    return _client.server_target(estimator.server)


def connection_settings(estimator):
    """The estimator's connection parameters as a hashable key."""
    return (server_of(estimator), bool(estimator.tls), estimator.ca, estimator.cert,
            estimator.key, estimator.server_name, estimator.timeout)


def tls_options(estimator):
    return dict(tls=bool(estimator.tls), ca=estimator.ca, cert=estimator.cert,
                key=estimator.key, server_name=estimator.server_name)


def client_for(estimator):
    """A kmt.Client for the estimator's settings, shared within the process
    (a forked child makes its own: gRPC channels do not survive fork)."""
    key = (os.getpid(), connection_settings(estimator))
    with _lock:
        found = _clients.get(key)
        if found is None:
            found = _client.Client(server_of(estimator), max_message_bytes=MESSAGE_BYTES,
                                   timeout=estimator.timeout, **tls_options(estimator))
            _clients[key] = found
        return found


def model_info(estimator, name):
    """The server's ModelInfo of model `name` (ListModels, once per process
    and settings); ValueError naming the served models if there is none."""
    key = (os.getpid(), connection_settings(estimator))
    with _lock:
        infos = _models.get(key)
    if infos is None:
        infos = {m.name: m for m in client_for(estimator).models()}
        with _lock:
            _models[key] = infos
    if name not in infos:
        raise InvalidParameterError(
            f"The 'model' parameter of {type(estimator).__name__} must be a model the server "
            f"at {server_of(estimator)} serves ({', '.join(sorted(infos))}); got '{name}'.")
    return infos[name]


def check_model_parameters(estimator, info, values):
    """Checks algorithm parameters ({name: value or None}) against the ranges
    the server gives in ModelInfo.parameters; returns those that are set."""
    known = {p.name: p for p in info.parameters}
    chosen = {}
    for name, value in values.items():
        if value is None:
            continue
        p = known.get(name)
        if p is None:
            raise InvalidParameterError(
                f"The '{name}' parameter of {type(estimator).__name__} is not read by the "
                f"server's model '{info.name}' (it reads: "
                f"{', '.join(known) if known else 'none'}).")
        above = value > p.min if p.min_exclusive else value >= p.min
        below = value < p.max if p.max_exclusive else value <= p.max
        if not (above and below):
            interval = (f"{'(' if p.min_exclusive else '['}{p.min:g}, {p.max:g}"
                        f"{')' if p.max_exclusive else ']'}")
            raise InvalidParameterError(
                f"The '{name}' parameter of {type(estimator).__name__} must be in {interval} "
                f"as the server's model '{info.name}' bounds it; got {value!r}.")
        chosen[name] = float(value)
    return chosen


@contextlib.contextmanager
def invalid_input_as_value_error():
    """Input the server refused as invalid raises the ValueError scikit-learn
    raises for bad input; any other failure stays a kmt.ServiceError."""
    try:
        yield
    except _client.ServiceError as e:
        if e.code.name == "INVALID_ARGUMENT":
            raise ValueError(f"kmt-server: {e.message}") from e
        raise


def same_clustering(a, b):
    """Whether two labelings are the same partition up to renaming."""
    pairs = np.unique(np.stack([a, b]), axis=1)
    return pairs.shape[1] == len(np.unique(a)) == len(np.unique(b))


def rows_per_request(limit, d, max_points, per_point_out=4, weighted=False, itemsize=4):
    """Most points one request may carry: `limit` if set, else as many as
    fit the message limit both ways (`itemsize` bytes per coordinate and
    weight in: 4 for float32 points, 8 for float64; `per_point_out` bytes per
    point out), at most the server's `max_points` (ModelInfo.max_points)."""
    if limit is not None:
        return limit
    per_point = max(itemsize * (d + weighted), per_point_out)
    return max(1, min(max_points, (MESSAGE_BYTES - MESSAGE_SLACK) // per_point))


def row_spans(X, first, limit, max_points, per_point_out, itemsize):
    """The (first, end) rows of X from `first` on that each request carries:
    `limit` rows if set, else as many as fit the message both ways
    (rows_per_request), a sparse X's counted by their nonzeros (an 8-byte
    offset a row, a 4-byte column and an `itemsize` value a nonzero)."""
    n, d = X.shape
    if limit is not None or not sp.issparse(X):
        step = rows_per_request(limit, d, max_points, per_point_out, itemsize=itemsize)
        return [(a, min(n, a + step)) for a in range(first, n, step)]
    budget = MESSAGE_BYTES - MESSAGE_SLACK
    most = max(1, min(max_points, budget // per_point_out))
    # Bytes in of rows [0, i).
    cost = 8 * np.arange(n + 1, dtype=np.int64) + X.indptr.astype(np.int64) * (4 + itemsize)
    spans = []
    while first < n:
        fit = int(np.searchsorted(cost, cost[first] + budget, side="right")) - 1
        end = min(n, first + most, max(fit, first + 1))
        spans.append((first, end))
        first = end
    return spans


def padded(block, weights, centers):
    """A block of fewer points than centers (the server needs n >= k) with
    the centers appended, at weight 0 when the block is weighted: they change
    no sum, and their answers are dropped. (block, weights)."""
    k = len(centers)
    if block.shape[0] >= k:
        return block, weights
    if sp.issparse(block):
        block = sp.vstack([block, sp.csr_matrix(centers.astype(block.dtype))], format="csr")
    else:
        block = np.concatenate([block, centers.astype(block.dtype)])
    if weights is not None:
        weights = np.concatenate([weights, np.zeros(k, dtype=weights.dtype)])
    return block, weights


def fit_dtype(dtype):
    """The dtype a fit of points of `dtype` runs and answers in: float32 for
    float16 points, which travel as float16 (points_f16) and are widened to
    float32 by the server, else the points' own."""
    return np.dtype(np.float32) if np.dtype(dtype) == np.float16 else np.dtype(dtype)


def column_means(X):
    """X.mean(axis=0) of a 2-d float array, to the bit: by kmt._driver for
    C-contiguous float32 and float64 arrays where the package has it (numpy
    pays a call per row), else by numpy."""
    if X.flags.c_contiguous and X.dtype in (np.float32, np.float64) and X.shape[0] > 0:
        try:
            from . import _driver
        except ImportError:
            pass
        else:
            return _driver.column_means(X)
    return X.mean(axis=0)


def fit_means(X):
    """The column means a fit of dense X centers it on, in fit_dtype: for
    float16 X those of its float32 values, column_means of X.astype(float32)
    to the bit (by kmt._driver without that copy where the package has it);
    for other X column_means(X)."""
    if X.dtype != np.float16:
        return column_means(X)
    if X.flags.c_contiguous and X.shape[0] > 0:
        try:
            from . import _driver
        except ImportError:
            pass
        else:
            return _driver.column_means_f16(X.view(np.uint16))
    return column_means(X.astype(np.float32))


def fit_variances(X):
    """np.var(X, axis=0) of dense X (a float16 X's of its float32 values),
    to the bit: by kmt._driver for C-contiguous float16, float32 and float64
    arrays of d > 1 where the package has it, which reads X twice where numpy
    makes an n x d array of the deviations; else by numpy (which sums a
    single column pairwise, not in row order)."""
    if (X.flags.c_contiguous and X.dtype in (np.float16, np.float32, np.float64)
            and X.shape[0] > 0 and X.shape[1] > 1):
        try:
            from . import _driver
        except ImportError:
            pass
        else:
            if X.dtype == np.float16:
                return _driver.column_variances_f16(X.view(np.uint16))
            return _driver.column_variances(X)
    return np.var(X.astype(fit_dtype(X.dtype), copy=False), axis=0)


def offset_on_server(points_dtype, offset):
    """Whether the server subtracts `offset` from the points (the request's
    points_offset, or points_offset_f64) rather than the client: for float32
    points and offset, which it subtracts in float32 as numpy would, and for
    float64 ones, in double. Otherwise the client does, in the points'
    dtype."""
    return (offset is not None and fit_dtype(points_dtype) == offset.dtype
            and points_dtype in (np.float32, np.float64, np.float16))


def keep_parameters(estimator, values):
    """Sets each constructor argument (an __init__'s locals()) as the
    attribute of its name, as scikit-learn's estimators do, and nothing
    else."""
    for name, value in values.items():
        if name not in ("self", "__class__"):
            setattr(estimator, name, value)


class ServedKMeans(ClassNamePrefixFeaturesOutMixin, TransformerMixin, ClusterMixin,
                   BaseEstimator):
    """What kmt's estimators agree on, all but the fit: the k-means and
    connection parameters, the checks of parameters and input, and predict,
    transform, score and their fit_ forms, computed by the server from the
    fitted centers. Each estimator brings its own _fit."""

    _connection_constraints = {
        "server": [str, None],
        "tls": ["boolean"],
        "ca": [str, None],
        "cert": [str, None],
        "key": [str, None],
        "server_name": [str, None],
        "timeout": [Interval(Real, 0, None, closed="neither"), None],
        "batch_size": [Interval(Integral, 1, None, closed="left"), None],
    }
    # scikit-learn's k-means parameters, as every kmt estimator takes them.
    _kmeans_constraints = {
        "n_clusters": [Interval(Integral, 1, None, closed="left")],
        "init": [StrOptions({"k-means++", "random"}), callable, "array-like"],
        "n_init": [StrOptions({"auto"}), Hidden(StrOptions({"warn"})),
                   Interval(Integral, 1, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "verbose": ["verbose"],
        "random_state": ["random_state"],
    }
    _default_n_init = 10

    def _fit(self, X, sample_weight, distances):
        """Each estimator's own fit: sets the fitted attributes and returns
        the (n, k) squared distances to the final centers if `distances` and
        the fit computed them, else None."""
        raise NotImplementedError

    def _check_params_vs_input(self, X):
        """scikit-learn's checks of the parameters against X; sets _n_init."""
        if X.shape[0] < self.n_clusters:
            raise ValueError(f"n_samples={X.shape[0]} should be >= n_clusters={self.n_clusters}.")
        self._n_init = self.n_init
        if self._n_init == "warn":
            warnings.warn(
                f"The default value of `n_init` will change from {self._default_n_init} to "
                "'auto' in 1.4. Set the value of `n_init` explicitly to suppress the warning",
                FutureWarning)
            self._n_init = self._default_n_init
        if self._n_init == "auto":
            seeded = isinstance(self.init, str) and self.init in ("k-means++", "k-means||",
                                                                  "two-level")
            self._n_init = 1 if seeded else self._default_n_init
        if _is_arraylike_not_scalar(self.init) and self._n_init != 1:
            warnings.warn(
                "Explicit initial center position passed: performing only one init in "
                f"{type(self).__name__} instead of n_init={self._n_init}.",
                RuntimeWarning, stacklevel=3)
            self._n_init = 1

    def _validate_center_shape(self, X, centers):
        if centers.shape[0] != self.n_clusters:
            raise ValueError(f"The shape of the initial centers {centers.shape} does not match "
                             f"the number of clusters {self.n_clusters}.")
        if centers.shape[1] != X.shape[1]:
            raise ValueError(f"The shape of the initial centers {centers.shape} does not match "
                             f"the number of features of the data {X.shape[1]}.")

    def _request_rows(self):
        """The most points per request the user set (None: the message's)."""
        return self.batch_size

    def _note_model(self, info):
        """What predict and transform need to know of the fitted model:
        whether points may be sent minus their mean (the algorithm is
        translation invariant), which keeps float32's distances precise far
        from the origin as scikit-learn's centering does, and whether they
        compare as unit vectors."""
        self._unit_norm = info.unit_norm
        self._offset_used = info.translation_invariant

    def _prepare_for_assignment(self, block):
        """The rows as the fitted model compares them with its centers."""
        if not self._unit_norm:
            return block
        norms = np.linalg.norm(block, axis=1, keepdims=True)
        return block / np.where(norms > 0, norms, 1)

    def _check_test_data(self, X):
        """X checked as scikit-learn checks it; a dense float16 X stays
        float16 and is assigned as its float32 values (fit_dtype), as a fit
        of it runs."""
        return self._validate_data(X, accept_sparse="csr", reset=False,
                                   dtype=self._input_dtypes(X, narrow=True), order=None,
                                   accept_large_sparse=False)

    @staticmethod
    def _input_dtypes(X, narrow):
        """The dtypes X is taken in: float64 and float32, and float16 if
        `narrow` and X is a dense float16 array; any other becomes
        float64."""
        if narrow and not sp.issparse(X) and getattr(X, "dtype", None) == np.float16:
            return [np.float64, np.float32, np.float16]
        return [np.float64, np.float32]

    def _fit_data(self, X, narrow=False, finite_later=False):
        """X checked as scikit-learn checks it, and, if dense, its column
        means (None if sparse). The means stand in for scikit-learn's
        finiteness check: a column holding NaN or an infinity has a mean that
        is not finite, and only then is X searched for them. With `narrow`,
        a dense float16 X stays float16 (fit_dtype: it is sent as it is and
        fitted in float32); otherwise it becomes float64, as scikit-learn's
        does. With `finite_later` a dense X is neither searched nor averaged
        (its means None): the caller leaves its finiteness to the service,
        which checks every value it loads, and raises scikit-learn's error
        when the load is refused (finite_or_raise)."""
        X = self._validate_data(X, accept_sparse="csr", dtype=self._input_dtypes(X, narrow),
                                order=None, accept_large_sparse=False,
                                force_all_finite=sp.issparse(X))
        if sp.issparse(X) or finite_later:
            return X, None
        mean = fit_means(X)
        if not np.isfinite(mean).all():
            self._finite_or_raise(X)
        return X, mean

    def _finite_or_raise(self, X):
        """scikit-learn's error for a dense X holding NaN or an infinity."""
        if not sp.issparse(X):
            _assert_all_finite(X, input_name="X", estimator_name=type(self).__name__)

    @staticmethod
    def _weights(sample_weight, X):
        """(weights in the fit's dtype, whether they are other than all ones)."""
        given = sample_weight is not None
        sample_weight = _check_sample_weight(sample_weight, X, dtype=fit_dtype(X.dtype),
                                             only_non_negative=True)
        if given and not sample_weight.any():
            raise ValueError("sample_weight is zero everywhere: no point would count")
        return sample_weight, given and not np.all(sample_weight == 1)

    def _assign(self, X, distances, labels=True):
        """Each row's nearest fitted center and its squared distances
        (`distances` a kmt.pb.Distances): (labels or None, distances or
        None), in batches streamed on one call."""
        centers = self.cluster_centers_
        k, d = centers.shape
        # Sparse X goes as its nonzeros (points_csr), unshifted, unless the
        # model compares unit vectors, which are scaled here.
        sparse = sp.issparse(X) and not self._unit_norm
        offset = centers.mean(axis=0) if self._offset_used and not sparse else None
        # The server subtracts the offset from the appended centers too.
        on_server = offset_on_server(X.dtype, offset)
        rows = ((lambda first, end: X[first:end]) if sparse
                else dense_rows(X, None if on_server else offset))
        wire_centers = centers if offset is None else centers - offset
        fill = centers if on_server else wire_centers
        shift = dict(points_offset=offset) if on_server else {}
        all_distances = distances == _client.pb.DISTANCES_ALL
        size = fit_dtype(X.dtype).itemsize  # float32 or float64: float16 goes widened
        spans = row_spans(X, 0, self._request_rows(), model_info(self, ASSIGN_MODEL).max_points,
                          4 * labels + size * (k if all_distances else 1), size)
        cl = client_for(self)

        def requests():
            for i, (first, end) in enumerate(spans):
                block, _ = padded(self._prepare_for_assignment(rows(first, end)), None, fill)
                yield cl.wire_request(block, k, model=ASSIGN_MODEL, iterations=0,
                                      centers=wire_centers, request_id=f"assign-{i}",
                                      return_distances=distances, omit_labels=not labels,
                                      **shift)
        found_labels, found_distances, answered = [], [], iter(spans)

        def found(response):
            first, end = next(answered)
            result = cl.result(response, d, k, all_distances)
            if labels:
                found_labels.append(result.labels[:end - first])
            if distances != _client.pb.DISTANCES_NONE:
                found_distances.append(result.distances[:end - first])
        with invalid_input_as_value_error():
            cl.cluster_each(requests(), found)
        return (np.concatenate(found_labels).astype(np.int32) if labels else None,
                np.concatenate(found_distances) if found_distances else None)

    def fit_predict(self, X, y=None, sample_weight=None):
        """Fits, then returns labels_."""
        return self.fit(X, sample_weight=sample_weight).labels_

    def predict(self, X, sample_weight=None):
        """The index of each sample's nearest center (sample_weight is
        accepted as scikit-learn accepts it and changes nothing)."""
        check_is_fitted(self)
        X = self._check_test_data(X)
        _check_sample_weight(sample_weight, X, dtype=fit_dtype(X.dtype))
        return self._assign(X, _client.pb.DISTANCES_NONE)[0]

    def transform(self, X):
        """Euclidean distances from each sample to every center, (n, k)."""
        check_is_fitted(self)
        X = self._check_test_data(X)
        return self._transform(X)

    def _transform(self, X):
        squared = self._assign(X, _client.pb.DISTANCES_ALL, labels=False)[1]
        return np.sqrt(squared).astype(fit_dtype(X.dtype))

    def fit_transform(self, X, y=None, sample_weight=None):
        """Fits, then returns the distances of X to the centers (those of the
        fit's own request when it was one)."""
        squared = self._fit(X, sample_weight, distances=True)
        if squared is None:
            return self.transform(X)
        return np.sqrt(squared).astype(self.cluster_centers_.dtype)

    def fit(self, X, y=None, sample_weight=None):
        """Fits the centers to X; returns self."""
        self._fit(X, sample_weight, distances=False)
        return self

    def score(self, X, y=None, sample_weight=None):
        """Minus the (weighted) sum of squared distances of X to the nearest
        centers."""
        check_is_fitted(self)
        X = self._check_test_data(X)
        sample_weight = _check_sample_weight(sample_weight, X, dtype=fit_dtype(X.dtype))
        squared = self._assign(X, _client.pb.DISTANCES_NEAREST, labels=False)[1]
        return -float(np.dot(sample_weight.astype(np.float64), squared.astype(np.float64)))

    def save_model(self, path, name=None, X=None):
        """Writes the fitted centers as a fitted model file at `path`
        (written beside it and renamed into place; as DIR/NAME/VERSION/
        model.kmt, a server whose --model_dir is DIR serves it as version
        VERSION of NAME). `name` defaults to NAME, else the file's name; `X`,
        if given, the points fitted, recorded as n and their SHA-256
        fingerprint (kmt.fitted.fingerprint). Returns self."""
        from . import fitted
        check_is_fitted(self)
        fitted.write_model(
            fitted.model_file(self, fitted.model_name(path) if name is None else name, X), path)
        return self

    @classmethod
    def from_model(cls, path, **params):
        """An estimator fitted as a fitted model file says (cluster_centers_,
        inertia_, n_iter_, n_features_in_), made with `params` (server and
        the other connection parameters): predict, transform and score send
        its centers as ever."""
        from . import fitted
        message = fitted.read_model(path)[0]
        return fitted.load_into(cls(n_clusters=message.k, **params), path)

    def _more_tags(self):
        return {
            "_xfail_checks": {
                "check_sample_weights_invariance": (
                    "zero sample_weight is not equivalent to removing samples"
                ),
            },
        }
