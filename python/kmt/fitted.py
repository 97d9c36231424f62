"""Fitted models: an estimator's centers as a model file kmt-server serves by
name (kmt.v1.ModelFile with FittedCenters; docs/operations.md, "Fitted
models"), the file read back into an estimator, and ServedModel, whose
predict, transform and score name a served model and send no centers.

    kmt.KMeans(8, n_init=1).fit(X).save_model("models/shop/1/model.kmt", X=X)
    kmt.ServedModel("shop").predict(Y)          # the server's latest version
    kmt.KMeans.from_model("models/shop/1/model.kmt").predict(Y)

A file is written beside its path and renamed into place, so a server
polling the directory never reads half of one. Its offset is the centers'
mean, which predict subtracts from points and centers alike: a request that
names the model is answered with the bits predict gets sending the centers.
"""
import datetime
import hashlib
import os
import threading
from numbers import Integral

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClusterMixin, TransformerMixin
from sklearn.utils._param_validation import Interval, InvalidParameterError
from sklearn.utils.validation import _check_sample_weight, check_array

from . import client as _client
from .resident import dense_rows
from .served import (ServedKMeans, client_for, connection_settings, fit_dtype,
                     invalid_input_as_value_error, keep_parameters, row_spans, server_of)

pb = _client.pb
_PRECISIONS = {np.dtype(np.float32): pb.FittedCenters.PRECISION_FLOAT32,
               np.dtype(np.float64): pb.FittedCenters.PRECISION_FLOAT64}
_DTYPES = {v: k for k, v in _PRECISIONS.items()}
# Parameters that say where the server is, not how the model was fitted.
_CONNECTION = set(ServedKMeans._connection_constraints)
# ServedModel's ModelInfo by process, connection settings and name, never on
# the estimator (which pickles and clones as scikit-learn's do).
_lock = threading.Lock()
_infos = {}


def fingerprint(X):
    """"sha256:" and the hex SHA-256 of X's values as a fit takes them: n*d,
    row-major, little-endian, float32 or float64 (fit_dtype)."""
    if sp.issparse(X):
        X = X.toarray()
    X = np.asarray(X)
    values = np.ascontiguousarray(X, dtype=fit_dtype(X.dtype).newbyteorder("<"))
    return "sha256:" + hashlib.sha256(memoryview(values).cast("B")).hexdigest()


def _created():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds").replace(
        "+00:00", "Z")


def _parameter_text(value):
    if isinstance(value, (np.ndarray, list, tuple)):
        return "array"
    if callable(value):
        return getattr(value, "__name__", "callable")
    return str(value)


def model_file(estimator, name, X=None):
    """The fitted estimator as a kmt.v1.ModelFile named `name`; `X`, if
    given, the points it was fitted on, recorded as n and their
    fingerprint."""
    centers = np.asarray(estimator.cluster_centers_)
    if getattr(estimator, "_unit_norm", False):
        raise ValueError(f"{type(estimator).__name__} compares points as unit vectors; a fitted "
                         "model is served with plain squared distances")
    dtype = fit_dtype(centers.dtype)
    centers = np.ascontiguousarray(centers, dtype=dtype.newbyteorder("<"))
    k, d = centers.shape
    f = pb.ModelFile(name=name, d=d, k=k)
    fitted = f.fitted
    fitted.precision = _PRECISIONS[dtype]
    fitted.centers = centers.tobytes()
    if getattr(estimator, "_offset_used", True):
        # Computed as predict computes it (ServedKMeans._assign).
        fitted.offset = np.ascontiguousarray(centers.mean(axis=0)).tobytes()
    fitted.inertia = float(getattr(estimator, "inertia_", 0.0))
    fitted.iterations = int(getattr(estimator, "n_iter_", 0))
    algorithm = getattr(estimator, "algorithm", None)
    fitted.algorithm = type(estimator).__name__ + (f"/{algorithm}" if isinstance(algorithm, str)
                                                   else "")
    for key, value in sorted(estimator.get_params(deep=False).items()):
        if key not in _CONNECTION and value is not None:
            fitted.parameters[key] = _parameter_text(value)
    if X is not None:
        if X.shape[1] != d:
            raise ValueError(f"X has {X.shape[1]} features; the centers have {d}")
        fitted.n = X.shape[0]
        fitted.data_fingerprint = fingerprint(X)
    seed = getattr(estimator, "random_state", None)
    if isinstance(seed, Integral):
        f.provenance.seed = int(seed) & (2**64 - 1)
    f.provenance.created = _created()
    f.provenance.trainer = f"kmt (Python) {_version()}"
    return f


