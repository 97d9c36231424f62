"""kmt.KMeans: scikit-learn's KMeans, computed by kmt-server.

The parameters, attributes, warnings and errors are scikit-learn's (1.2);
the iterations run on the server. X that fits one request (batch_size, or a
64 MiB message) goes in one: initialisation, restarts, tolerance, weights and
distances on the server, in double for float64 X. Larger X runs as a
resident job over every replica `server` names (kmt.fit_resident): each
shard loaded once, only centers per iteration, k-means++ over all points,
the tolerance and the relocation of empty clusters done by the client as
scikit-learn does them, the shards' steps in X's precision (float64 X in
double, as scikit-learn computes it; float32 X in float32). As in
scikit-learn the points are sent minus their mean, which keeps float32's
distances precise far from the origin.

Sparse X (scipy.sparse; CSC and others converted once to CSR) is fitted as
a resident job on sparse shards whatever its size, sent and held as its
nonzeros and not shifted, as scikit-learn does not center sparse data;
only a model the resident job does not run takes it densified in requests.
predict, transform and score send sparse X as its nonzeros too (the Cluster
request's points_csr), unshifted, a batch at a time.
"""
import dataclasses
import sys
import warnings
from numbers import Integral

import numpy as np
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_array, check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.sparsefuncs import mean_variance_axis
from sklearn.utils.validation import _is_arraylike_not_scalar

from . import client as _client
from . import resident
from .served import (ServedKMeans, check_model_parameters, client_for, fit_dtype, fit_variances,
                     invalid_input_as_value_error, keep_parameters, model_info, offset_on_server,
                     rows_per_request, same_clustering, server_of, tls_options)

pb = _client.pb

# The rules for empty clusters that a resident job runs too.
EMPTY_CLUSTER_RULES = ("relocate-farthest", "keep")


def tolerance(X, tol):
    """scikit-learn's absolute tolerance: tol times the mean variance of the
    features."""
    if tol == 0:
        return 0.0
    variances = mean_variance_axis(X, axis=0)[1] if sp.issparse(X) else fit_variances(X)
    return float(np.mean(variances) * tol)


def stderr_log(line):
    """A resident job's progress line (its seeding, steps, shard moves) on
    stderr, where a long fit at `verbose` reports how far it is."""
    print(f"kmt: {line}", file=sys.stderr, flush=True)


def resident_progress(absolute_tol):
    """scikit-learn's verbose lines for a fit whose iterations the client
    runs: on_iteration(t, objective, shift, convergence) of kmt.resident."""
    def progress(t, objective, shift, convergence):
        if t == 0:
            print("Initialization complete")
        print(f"Iteration {t}, inertia {objective}.")
        if convergence == pb.CONVERGENCE_LABELS_UNCHANGED:
            print(f"Converged at iteration {t}: strict convergence.")
        elif convergence == pb.CONVERGENCE_TOLERANCE:
            print(f"Converged at iteration {t}: center shift {shift} within tolerance "
                  f"{absolute_tol}.")
    return progress


def resident_capable(info, parameters):
    """Whether the Job RPC's assign steps compute this model: Lloyd's exactly."""
    return info.lloyd_at_defaults and not parameters


@dataclasses.dataclass
class _Plan:
    """A checked fit: X and its weights as sent (None: all ones), the mean
    subtracted (None: none), given starts, the request seed, the model."""
    X: object
    weights: object
    offset: object
    starts: object
    seed: int
    info: object
    parameters: dict
    distances: bool
    one_request: bool
    rows: int = 0  # the most rows one request carries


def fit_each(estimator, blocks, inits=None):
    """Fits a clone of `estimator` (a kmt.KMeans or a variant) to each array
    of `blocks` (any iterable, read as the stream needs it), every block's
    requests on one stream: the fitted clones, in order. `inits`, if given,
    are each block's initial centers (its init). Each block must fit one
    request."""
    cl = client_for(estimator)
    plans = []
    # Checked once: the estimators differ only in init, which is checked
    # with each block. Each is made from the parameters rather than cloned,
    # which costs more than a small block's fit.
    estimator._validate_params()
    parameters = estimator.get_params(deep=False)

    def requests():
        for i, block in enumerate(blocks):
            fit = type(estimator)(**parameters)
            if inits is not None:
                fit.init = inits[i]
            plan = fit._plan(block, None, distances=False, validated=True)
            if not plan.one_request:
                raise ValueError(f"block {i} has {plan.X.shape[0]} samples, more than one "
                                 "request carries")
            made = fit._requests(plan, cl)
            plans.append((fit, plan, len(made)))
            yield from made
    fitted, answered = [], []

    def on_response(response):
        nonlocal answered
        fit, plan, count = plans[len(fitted)]
        answered.append(cl.result(response, plan.X.shape[1], fit.n_clusters))
        if len(answered) == count:
            fit._keep_fit(fit._best(plan, answered))
            fitted.append(fit)
            answered = []
    with invalid_input_as_value_error():
        cl.cluster_each(requests(), on_response)
    return fitted


