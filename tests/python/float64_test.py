"""Float64 data end to end through a real kmt-server: the client sends float64
arrays as float64 payloads and reads float64 answers, kmt.KMeans fits float64
X that fits one request in double (equal to scikit-learn's KMeans to the
tolerances of scikit-learn's own tests) and larger float64 X as a resident
job of float64 shards to the same tolerances, float32 X as before; then checks of
scikit-learn's sklearn/cluster/tests/test_k_means.py (test_dense_sparse,
test_transform, test_fit_transform, test_weighted_vs_repeated,
test_k_means_1_iteration) run on kmt.KMeans as they are written there."""
import unittest
import warnings

import numpy as np
import scipy.sparse as sp
import sklearn.cluster
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.datasets import make_blobs
from sklearn.metrics import pairwise_distances, pairwise_distances_argmin

from estimator_support import ServedTest, TwoReplicasTest, kmt, mixture, rows

K = 6
# scikit-learn's own tests' seed (SKLEARN_TESTS_GLOBAL_RANDOM_SEED's default)
# and two more.
SEEDS = (42, 0, 7)


def wire_fields(request):
    """The raw payload fields a WireRequest carries."""
    return sorted(field for field, _ in request.arrays)


class ClientTest(ServedTest):
    def test_float64_points_travel_and_return_as_float64(self):
        cl = kmt.Client(self.server.address)
        points = mixture(500, 3, K, offset=1000.0)
        centers = rows(points, K)
        weights = np.linspace(0.5, 2, len(points))
        offset = points.mean(axis=0)
        wire = cl.wire_request(points, K, centers=centers, weights=weights,
                               points_offset=offset)
        self.assertEqual(wire_fields(wire),
                         ["centers_f64", "points_f64", "points_offset_f64", "weights_f64"])
        self.assertEqual(len(wire.message.points_offset), 0)
        self.assertEqual(wire_fields(cl.wire_request(points.astype(np.float32), K,
                                                     centers=centers, weights=weights,
                                                     points_offset=offset.astype(np.float32))),
                         ["centers_f32", "points_f32", "weights_f32"])
        result = cl.cluster(points, K, centers=centers, iterations=3,
                            return_distances=kmt.pb.DISTANCES_ALL)
        self.assertEqual(result.centers.dtype, np.float64)
        self.assertEqual(result.distances.dtype, np.float64)
        # Three Lloyd's steps in double, written plainly.
        want = centers.copy()
        for _ in range(3):
            labels = pairwise_distances_argmin(points, want)
            want = np.stack([points[labels == j].mean(axis=0) for j in range(K)])
        assert_allclose(result.centers, want, rtol=1e-12)
        assert_array_equal(result.labels, pairwise_distances_argmin(points, want))
        # Distances in product form, |x|^2 + |c|^2 - 2<x, c>: round-off of
        # double on |x|^2 (float32's would be about 1e-7 of it).
        squared_norm = np.max(np.sum(points ** 2, axis=1))
        assert_allclose(result.distances, pairwise_distances(points, want) ** 2, rtol=0,
                        atol=1e-14 * squared_norm)
        # Beyond float32: these centers are not all float32 values.
        self.assertTrue(np.any(result.centers != result.centers.astype(np.float32)))
        # The offset subtracted on the server: the shifted coordinates.
        shifted = cl.cluster(points, K, centers=centers - offset, iterations=3,
                             points_offset=offset)
        assert_array_equal(shifted.labels, result.labels)
        assert_allclose(shifted.centers + offset, result.centers, rtol=1e-12)
        cl.close()

    def test_client_fit_passes_keep_float64_centers(self):
        cl = kmt.Client(self.server.address)
        points = mixture(3000, 3, K, offset=1000.0)
        start = rows(points, K)
        got = cl.fit(points, K, iterations=6, batch_size=700, centers=start)
        self.assertEqual(got.centers.dtype, np.float64)
        # Lloyd's in double over all points, pass by pass.
        centers = start.copy()
        for _ in range(got.passes):
            labels = ((points[:, None, :] - centers[None]) ** 2).sum(-1).argmin(1)
            for j in range(K):
                if (labels == j).any():
                    centers[j] = points[labels == j].mean(axis=0)
        assert_allclose(got.centers, centers, rtol=1e-12)
        labels = ((points[:, None, :] - centers[None]) ** 2).sum(-1).argmin(1)
        assert_array_equal(got.labels, labels)
        # Float32 points keep float32 centers.
        self.assertEqual(cl.fit(points.astype(np.float32), K, iterations=2, batch_size=700,
                                centers=start).centers.dtype, np.float32)

    def test_float32_points_and_a_client_without_raw_bytes_stay_float32(self):
        points = mixture(500, 3, K)
        for raw in (True, False):
            with self.subTest(raw=raw):
                cl = kmt.Client(self.server.address, raw=raw)
                for data in (points.astype(np.float32), points):
                    if not raw or data.dtype == np.float32:
                        result = cl.cluster(data, K, centers=rows(points, K), iterations=2)
                        self.assertEqual(result.centers.dtype, np.float32)
                cl.close()