def _version():
    from . import __version__
    return __version__


def model_name(path):
    """NAME of DIR/NAME/VERSION/model.kmt, else the file's name without its
    extension: the name a server serving the directory gives the model."""
    version_dir = os.path.dirname(os.path.abspath(path))
    if os.path.basename(path) == "model.kmt" and os.path.basename(version_dir).isdigit():
        return os.path.basename(os.path.dirname(version_dir))
    return os.path.splitext(os.path.basename(path))[0]


def write_model(message, path):
    """Writes `message` beside `path` and renames it into place."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as out:
            out.write(message.SerializeToString())
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def read_model(path):
    """(ModelFile, centers (k, d), offset (d,) or None) of a fitted model's
    file; ValueError naming what is wrong (the server's checks)."""
    with open(path, "rb") as f:
        data = f.read()
    message = pb.ModelFile()
    try:
        message.ParseFromString(data)
    except Exception as e:  # protobuf's DecodeError
        raise ValueError(f"{path} is not a kmt.v1.ModelFile: {e}") from e
    if not message.HasField("fitted"):
        raise ValueError(f"{path}: model '{message.name}' is not a fitted model (fitted is unset)")
    fitted = message.fitted
    if fitted.precision not in _DTYPES:
        raise ValueError(f"{path}: fitted.precision is {fitted.precision}; it must be "
                         "PRECISION_FLOAT32 (1) or PRECISION_FLOAT64 (2)")
    dtype = _DTYPES[fitted.precision].newbyteorder("<")
    k, d = message.k, message.d
    if k < 1 or d < 1:
        raise ValueError(f"{path}: fitted model has d = {d}, k = {k}; both must be at least 1")
    if len(fitted.centers) != k * d * dtype.itemsize:
        raise ValueError(f"{path}: fitted.centers has {len(fitted.centers)} bytes, expected "
                         f"k*d*{dtype.itemsize} = {k}*{d}*{dtype.itemsize}")
    native = dtype.newbyteorder("=")
    centers = np.frombuffer(fitted.centers, dtype=dtype).reshape(k, d).astype(native)
    if not np.isfinite(centers).all():
        raise ValueError(f"{path}: fitted.centers has values that are not finite")
    offset = None
    if fitted.offset:
        if len(fitted.offset) != d * dtype.itemsize:
            raise ValueError(f"{path}: fitted.offset has {len(fitted.offset)} bytes, expected "
                             f"d*{dtype.itemsize} = {d}*{dtype.itemsize}")
        offset = np.frombuffer(fitted.offset, dtype=dtype).astype(native)
    return message, centers, offset


def load_into(estimator, path):
    """Sets an estimator's fitted attributes from a fitted model's file."""
    message, centers, offset = read_model(path)
    estimator.cluster_centers_ = centers
    estimator._n_features_out = message.k
    estimator.n_features_in_ = message.d
    estimator.inertia_ = message.fitted.inertia
    estimator.n_iter_ = message.fitted.iterations
    estimator._unit_norm = False
    estimator._offset_used = offset is not None
    return estimator


class ServedModel(ClusterMixin, TransformerMixin, BaseEstimator):
    """A fitted model kmt-server serves, by name: predict, transform and
    score send the points and the model's name, never its centers (a request
    of n*d values, not n*d + k*d, and no centers back). A call's first batch
    names `version` (0: the latest available) and its other batches the
    version that answered it, so one call's answers come from one version
    even while a newer one rolls out; model_version_ says which. The model's
    ModelInfo (its kind, k for sizing requests) is read once per process.

    Parameters: `model` the served name; `version` 0 (latest) or a version
    number; the connection parameters of the other estimators (server, tls,
    ca, cert, key, server_name, timeout) and batch_size (points per request,
    None: as many as the message and the server's --max_points allow).
    fit(X) only resolves the model (n_features_in_, n_clusters_) and checks
    X's width; it fits nothing."""

    _parameter_constraints = {
        "model": [str],
        "version": [Interval(Integral, 0, None, closed="left")],
        **ServedKMeans._connection_constraints,
    }

    def __init__(self, model, *, version=0, server=None, tls=False, ca=None, cert=None, key=None,
                 server_name=None, timeout=None, batch_size=None):
        keep_parameters(self, locals())

    def _info(self, refresh=False):
        """The served model's ModelInfo: from ListModels once per process and
        settings, again when `refresh`."""
        key = (os.getpid(), connection_settings(self), self.model)
        with _lock:
            info = _infos.get(key)
        if info is None or refresh:
            info = next((m for m in client_for(self).models() if m.name == self.model), None)
            if info is None:
                raise InvalidParameterError(
                    f"The 'model' parameter of ServedModel must be a model the server at "
                    f"{server_of(self)} serves; got '{self.model}'.")
            if info.kind != "fitted":
                raise InvalidParameterError(
                    f"The 'model' parameter of ServedModel must name a fitted model; "
                    f"'{self.model}' at {server_of(self)} is {info.kind}.")
            with _lock:
                _infos[key] = info
        return info

    def fit(self, X=None, y=None, sample_weight=None):
        """Resolves the served model (n_features_in_, n_clusters_); checks X's
        width if given."""
        self._validate_params()
        info = self._info(refresh=True)
        self.n_features_in_, self.n_clusters_ = info.d, info.k
        if X is not None and np.shape(X)[1] != info.d:
            raise ValueError(f"X has {np.shape(X)[1]} features, but the served model "
                             f"'{self.model}' has {info.d}")
        return self

    @staticmethod
    def _check(X):
        return check_array(X, accept_sparse="csr", dtype=[np.float64, np.float32, np.float16],
                           order=None, accept_large_sparse=False)

    def _assign(self, X, distances, labels=True):
        """(labels or None, squared distances or None) of X's rows, from one
        version of the served model: the first batch goes alone and names
        `version` (0: the latest), the others name the version that answered
        it."""
        self._validate_params()
        X = self._check(X)
        info = self._info()
        n, d = X.shape
        all_distances = distances == pb.DISTANCES_ALL
        # A fitted model takes sparse X as its nonzeros (points_csr); the
        # others take it densified.
        rows = ((lambda first, end: X[first:end]) if sp.issparse(X) and info.kind == "fitted"
                else dense_rows(X, None))
        cl = client_for(self)

        def spans(first, info):
            size = fit_dtype(X.dtype).itemsize
            return row_spans(X, first, self.batch_size, info.max_points,
                             4 * labels + size * (info.k if all_distances else 1), size)

        found_labels, found_distances, versions = [], [], []

        def send(chosen, version):
            answered = iter(chosen)

            def requests():
                for first, end in chosen:
                    yield cl.wire_request(rows(first, end), 0, model=self.model, iterations=0,
                                          model_version=version, request_id=f"served-{first}",
                                          return_distances=distances, omit_labels=not labels)

            def found(response):
                first, end = next(answered)
                versions.append(response.model_version)
                result = cl.result(response, d, 1)
                if labels:
                    found_labels.append(result.labels)
                if distances != pb.DISTANCES_NONE:
                    found_distances.append(result.distances.reshape(end - first, -1)
                                           if all_distances else result.distances)
            cl.cluster_each(requests(), found)

        with invalid_input_as_value_error():
            head = spans(0, info)[:1]
            send(head, self.version)
            if head and head[0][1] < n:
                if versions[0] != info.default_version and self.version == 0:
                    info = self._info(refresh=True)  # a new version: its k may differ
                send(spans(head[0][1], info), versions[0])
        self.model_version_ = versions[0] if versions else self.version
        return (np.concatenate(found_labels).astype(np.int32) if labels else None,
                np.concatenate(found_distances) if found_distances else None)

    def predict(self, X, sample_weight=None):
        """The index of each sample's nearest center."""
        return self._assign(X, pb.DISTANCES_NONE)[0]

    def transform(self, X):
        """Euclidean distances from each sample to every center, (n, k)."""
        X = self._check(X)
        squared = self._assign(X, pb.DISTANCES_ALL, labels=False)[1]
        return np.sqrt(squared).astype(fit_dtype(X.dtype))

    def fit_predict(self, X, y=None, sample_weight=None):
        return self.predict(X)

    def score(self, X, y=None, sample_weight=None):
        """Minus the (weighted) sum of squared distances of X to the nearest
        centers."""
        X = self._check(X)
        sample_weight = _check_sample_weight(sample_weight, X, dtype=fit_dtype(X.dtype))
        squared = self._assign(X, pb.DISTANCES_NEAREST, labels=False)[1]
        return -float(np.dot(sample_weight.astype(np.float64), squared.astype(np.float64)))
