"""kmt.MiniBatchKMeans: scikit-learn's MiniBatchKMeans (1.2), each
mini-batch assigned by kmt-server.

A step sends the batch with the current centers (INIT_GIVEN, iterations=0,
return_cluster_sums) and gets back, per center, the weight and coordinate
sum of the batch's points nearest it and the batch's objective; the client
then moves each center by Sculley's per-center learning rate, as
scikit-learn does: c_j <- (c_j * W_j + S_j) / (W_j + w_j), with W_j the
weight center j has taken in so far, S_j and w_j the batch's sum and weight.
Reassignment of centers that took in little, early stopping on the smoothed
batch inertia, and the tolerance on the centers' shift are scikit-learn's
rules. partial_fit is one such step per call, for data that arrives as a
stream of batches; with a forgetting factor (decay_factor or half_life, as
Spark MLlib's StreamingKMeans) each call first discounts the weight every
center has taken in so far, so that the centers follow a stream whose
clusters drift. A fit's steps share one stream (Client.session()), so a
step costs a round trip to the server rather than a stream of its own.
fit loads sparse X (scipy.sparse) as sparse shards, its nonzeros, and
seeds its initialisation's sample on one; partial_fit sends a sparse batch
as its nonzeros for its labels and adds the cluster sums itself (a request
computes none of sparse points).
"""
import contextlib
import warnings
from numbers import Integral, Real

import grpc
import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_array, check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import _check_sample_weight, _is_arraylike_not_scalar

from . import client as _client
from .kmeans import tolerance
from .resident import (csr_arrays, dense_rows, driver, driver_errors, fit_resident,
                       replica_addresses)
from .served import (ASSIGN_MODEL, ServedKMeans, client_for, invalid_input_as_value_error,
                     keep_parameters, padded, server_of, tls_options)

pb = _client.pb

# The multiply-adds of a step's assignment (batch_size * d * k) up to which
# the steps run on one shard of the first replica even when there are
# several (at 4,096 x 32 and k = 16 a step is 2.1 * 10^6, and its round
# trip costs more than its assignment).
SMALL_STEP_WORK = 1 << 25


