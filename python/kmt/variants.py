"""The server's k-means variants as scikit-learn estimators: soft, spherical,
trimmed and robust k-means and randomized k-medoids (docs/variants.md
defines each). They fit as kmt.KMeans does in one request (initialisation,
restarts, tol, weights where the model takes them), with their algorithm's
parameter checked against the range the server gives in ListModels; None
leaves it at the server's default. labels_ are the nearest final centers
and inertia_ the k-means objective of the final centers, as the server
reports them. A variant's X must fit one request: resident jobs run Lloyd's
only.
"""
from numbers import Real

from .kmeans import ServedLloyd
from .served import ServedKMeans, keep_parameters

_CONSTRAINTS = {**ServedKMeans._kmeans_constraints, **ServedKMeans._connection_constraints}
# A number or None; its range is the server's (ListModels), checked at fit.
_NUMBER = [Real, None]


class _Variant(ServedLloyd):
    MODEL = ""        # the server's model
    PARAMETERS = ()   # the constructor arguments that are the model's parameters

    def _model_name(self):
        return self.MODEL

    def _model_parameters(self):
        return {name: getattr(self, name) for name in self.PARAMETERS}


class _Unweighted(_Variant):
    """A variant without a standard weighted form (ModelInfo.accepts_weights
    is false): its fits take no sample_weight, as scikit-learn's estimators
    without weights take none."""

    def fit(self, X, y=None):
        """Fits the centers to X; returns self."""
        self._fit(X, None, distances=False)
        return self

    def fit_predict(self, X, y=None):
        """Fits, then returns labels_."""
        return self.fit(X).labels_

    def fit_transform(self, X, y=None):
        """Fits, then returns the distances of X to the centers."""
        return super().fit_transform(X)


class SoftKMeans(_Variant):
    """Soft k-means: responsibilities softmax_j(-beta ||x - c_j||^2), each
    center its points' responsibility-weighted mean (model soft-kmeans)."""
    MODEL, PARAMETERS = "soft-kmeans", ("beta",)
    _parameter_constraints = {**_CONSTRAINTS, "beta": _NUMBER}

    def __init__(self, n_clusters=8, *, beta=None, init="k-means++", n_init="auto", max_iter=300,
                 tol=1e-4, verbose=0, random_state=None, server=None, tls=False,
                 ca=None, cert=None, key=None, server_name=None, timeout=None, batch_size=None):
        keep_parameters(self, locals())


class SphericalKMeans(_Variant):
    """Spherical k-means: points and centers of unit norm, assignment by the
    largest cosine, each center its points' normalized mean (model
    spherical-kmeans); predict and transform compare the points scaled to
    unit norm."""
    MODEL = "spherical-kmeans"
    _parameter_constraints = _CONSTRAINTS

    def _more_tags(self):
        # The server refuses a point of norm 0, which has no direction; these
        # checks' data has such rows.
        no_direction = "a point of norm 0 has no direction: the server refuses it"
        tags = super()._more_tags()
        tags["_xfail_checks"] = {**tags["_xfail_checks"],
                                 "check_estimators_dtypes": no_direction,
                                 "check_estimator_sparse_data": no_direction}
        return tags

    def __init__(self, n_clusters=8, *, init="k-means++", n_init="auto", max_iter=300, tol=1e-4,
                 verbose=0, random_state=None, server=None, tls=False, ca=None,
                 cert=None, key=None, server_name=None, timeout=None, batch_size=None):
        keep_parameters(self, locals())


class TrimmedKMeans(_Unweighted):
    """Trimmed k-means: each center the mean of the points of its cluster
    nearest it, how many set by normmax's regularisation tau (0 keeps the
    nearest point; model trimmed-kmeans)."""
    MODEL, PARAMETERS = "trimmed-kmeans", ("tau",)
    _parameter_constraints = {**_CONSTRAINTS, "tau": _NUMBER}

    def __init__(self, n_clusters=8, *, tau=None, init="k-means++", n_init="auto", max_iter=300,
                 tol=1e-4, verbose=0, random_state=None, server=None, tls=False,
                 ca=None, cert=None, key=None, server_name=None, timeout=None, batch_size=None):
        keep_parameters(self, locals())


class RobustKMeans(_Unweighted):
    """Robust k-means: each center the sparsemax(-beta ||x - c||^2)-weighted
    mean of its cluster's points, far points weighing 0 (model
    robust-kmeans)."""
    MODEL, PARAMETERS = "robust-kmeans", ("beta",)
    _parameter_constraints = {**_CONSTRAINTS, "beta": _NUMBER}

    def __init__(self, n_clusters=8, *, beta=None, init="k-means++", n_init="auto", max_iter=300,
                 tol=1e-4, verbose=0, random_state=None, server=None, tls=False,
                 ca=None, cert=None, key=None, server_name=None, timeout=None, batch_size=None):
        keep_parameters(self, locals())


class KMedoids(_Unweighted):
    """Randomized k-medoids: each center a point of its cluster drawn with
    probability proportional to exp(-gamma ||x - mean||^2), the draws keyed
    by random_state (gamma infinite, the default: the point nearest the
    mean; model kmedoids). Centers are always data points."""
    MODEL, PARAMETERS = "kmedoids", ("gamma",)
    _parameter_constraints = {**_CONSTRAINTS, "gamma": _NUMBER}

    def __init__(self, n_clusters=8, *, gamma=None, init="k-means++", n_init="auto", max_iter=300,
                 tol=1e-4, verbose=0, random_state=None, server=None, tls=False,
                 ca=None, cert=None, key=None, server_name=None, timeout=None, batch_size=None):
        keep_parameters(self, locals())