class SameAsScikitLearnTest(ServedTest):
    def fit_both(self, points, init, weights=None, **options):
        got = kmt.KMeans(K, init=init, n_init=1, server=self.server.address, **options).fit(
            points, sample_weight=weights)
        want = sklearn.cluster.KMeans(K, init=init, n_init=1, algorithm="lloyd",
                                      **options).fit(points, sample_weight=weights)
        return got, want

    def test_float64_fit_equals_scikit_learn_to_1e_7(self):
        weights = np.random.default_rng(3).uniform(0.5, 2.0, size=4000)
        for offset in (0.0, 1e3):
            points = mixture(4000, 5, K, offset=offset)
            for weighted in (False, True):
                for tol in (0.0, 1e-4):
                    with self.subTest(offset=offset, weighted=weighted, tol=tol):
                        got, want = self.fit_both(points, rows(points, K),
                                                  weights if weighted else None, tol=tol)
                        self.assertGreater(want.n_iter_, 5)
                        assert_array_equal(got.labels_, want.labels_)
                        self.assertEqual(got.n_iter_, want.n_iter_)
                        self.assertEqual(got.cluster_centers_.dtype, np.float64)
                        assert_allclose(got.cluster_centers_, want.cluster_centers_, rtol=1e-7)
                        assert_allclose(got.inertia_, want.inertia_, rtol=1e-7)

    def test_float32_fit_is_as_before(self):
        points = mixture(4000, 5, K, dtype=np.float32, offset=10.0)
        got, want = self.fit_both(points, rows(points, K))
        assert_array_equal(got.labels_, want.labels_)
        self.assertEqual(got.n_iter_, want.n_iter_)
        self.assertEqual(got.cluster_centers_.dtype, np.float32)
        assert_allclose(got.cluster_centers_, want.cluster_centers_, rtol=2e-5)
        # What the fit sent: float32 payloads only.
        cl = kmt.Client(self.server.address)
        plan = got._plan(points, None, distances=False)
        self.assertEqual(wire_fields(got._requests(plan, cl)[0]), ["centers_f32", "points_f32"])
        cl.close()


class ResidentFloat64Test(TwoReplicasTest):
    """Float64 X beyond one request: kmt.KMeans's resident job (batch_size
    below n) on two replicas, float64 shards computed in double."""

    def fit_both(self, points, init, weights=None, **options):
        got = kmt.KMeans(K, init=init, n_init=1, server=self.both, batch_size=len(points) // 3,
                         **options).fit(points, sample_weight=weights)
        want = sklearn.cluster.KMeans(K, init=init, n_init=1, algorithm="lloyd",
                                      **options).fit(points, sample_weight=weights)
        return got, want

    def test_float64_resident_fit_equals_scikit_learn_to_1e_7_far_from_the_origin(self):
        # Points near 1e6 with details below float32's spacing there (1/16):
        # float32 shards would lose them.
        base = 1e6
        points = mixture(6000, 5, K, seed=21, offset=base)
        self.assertTrue(np.any(points != points.astype(np.float32)))
        weights = np.random.default_rng(3).uniform(0.5, 2.0, size=len(points))
        init = rows(points, K)
        empty = init.copy()
        empty[2] = base + 60.0  # no point is nearest: relocated after the first step
        for start, weighted, tol in ((init, False, 0.0), (init, True, 0.0), (init, False, 1e-4),
                                     (empty, False, 0.0)):
            with self.subTest(empty=start is empty, weighted=weighted, tol=tol):
                got, want = self.fit_both(points, start, weights if weighted else None, tol=tol)
                self.assertGreater(want.n_iter_, 5)
                assert_array_equal(got.labels_, want.labels_)
                self.assertEqual(got.n_iter_, want.n_iter_)
                self.assertEqual(got.cluster_centers_.dtype, np.float64)
                assert_allclose(got.cluster_centers_, want.cluster_centers_, rtol=1e-7)
                # And where the clusters are: relative to the base, too.
                assert_allclose(got.cluster_centers_ - base, want.cluster_centers_ - base,
                                rtol=1e-7)
                assert_allclose(got.inertia_, want.inertia_, rtol=1e-7)

    def test_fit_resident_keeps_the_points_dtype(self):
        points = mixture(3000, 3, K, seed=5, offset=1e6)
        start = rows(points, K)
        got = kmt.fit_resident(self.both, points, K, centers=start, iterations=5)
        self.assertEqual(got.centers.dtype, np.float64)
        # Lloyd's in double over all points, written plainly.
        centers = start.copy()
        for _ in range(got.iterations_run):
            labels = pairwise_distances_argmin(points, centers)
            centers = np.stack([points[labels == j].mean(axis=0) for j in range(K)])
        assert_allclose(got.centers, centers, rtol=1e-13)
        self.assertTrue(np.any(got.centers != got.centers.astype(np.float32)))
        assert_array_equal(got.labels, pairwise_distances_argmin(points, centers))
        # Float32 points run a float32 job, as before.
        small = mixture(3000, 3, K, seed=5, dtype=np.float32)
        self.assertEqual(kmt.fit_resident(self.both, small, K, centers=rows(small, K),
                                          iterations=2).centers.dtype, np.float32)