class ServedLloyd(ServedKMeans):
    """The fit kmt.KMeans and the variants share: scikit-learn's
    initialisations, then one request or a resident job (MiniBatchKMeans has
    its own). Subclasses name the model, its parameters and the empty-cluster
    rule."""

    def _model_name(self):
        raise NotImplementedError

    def _model_parameters(self):
        """{name: value or None (the model's default)}."""
        return {}

    def _empty_clusters(self):
        return "keep"

    def _guard(self):
        """Whether a learned model runs its guarded form."""
        return False

    def _streams_per_server(self, X):
        """Shards a replica holds in a resident fit of X: two of dense X, so
        that the two steps use two cores; one of sparse X, whose steps take
        every core the replica leaves idle (their bits do not depend on the
        thread count), and whose k x d sums then travel once a replica."""
        return 1 if sp.issparse(X) else 2

    def _starts(self, X, offset, random_state):
        """Given initial centers, (restarts, k, d) in X's coordinates, or None
        when the initialisation is the server's."""
        init = self.init
        if _is_arraylike_not_scalar(init):
            centers = check_array(init, dtype=fit_dtype(X.dtype), copy=True, order="C")
            self._validate_center_shape(X, centers)
            return centers[None]
        if not callable(init):
            return None
        # scikit-learn calls it with the data it clusters, centered.
        data = X if offset is None else X - offset
        starts = []
        for _ in range(self._n_init):
            centers = init(data, self.n_clusters, random_state=random_state)
            if sp.issparse(centers):
                centers = centers.toarray()
            centers = check_array(centers, dtype=fit_dtype(X.dtype), copy=False, order="C")
            self._validate_center_shape(X, centers)
            starts.append(centers if offset is None else centers + offset)
        return np.stack(starts)

    def _plan(self, X, sample_weight, distances, validated=False):
        """Checks the parameters (unless `validated`) and X as scikit-learn
        does and decides how the fit runs."""
        if not validated:
            self._validate_params()
        X, mean = self._fit_data(X, narrow=True)
        self._check_params_vs_input(X)
        sample_weight, weighted = ((None, False) if sample_weight is None else
                                   self._weights(sample_weight, X))
        n, d = X.shape
        k = self.n_clusters
        info = model_info(self, self._model_name())
        parameters = check_model_parameters(self, info, self._model_parameters())
        if self._guard() and info.kind != "learned":
            raise ValueError(f"guard=True applies to learned models; the server's model "
                             f"'{info.name}' is {info.kind}.")
        if weighted and not info.accepts_weights:
            raise ValueError(f"The server's model '{info.name}' does not take sample_weight.")
        for what, need, have in (("features", info.d, d), ("clusters", info.k, k)):
            if need and need != have:
                raise ValueError(f"The server's model '{info.name}' is made for {need} {what}; "
                                 f"got {have}.")
        self._note_model(info)
        offset = mean if self._offset_used else None
        random_state = check_random_state(self.random_state)
        starts = self._starts(X, offset, random_state)
        # Drawn after the callable's calls, which see random_state as
        # scikit-learn leaves it; it also keys the draws of kmedoids.
        seed = int(random_state.randint(np.iinfo(np.int32).max))
        # Float64 points travel, and come back, as float64. Float16 points
        # travel in half the bytes but are planned as the float32 points of
        # the same values, so that both fits split alike.
        size = fit_dtype(X.dtype).itemsize
        per_point_out = 4 + size * k * bool(distances)
        # k-means‖ runs on resident shards only, whatever the size.
        parallel = isinstance(self.init, str) and self.init == "k-means||"
        rows = rows_per_request(self._request_rows(), d, info.max_points, per_point_out, weighted,
                                size)
        # Sparse X is sent as sparse shards, which no request carries.
        sparse = sp.issparse(X) and resident_capable(info, parameters)
        one_request = not parallel and not sparse and n <= rows
        if parallel and not resident_capable(info, parameters):
            raise ValueError(f"init='k-means||' runs as a resident job, which runs Lloyd's "
                             f"only, not the server's model '{info.name}'.")
        if not one_request and not resident_capable(info, parameters):
            raise ValueError(f"X has {n} samples, more than one request carries (batch_size="
                             f"{self.batch_size}); only Lloyd's runs as a resident job, not the "
                             f"server's model '{info.name}'.")
        plan = _Plan(X, sample_weight if weighted else None, offset, starts, seed, info,
                     parameters, distances, one_request, rows)
        if not one_request and isinstance(self.init, str) and self.init == "two-level":
            plan.starts = self._sampled_start(plan, rows)
        return plan

    def _sampled_start(self, plan, rows):
        """init='two-level' for an X larger than one request (resident shards
        have no two-level step): the server's two-level on a uniform sample of
        `rows` of its rows drawn from the plan's seed, as `kmt cluster` in
        whole mode runs it; the (1, k, d) start."""
        chosen = np.sort(np.random.RandomState(plan.seed).choice(plan.X.shape[0], rows,
                                                                 replace=False))
        sample = dataclasses.replace(
            plan, X=plan.X[chosen], weights=None if plan.weights is None else plan.weights[chosen],
            distances=False, one_request=True)
        cl = client_for(self)
        results = []
        with invalid_input_as_value_error():
            cl.cluster_each(self._requests(sample, cl, iterations=0), lambda r: results.append(
                cl.result(r, plan.X.shape[1], self.n_clusters, False)))
        centers = results[0].centers.astype(fit_dtype(plan.X.dtype))
        if plan.offset is not None:
            centers += plan.offset
        return centers[None]

    def _fit(self, X, sample_weight, distances):
        """Fits; returns the (n, k) squared distances to the final centers if
        `distances` and one request computed them, else None."""
        plan = self._plan(X, sample_weight, distances)
        sample = self._training_sample(plan)
        if sample is None:
            return self._keep_fit(self._run(plan))
        centers, _, _, n_iter, _ = self._run(sample)
        # The labels, inertia and distances over every point: no iteration
        # from the sample's centers.
        _, labels, inertia, _, squared = self._run(
            dataclasses.replace(plan, starts=centers[None]), iterations=0)
        return self._keep_fit((centers, labels, inertia, n_iter, squared))

    def _max_points_per_center(self):
        """The training sample's most points per center; None: every point."""
        return None

    def _training_sample(self, plan):
        """The plan of the iterations on a uniform sample of at most
        max_points_per_center * n_clusters rows, drawn from the plan's seed
        (FAISS's max_points_per_centroid); None when every point trains."""
        most = self._max_points_per_center()
        n = plan.X.shape[0]
        if most is None or n <= most * self.n_clusters:
            return None
        size = most * self.n_clusters
        chosen = np.sort(np.random.RandomState(plan.seed).choice(n, size, replace=False))
        parallel = isinstance(self.init, str) and self.init == "k-means||"
        sparse = sp.issparse(plan.X) and not plan.one_request
        return dataclasses.replace(
            plan, X=plan.X[chosen], weights=None if plan.weights is None else plan.weights[chosen],
            distances=False, one_request=not parallel and not sparse and size <= plan.rows)

    def _run(self, plan, iterations=None):
        """The fitted values of the plan's requests or resident job, after
        `iterations` (None: max_iter)."""
        if not plan.one_request:
            return self._fit_resident(plan, iterations)
        cl = client_for(self)
        results = []
        with invalid_input_as_value_error():
            cl.cluster_each(self._requests(plan, cl, iterations), lambda r: results.append(
                cl.result(r, plan.X.shape[1], self.n_clusters, plan.distances)))
        return self._best(plan, results)

    def _keep_fit(self, fitted, distinct=None):
        """Sets the fitted attributes; returns the squared distances.
        `distinct`: how many clusters have points, if not counted from the
        labels."""
        centers, labels, inertia, n_iter, squared = fitted
        k = self.n_clusters
        if distinct is None:
            distinct = int(np.count_nonzero(np.bincount(labels, minlength=k)))
        if distinct < k:
            warnings.warn(
                f"Number of distinct clusters ({distinct}) found smaller than "
                f"n_clusters ({k}). Possibly due to duplicate points in X.",
                ConvergenceWarning, stacklevel=4)
        self.cluster_centers_ = centers
        self._n_features_out = k
        self.labels_ = labels
        self.inertia_ = inertia
        self.n_iter_ = n_iter
        return squared

    def _requests(self, plan, cl, iterations=None):
        """The fit's requests: one, or one per given start; `iterations`
        (None: max_iter) each."""
        k = self.n_clusters
        # A dense X goes as it is (float16 too: the request carries it as
        # points_f16); a sparse one is densified.
        points = (plan.X if isinstance(plan.X, np.ndarray)
                  else resident.dense_rows(plan.X)(0, plan.X.shape[0]))
        offset = {}
        if offset_on_server(points.dtype, plan.offset):
            offset = dict(points_offset=plan.offset)  # saves the client a copy
        elif plan.offset is not None:
            points = points - plan.offset
        fields = dict(model=plan.info.name,
                      iterations=self.max_iter if iterations is None else iterations, **offset,
                      parameters=plan.parameters, weights=plan.weights, seed=plan.seed,
                      return_trajectory=bool(self.verbose),
                      return_distances=pb.DISTANCES_ALL if plan.distances else pb.DISTANCES_NONE)
        if plan.info.kind == "exact":
            # A learned model runs its max_iter layers: tolerance and
            # relocation are the exact models' rules.
            fields.update(tol=float(self.tol),
                          empty_clusters=_client.EMPTY_CLUSTERS[self._empty_clusters()])
        if self._guard():
            fields.update(guard=True)
        if plan.starts is None:
            return [cl.wire_request(points, k, init=self.init, n_init=self._n_init,
                                    **fields)]
        return [cl.wire_request(points, k, request_id=f"restart-{r}",
                                centers=start if plan.offset is None else start - plan.offset,
                                **fields)
                for r, start in enumerate(plan.starts)]

    def _best(self, plan, results):
        """The fitted values of the best of the requests' results."""
        best = results[0]
        for r in results[1:]:
            # scikit-learn's rule: a lower inertia that is not the same
            # clustering (round-off can lower it for a relabelling).
            if r.objective < best.objective and not same_clustering(r.labels, best.labels):
                best = r
        if self.verbose:
            self._print_trajectory(best)
        centers = best.centers.astype(fit_dtype(plan.X.dtype))
        if plan.offset is not None:
            centers += plan.offset
        return (centers, np.array(best.labels, dtype=np.int32), float(best.objective),
                int(best.iterations_run), best.distances)

    def _print_trajectory(self, result):
        """scikit-learn's progress lines from a request's trajectory (the
        objective after each iteration, as the server records it)."""
        print("Initialization complete")
        for i, objective in enumerate(result.layer_objectives):
            print(f"Iteration {i}, inertia {objective}.")
        last = result.iterations_run - 1
        if result.convergence == pb.CONVERGENCE_LABELS_UNCHANGED:
            print(f"Converged at iteration {last}: strict convergence.")
        elif result.convergence == pb.CONVERGENCE_TOLERANCE:
            print(f"Converged at iteration {last}: center shift within tolerance "
                  f"{self.tol} times the mean variance.")

    def _fit_resident(self, plan, iterations=None):
        absolute_tol = tolerance(plan.X, self.tol)
        progress = resident_progress(absolute_tol)
        with invalid_input_as_value_error():
            result = resident.fit_resident(
                server_of(self), plan.X, self.n_clusters, centers=plan.starts,
                iterations=self.max_iter if iterations is None else iterations, seed=plan.seed,
                streams_per_server=self._streams_per_server(plan.X), timeout=self.timeout,
                weights=plan.weights, center_tol=absolute_tol,
                empty_clusters=self._empty_clusters(), offset=plan.offset,
                init=None if plan.starts is not None else self.init, n_init=self._n_init,
                on_iteration=progress if self.verbose else None,
                iteration_objectives=bool(self.verbose),
                **(dict(log=stderr_log) if self.verbose else {}), **tls_options(self))
        return (result.centers.astype(fit_dtype(plan.X.dtype)), result.labels,
                float(result.objective), int(result.iterations_run), None)