class MiniBatchKMeans(ServedKMeans):
    """Mini-batch k-means on kmt-server, with scikit-learn's MiniBatchKMeans
    parameters and attributes (batch_size is the mini-batch's size, as
    there), plus server, tls, ca, cert, key, server_name and timeout as in
    kmt.KMeans. init 'k-means++' runs the server's greedy k-means++ on the
    init_size sample.

    decay_factor (in (0, 1]) or half_life (> 0), for partial_fit only: before
    each call after the first, the weight each center has taken in is
    multiplied by decay_factor, per batch (time_unit="batches") or per point
    of the new batch (time_unit="points", decay_factor to the power of its
    rows); half_life h stands for decay_factor = 0.5 ** (1 / h), the data of
    h units before weighing half as much as the newest. Unset: 1, every
    batch weighed alike (scikit-learn's partial_fit). fit weighs its
    mini-batches alike whatever these say, as scikit-learn's does."""

    _parameter_constraints = {
        **ServedKMeans._kmeans_constraints,
        **{name: rule for name, rule in ServedKMeans._connection_constraints.items()
           if name != "batch_size"},
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "compute_labels": ["boolean"],
        "max_no_improvement": [Interval(Integral, 0, None, closed="left"), None],
        "init_size": [Interval(Integral, 1, None, closed="left"), None],
        "reassignment_ratio": [Interval(Real, 0, None, closed="left")],
        "decay_factor": [Interval(Real, 0, 1, closed="right"), None],
        "half_life": [Interval(Real, 0, None, closed="neither"), None],
        "time_unit": [StrOptions({"batches", "points"})],
    }
    _default_n_init = 3

    def __init__(self, n_clusters=8, *, init="k-means++", max_iter=100, batch_size=1024,
                 verbose=0, compute_labels=True, random_state=None, tol=0.0,
                 max_no_improvement=10, init_size=None, n_init="warn", reassignment_ratio=0.01,
                 decay_factor=None, half_life=None, time_unit="batches", server=None, tls=False, ca=None, cert=None, key=None,
                 server_name=None, timeout=None):
        keep_parameters(self, locals())

    def _request_rows(self):
        # batch_size is the mini-batch's; predict's requests fill messages.
        return None

    def _check_params_vs_input(self, X):
        super()._check_params_vs_input(X)
        self._batch_size = min(self.batch_size, X.shape[0])
        self._init_size = self.init_size
        if self._init_size is None:
            self._init_size = 3 * self._batch_size
            if self._init_size < self.n_clusters:
                self._init_size = 3 * self.n_clusters
        elif self._init_size < self.n_clusters:
            warnings.warn(f"init_size={self._init_size} should be larger than n_clusters="
                          f"{self.n_clusters}. Setting it to min(3*n_clusters, n_samples)",
                          RuntimeWarning, stacklevel=3)
            self._init_size = 3 * self.n_clusters
        self._init_size = min(self._init_size, X.shape[0])
        self._tol = tolerance(X, self.tol)

    def _start(self, X, random_state):
        """Initial centers from a sample of init_size rows of X, as
        scikit-learn draws it (given centers: drawn, and not used)."""
        n = X.shape[0]
        rows = random_state.randint(0, n, self._init_size) if self._init_size < n else None
        init = self.init
        if _is_arraylike_not_scalar(init):
            centers = check_array(init, dtype=X.dtype, copy=True, order="C")
            self._validate_center_shape(X, centers)
            return centers
        if rows is not None:
            X = X[rows]
        # The sample meets init (or the service) before the points are
        # loaded and checked (_fit): it is checked here.
        self._finite_or_raise(X)
        if callable(init):
            centers = init(X, self.n_clusters, random_state=random_state)
            if hasattr(centers, "toarray"):
                centers = centers.toarray()
            centers = check_array(centers, dtype=X.dtype, copy=False, order="C")
        elif sp.issparse(X):
            # A sparse sample's seeding on a sparse shard (a request takes
            # sparse points from given centers only): the same centers as
            # one request's from the same seed.
            seed = int(random_state.randint(np.iinfo(np.int32).max))
            with invalid_input_as_value_error():
                centers = fit_resident(
                    server_of(self), X, self.n_clusters, iterations=0, seed=seed, init=init,
                    labels=False, timeout=self.timeout, **tls_options(self)
                ).centers.astype(X.dtype)
        else:
            sample = dense_rows(X)(0, X.shape[0])
            with invalid_input_as_value_error():
                centers = client_for(self).cluster(
                    sample, self.n_clusters, model=ASSIGN_MODEL, iterations=0,
                    init=init, seed=int(random_state.randint(np.iinfo(np.int32).max))
                ).centers.astype(X.dtype)
        self._validate_center_shape(X, centers)
        return centers

    def _inertia(self, X, weights, centers, session):
        """The batch's objective under `centers` (n_init compares the starts
        by it): a sparse batch sent as its nonzeros, which a request takes
        for its objective but not for cluster sums."""
        if not sp.issparse(X):
            return self._sums(X, weights, centers, session)[0]
        # Padding rows are the centers themselves: at distance 0, they add
        # nothing to the objective.
        block, weights = padded(X, weights, centers)
        cl = client_for(self)
        with invalid_input_as_value_error():
            return session.call(cl.wire_request(block, len(centers), model=ASSIGN_MODEL,
                                                iterations=0, centers=centers, weights=weights,
                                                omit_labels=True)).objective

    def _sums(self, X, weights, centers, session):
        """The batch under `centers`: (objective, per-center weights, per-
        center weighted coordinate sums), asked on `session`
        (Client.session())."""
        k, d = centers.shape
        if sp.issparse(X):
            return self._sparse_sums(X, weights, centers, session)
        if weights is None and X.shape[0] < k:
            weights = np.ones(X.shape[0], dtype=np.float32)  # the padding weighs 0
        block, weights = padded(dense_rows(X)(0, X.shape[0]), weights, centers)
        cl = client_for(self)
        with invalid_input_as_value_error():
            r = session.call(cl.wire_request(block, k, model=ASSIGN_MODEL, iterations=0,
                                             centers=centers, weights=weights,
                                             return_cluster_sums=True, omit_labels=True))
        mass = np.asarray(r.center_weights if weights is not None else r.center_counts,
                          dtype=np.float64)
        return r.objective, mass, np.asarray(r.center_sums, dtype=np.float64).reshape(k, d)

    def _sparse_sums(self, X, weights, centers, session):
        """_sums of a sparse batch: its nonzeros sent for their labels and
        objective (a request computes no cluster sums of sparse points), the
        per-center weights and sums added here from the rows' nonzeros."""
        k, d = centers.shape
        m = X.shape[0]
        block, padded_weights = padded(X, weights, centers)
        if weights is None and m < k:
            padded_weights = np.concatenate([np.ones(m), np.zeros(k)])  # the padding weighs 0
        cl = client_for(self)
        with invalid_input_as_value_error():
            r = session.call(cl.wire_request(block, k, model=ASSIGN_MODEL, iterations=0,
                                             centers=centers, weights=padded_weights))
        labels = cl.result(r, d, k).labels[:m]
        w = np.ones(m) if weights is None else np.asarray(weights, dtype=np.float64)
        mass = np.bincount(labels, weights=w, minlength=k)
        # (k, m) weighted one-hot rows times the (m, d) batch.
        sums = sp.csr_matrix((w, (labels, np.arange(m))), shape=(k, m)) @ X.astype(np.float64)
        return r.objective, mass, np.asarray(sums.toarray() if sp.issparse(sums) else sums)

    def _step(self, X, weights, random_state, reassign, session):
        """One mini-batch step on the estimator's centers and counts
        (partial_fit's); returns the batch's inertia under the centers it
        started from."""
        centers, counts = self.cluster_centers_, self._counts
        inertia, mass, sums = self._sums(X, weights, centers, session)
        # Sculley's update and scikit-learn's reassignment rule, as fit's
        # steps apply them (core/minibatch.h); the new centers' draws from
        # random_state here.
        updated, counts, moved = driver().minibatch_update(
            centers.astype(np.float64), counts.astype(np.float64), mass, sums,
            reassign, float(self.reassignment_ratio),
            X.shape[0], centers.dtype == np.float64)
        updated = updated.astype(centers.dtype)
        if moved:
            rows = random_state.choice(X.shape[0], replace=False, size=len(moved))
            if self.verbose:
                print(f"[MiniBatchKMeans] Reassigning {len(moved)} cluster centers.")
            updated[moved] = dense_rows(X[rows])(0, len(moved))
        self._counts = np.asarray(counts, dtype=self._counts.dtype)
        self.cluster_centers_ = updated
        return inertia

    def _random_reassign(self):
        """Whether this step reassigns: after every 10 * n_clusters points,
        or whenever a center has taken in nothing."""
        reassign, self._n_since_last_reassign = driver().minibatch_reassigns(
            self.n_clusters, self._batch_size, self._counts.astype(np.float64),
            self._n_since_last_reassign)
        return reassign

    def _labels_inertia(self, X, sample_weight):
        labels, squared = self._assign(X, pb.DISTANCES_NEAREST)
        return labels, float(np.dot(sample_weight.astype(np.float64), squared))

    def _fit(self, X, sample_weight, distances):
        self._validate_params()
        X = self._fit_data(X, finite_later=True)[0]
        self._check_params_vs_input(X)
        random_state = check_random_state(self.random_state)
        sample_weight, weighted = self._weights(sample_weight, X)
        self._unit_norm, self._offset_used = False, True
        n, d = X.shape
        valid = random_state.randint(0, n, self._init_size)
        if self._n_init > 1:
            self._finite_or_raise(X[valid])
        best = None
        for i in range(self._n_init):
            if self.verbose:
                print(f"Init {i + 1}/{self._n_init} with method {self.init}")
            centers = self._start(X, random_state)
            if self._n_init == 1 and not self.verbose:
                best = None, centers  # one start: its inertia decides nothing
                break
            with client_for(self).session() as session:
                inertia = self._inertia(X[valid], sample_weight[valid] if weighted else None,
                                        centers, session)
            if self.verbose:
                print(f"Inertia for init {i + 1}/{self._n_init}: {inertia}")
            if best is None or inertia < best[0]:
                best = inertia, centers
        # The steps run in the compiled driver over X loaded once on the
        # replicas (client/minibatch_job.h), their batches drawn from
        # random_state's own stream, which goes on from where they leave it.
        state = random_state.get_state()
        n_steps = (self.max_iter * n) // self._batch_size
        # With one replica, or a step whose assignment costs less than a
        # round trip, the data is one shard a replica and, where that is one
        # shard, every step runs on it in one request: the server computes
        # each step on the cores it has idle (server/worker_pool.h,
        # IdleThreads), and no centers nor sums cross the wire per step.
        # Otherwise (several replicas, large steps, or verbose, whose steps'
        # log lines come from here) the data is two shards a replica, each
        # step a round trip over all of them.
        replicas = replica_addresses(server_of(self))
        small = (self._batch_size * d * self.n_clusters <= SMALL_STEP_WORK
                 or len(replicas) == 1) and not self.verbose
        # Sparse X is loaded as sparse shards, its nonzeros.
        points = (dict(rows=None, csr=csr_arrays(X, X.dtype)) if sp.issparse(X)
                  else dict(rows=dense_rows(X)))
        # The RNG's state takes the name `key`.
        security = _client.compiled_security(**tls_options(self))
        security["key_file"] = security.pop("key")
        with self._points_checked(X):
            answer = driver_errors(
                driver().minibatch_fit, replicas, n=n, d=d,
                k=self.n_clusters, weights=sample_weight if weighted else None,
                centers=np.asarray(best[1], dtype=np.float64), key=state[1], pos=int(state[2]),
                batch_size=self._batch_size, steps=n_steps, center_tol=float(self._tol),
                max_no_improvement=(-1 if self.max_no_improvement is None
                                    else int(self.max_no_improvement)),
                reassignment_ratio=float(self.reassignment_ratio),
                labels=bool(self.compute_labels), float64=X.dtype == np.float64,
                steps_on_server=small, streams_per_server=1 if small else 2,
                chunk_bytes=4 << 20, max_moves=driver().MAX_MOVES, timeout=self.timeout,
                log=print if self.verbose else None, **security, **points)
        random_state.set_state((state[0], np.asarray(answer["key"], dtype=np.uint32),
                                answer["pos"], state[3], state[4]))
        self.cluster_centers_ = answer["centers"].astype(X.dtype)
        self._counts = np.asarray(answer["counts"], dtype=X.dtype)
        self._ewa_inertia = answer["ewa_inertia"]
        self._ewa_inertia_min = answer["ewa_inertia_min"]
        self._no_improvement = answer["no_improvement"]
        self._n_since_last_reassign = answer["since_reassign"]
        self._n_features_out = self.n_clusters
        self.n_steps_ = answer["steps_run"]
        self.n_iter_ = int(np.ceil(self.n_steps_ * self._batch_size / n))
        if self.compute_labels:
            self.labels_ = answer["labels"]
            self.inertia_ = float(answer["objective"])
        else:
            self.inertia_ = self._ewa_inertia * n
        return None

    @contextlib.contextmanager
    def _points_checked(self, X):
        """The fit's load of X, which the service checks value by value in
        place of a pass here (_fit_data's finite_later): a refused load of
        points that are not finite raises scikit-learn's error for them."""
        try:
            yield
        except _client.ServiceError as e:
            if e.code == grpc.StatusCode.INVALID_ARGUMENT:
                self._finite_or_raise(X)
            raise

    def _discount(self, rows):
        """What the centers' weights are multiplied by before a partial_fit
        step on `rows` new points: the forgetting factor per time unit
        (1 without one)."""
        if self.decay_factor is not None and self.half_life is not None:
            raise ValueError("decay_factor and half_life both set: give one (half_life h is "
                             "decay_factor 0.5 ** (1 / h))")
        factor = (0.5 ** (1 / self.half_life) if self.half_life is not None
                  else self.decay_factor if self.decay_factor is not None else 1.0)
        return factor ** rows if self.time_unit == "points" else factor

    def partial_fit(self, X, y=None, sample_weight=None):
        """One mini-batch step on X (the first call also initialises from
        it); returns self."""
        fitted = hasattr(self, "cluster_centers_")
        if not fitted:
            self._validate_params()
        X = self._validate_data(X, accept_sparse="csr", dtype=[np.float64, np.float32],
                                order=None, accept_large_sparse=False, reset=not fitted)
        self._random_state = getattr(self, "_random_state", check_random_state(self.random_state))
        sample_weight = _check_sample_weight(sample_weight, X, dtype=X.dtype,
                                             only_non_negative=True)
        self.n_steps_ = getattr(self, "n_steps_", 0)
        discount = self._discount(X.shape[0])
        if not fitted:
            self._check_params_vs_input(X)
            self._unit_norm, self._offset_used = False, True
            self.cluster_centers_ = self._start(X, self._random_state)
            self._counts = np.zeros(self.n_clusters, dtype=X.dtype)
            self._n_since_last_reassign = 0
        else:
            self._counts *= discount
        weighted = not np.all(sample_weight == 1)
        with client_for(self).session() as session:
            self._step(X, sample_weight if weighted else None, self._random_state,
                       self._random_reassign(), session)
        if self.compute_labels:
            self.labels_, self.inertia_ = self._labels_inertia(X, sample_weight)
        self.n_steps_ += 1
        self._n_features_out = self.n_clusters
        return self