# scikit-learn's test data (sklearn/cluster/tests/test_k_means.py).
CENTERS = np.array([[0.0, 5.0, 0.0, 0.0, 0.0],
                    [1.0, 1.0, 4.0, 0.0, 0.0],
                    [1.0, 0.0, 0.0, 5.0, 1.0]])
N_SAMPLES = 100
N_CLUSTERS = CENTERS.shape[0]
X, _ = make_blobs(n_samples=N_SAMPLES, centers=CENTERS, cluster_std=1.0, random_state=42)
X_CSR = sp.csr_matrix(X)


class ScikitLearnKMeansTestsTest(ServedTest):
    """The checks of scikit-learn's test_k_means.py, with kmt.KMeans for
    scikit-learn's KMeans (and kmt.MiniBatchKMeans where those tests take
    MiniBatchKMeans too), over a few seeds."""

    def estimator(self, cls, **options):
        return cls(server=self.server.address, **options)

    def test_dense_sparse(self):
        for cls in (kmt.KMeans, kmt.MiniBatchKMeans):
            for seed in SEEDS:
                with self.subTest(estimator=cls.__name__, seed=seed):
                    sample_weight = np.random.RandomState(seed).random_sample((N_SAMPLES,))
                    km_dense = self.estimator(cls, n_clusters=N_CLUSTERS, random_state=seed,
                                              n_init=1)
                    km_dense.fit(X, sample_weight=sample_weight)
                    km_sparse = self.estimator(cls, n_clusters=N_CLUSTERS, random_state=seed,
                                               n_init=1)
                    km_sparse.fit(X_CSR, sample_weight=sample_weight)
                    assert_array_equal(km_dense.labels_, km_sparse.labels_)
                    assert_allclose(km_dense.cluster_centers_, km_sparse.cluster_centers_)

    def test_transform(self):
        for cls in (kmt.KMeans, kmt.MiniBatchKMeans):
            for seed in SEEDS:
                with self.subTest(estimator=cls.__name__, seed=seed), warnings.catch_warnings():
                    warnings.simplefilter("ignore", FutureWarning)  # n_init's default
                    km = self.estimator(cls, n_clusters=N_CLUSTERS, random_state=seed).fit(X)
                    Xt = km.transform(km.cluster_centers_)
                    assert_allclose(Xt, pairwise_distances(km.cluster_centers_))
                    assert_array_equal(Xt.diagonal(), np.zeros(N_CLUSTERS))
                    Xt = km.transform(X)
                    assert_allclose(Xt, pairwise_distances(X, km.cluster_centers_))

    def test_fit_transform(self):
        for cls in (kmt.KMeans, kmt.MiniBatchKMeans):
            for seed in SEEDS:
                with self.subTest(estimator=cls.__name__, seed=seed):
                    X1 = self.estimator(cls, random_state=seed, n_init=1).fit(X).transform(X)
                    X2 = self.estimator(cls, random_state=seed, n_init=1).fit_transform(X)
                    assert_allclose(X1, X2)

    def test_weighted_vs_repeated(self):
        for seed in SEEDS:
            with self.subTest(seed=seed):
                sample_weight = np.random.RandomState(seed).randint(1, 5, size=N_SAMPLES)
                X_repeat = np.repeat(X, sample_weight, axis=0)
                km = self.estimator(kmt.KMeans, init=CENTERS, n_init=1, n_clusters=N_CLUSTERS,
                                    random_state=seed)
                km_weighted = clone(km).fit(X, sample_weight=sample_weight)
                repeated_labels = np.repeat(km_weighted.labels_, sample_weight)
                km_repeated = clone(km).fit(X_repeat)
                assert_array_equal(km_repeated.labels_, repeated_labels)
                assert_allclose(km_weighted.inertia_, km_repeated.inertia_)
                assert_allclose(np.sort(km_weighted.cluster_centers_, axis=0),
                                np.sort(km_repeated.cluster_centers_, axis=0))

    def test_k_means_1_iteration(self):
        def py_kmeans(X, init):
            new_centers = init.copy()
            labels = pairwise_distances_argmin(X, init)
            for label in range(init.shape[0]):
                new_centers[label] = X[labels == label].mean(axis=0)
            labels = pairwise_distances_argmin(X, new_centers)
            return labels, new_centers

        for array_constr in (np.array, sp.csr_matrix):
            for algo in ("lloyd", "elkan"):
                for seed in SEEDS:
                    with self.subTest(array=array_constr.__name__, algorithm=algo, seed=seed):
                        X = np.random.RandomState(seed).uniform(size=(100, 5))
                        init_centers = X[:5]
                        X = array_constr(X)
                        py_labels, py_centers = py_kmeans(X, init_centers)
                        cy_kmeans = self.estimator(kmt.KMeans, n_clusters=5, n_init=1,
                                                   init=init_centers, algorithm=algo,
                                                   max_iter=1).fit(X)
                        assert_array_equal(py_labels, cy_kmeans.labels_)
                        assert_allclose(py_centers, cy_kmeans.cluster_centers_)


if __name__ == "__main__":
    unittest.main()