class KMeans(ServedLloyd):
    """K-Means clustering on kmt-server: scikit-learn's KMeans (1.2) with the
    same parameters, attributes and behaviour, plus the service's own.

    n_clusters, init ('k-means++': the server's greedy k-means++ seeded from
    random_state, whose draws are not scikit-learn's; 'k-means||': k-means‖
    over resident shards, as `kmt cluster --init='kmeans||'`, whatever the
    size of X; 'random'; 'two-level': the server's two-level initialisation
    for large n_clusters, floor(sqrt(k)) coarse clusters and then fine ones
    in each in proportion to its size, on a uniform sample of as many rows as
    one request carries when X is larger; an array; a callable), n_init
    ('warn' as
    scikit-learn 1.2: 10 with a FutureWarning; 'auto'; an int), max_iter,
    tol, verbose, random_state, copy_x (X is never modified, so it changes
    nothing) and algorithm ('lloyd'; 'elkan' gives the same result, as in
    scikit-learn) mean what they mean there.

    server: "host:port", "ipv4:a:p,b:q" or "dns:///name:port"; a resident
    fit uses every replica it names; None: $KMT_SERVER, else
    localhost:50051. model: a model of the server's ListModels
    (lloyd-onehot and the other Lloyd's models, a variant at its defaults,
    a learned model). guard: a learned model runs its guarded form, each
    layer keeping the better of its step and an exact Lloyd's step (the
    objective never increases). tls, ca, cert, key, server_name: as
    kmt.channel. timeout: each call's deadline in seconds. batch_size: the
    most points one request carries (fit beyond it runs as a resident job;
    predict and transform send batches of it); None: as many as a 64 MiB
    message holds, at most the server's --max_points. empty_clusters:
    'relocate-farthest' (scikit-learn's rule) or 'keep'. streams_per_server:
    shards per replica in a resident fit; None: two of dense X, one of
    sparse X (whose steps take the replica's idle cores). max_points_per_center: None (every
    point trains), or an opt-in training sample as FAISS's
    max_points_per_centroid: with more than max_points_per_center *
    n_clusters samples, the initialisation and iterations run on a uniform
    sample of that many rows drawn from random_state (n_iter_ is the
    sample's), and labels_, inertia_ and the distances are then computed
    over every row from the sample's centers. The centers are a sample's
    fit, not the fit of X.
    """

    _parameter_constraints = {
        **ServedKMeans._kmeans_constraints,
        **ServedKMeans._connection_constraints,
        "init": [StrOptions({"k-means++", "k-means||", "random", "two-level"}), callable,
                 "array-like"],
        "copy_x": ["boolean"],
        "algorithm": [StrOptions({"lloyd", "elkan", "auto", "full"},
                                 deprecated={"auto", "full"})],
        "model": [str],
        "guard": ["boolean"],
        "empty_clusters": [StrOptions(set(EMPTY_CLUSTER_RULES))],
        "streams_per_server": [Interval(Integral, 1, None, closed="left"), None],
        "max_points_per_center": [Interval(Integral, 1, None, closed="left"), None],
    }

    def __init__(self, n_clusters=8, *, init="k-means++", n_init="warn", max_iter=300, tol=1e-4,
                 verbose=0, random_state=None, copy_x=True, algorithm="lloyd",
                 server=None, model="lloyd-onehot", guard=False, tls=False, ca=None, cert=None,
                 key=None, server_name=None, timeout=None, batch_size=None,
                 empty_clusters="relocate-farthest", streams_per_server=None,
                 max_points_per_center=None):
        keep_parameters(self, locals())

    def _model_name(self):
        return self.model

    def _max_points_per_center(self):
        return self.max_points_per_center

    def _guard(self):
        return self.guard

    def _empty_clusters(self):
        return self.empty_clusters

    def _streams_per_server(self, X):
        if self.streams_per_server is None:
            return super()._streams_per_server(X)
        return self.streams_per_server

    def _check_params_vs_input(self, X):
        super()._check_params_vs_input(X)
        if self.algorithm in ("auto", "full"):
            warnings.warn(f"algorithm='{self.algorithm}' is deprecated, it will be removed in "
                          "1.3. Using 'lloyd' instead.", FutureWarning)
        if self.algorithm == "elkan" and self.n_clusters == 1:
            warnings.warn("algorithm='elkan' doesn't make sense for a single cluster. Using "
                          "'lloyd' instead.", RuntimeWarning)
