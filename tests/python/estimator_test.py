"""kmt.KMeans through a real kmt-server against scikit-learn's own KMeans on
the same data and initial centers: labels, centers, inertia_ and n_iter_
with and without sample_weight, float32 and float64, in one request and as a
resident job; then scikit-learn's behaviour at the edges (errors, warnings,
input kinds), transform, score, verbose, and a Pipeline searched by
GridSearchCV."""
import contextlib
import io
import os
import pickle
import unittest
import warnings
from unittest import mock

import numpy as np
import scipy.sparse as sp
import sklearn.cluster
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import LinearSVC

from estimator_support import Server, ServedTest, assert_same_fit, kmt, mixture, rows

K = 6


class SameAsScikitLearnTest(ServedTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.resident = Server("--model_dir=")  # the second replica of resident fits

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        assert cls.resident.stop() == 0

    def fit_both(self, points, init, weights=None, resident=False, **options):
        # batch_size below n makes the fit a resident job, on two replicas.
        where = (dict(server=f"ipv4:{self.server.address},{self.resident.address}",
                      batch_size=len(points) // 3) if resident
                 else dict(server=self.server.address))
        got = kmt.KMeans(K, init=init, n_init=1, **where, **options).fit(
            points, sample_weight=weights)
        want = sklearn.cluster.KMeans(K, init=init, n_init=1, **options).fit(
            points, sample_weight=weights)
        return got, want

    def test_same_fit_from_the_same_initial_centers(self):
        for dtype, rtol in ((np.float64, 1e-5), (np.float32, 2e-5)):
            points = mixture(4000, 5, K, dtype=dtype)
            weights = np.random.default_rng(3).uniform(0.5, 2.0, size=len(points))
            for resident in (False, True):
                for weighted in (False, True):
                    with self.subTest(dtype=dtype.__name__, resident=resident, weighted=weighted):
                        got, want = self.fit_both(points, rows(points, K),
                                                  weights if weighted else None, resident)
                        self.assertGreater(want.n_iter_, 5)  # a real run, not one step
                        assert_same_fit(self, got, want, rtol)

    def test_fit_each_is_each_blocks_own_fit(self):
        for dtype, rtol in ((np.float64, 1e-5), (np.float32, 2e-5)):
            blocks = [mixture(1500, 4, K, seed=seed, dtype=dtype) for seed in range(5)]
            inits = [rows(block, K) for block in blocks]
            with self.subTest(dtype=dtype.__name__):
                fitted = kmt.fit_each(kmt.KMeans(K, n_init=1, server=self.server.address),
                                      iter(blocks), inits=inits)
                self.assertEqual(len(fitted), len(blocks))
                for block, init, got in zip(blocks, inits, fitted):
                    want = sklearn.cluster.KMeans(K, init=init, n_init=1).fit(block)
                    assert_same_fit(self, got, want, rtol)
        # Restarts from the server's k-means++: each block's best of three,
        # as its own fit with the same random_state.
        options = dict(n_init=3, random_state=5, server=self.server.address)
        fitted = kmt.fit_each(kmt.KMeans(K, **options), blocks[:2])
        for block, got in zip(blocks, fitted):
            alone = kmt.KMeans(K, **options).fit(block)
            np.testing.assert_array_equal(got.labels_, alone.labels_)
            np.testing.assert_array_equal(got.cluster_centers_, alone.cluster_centers_)
            self.assertEqual(got.inertia_, alone.inertia_)

    def test_fit_each_refuses_a_bad_block_as_scikit_learn_would(self):
        good = mixture(300, 3, K)
        estimator = kmt.KMeans(K, n_init=1, server=self.server.address)
        bad = good.copy()
        bad[7, 1] = np.nan
        with self.assertRaisesRegex(ValueError, "Input X contains NaN"):
            kmt.fit_each(estimator, [good, bad, good])
        with self.assertRaisesRegex(ValueError, "n_samples=3 should be >= n_clusters=6"):
            kmt.fit_each(estimator, [good, good[:3]])
        with self.assertRaisesRegex(ValueError, "block 1 has 20 samples, more than one request"):
            kmt.fit_each(kmt.KMeans(2, n_init=1, batch_size=10, server=self.server.address),
                         [good[:10], good[:20]])

    def test_same_iterations_for_every_tolerance(self):
        points = mixture(3000, 4, K, seed=5)
        for tol in (0.0, 1e-6, 1e-4, 1e-2):
            for resident in (False, True):
                with self.subTest(tol=tol, resident=resident):
                    got, want = self.fit_both(points, rows(points, K), tol=tol,
                                              resident=resident)
                    assert_same_fit(self, got, want, 1e-5)

    def test_max_iter_stops_both_at_the_same_centers(self):
        points = mixture(3000, 4, K, seed=5)
        for resident in (False, True):
            with self.subTest(resident=resident):
                got, want = self.fit_both(points, rows(points, K), max_iter=3, resident=resident)
                self.assertEqual(got.n_iter_, 3)
                assert_same_fit(self, got, want, 1e-5)

    def test_far_from_the_origin_the_centering_keeps_float32_exact(self):
        # Points near 1000: without subtracting the mean, float32 distances
        # would lose the digits that decide the labels.
        points = mixture(3000, 4, K, seed=9, offset=1000.0, dtype=np.float32)
        for resident in (False, True):
            with self.subTest(resident=resident):
                got, want = self.fit_both(points, rows(points, K), resident=resident)
                assert_same_fit(self, got, want, 1e-6)
        # predict and transform too (the server subtracts the offset), also
        # for fewer points than clusters (the centers fill the batch): the
        # nearest fitted center exactly (near 1000, x - mean is exact in
        # float32, so the shifted problem is this one).
        test = mixture(500, 4, K, seed=10, offset=1000.0, dtype=np.float32)
        exact = ((test.astype(np.float64)[:, None, :]
                  - got.cluster_centers_.astype(np.float64)[None, :, :]) ** 2).sum(axis=2)
        np.testing.assert_array_equal(got.predict(test), exact.argmin(axis=1))
        np.testing.assert_array_equal(got.predict(test[:2]), exact[:2].argmin(axis=1))
        np.testing.assert_allclose(got.transform(test), np.sqrt(exact), rtol=1e-6, atol=1e-4)

    def test_an_empty_cluster_moves_to_the_farthest_point_as_scikit_learns(self):
        points = mixture(2000, 3, K, seed=13)
        init = rows(points, K)
        init[2] = [60.0, 60.0, 60.0]  # no point is nearest: empty after the first step
        for resident in (False, True):
            with self.subTest(resident=resident):
                got, want = self.fit_both(points, init, resident=resident)
                assert_same_fit(self, got, want, 1e-5)
        # 'keep' leaves it where it was.
        kept = kmt.KMeans(K, init=init, n_init=1, server=self.server.address,
                          empty_clusters="keep")
        with self.assertWarns(ConvergenceWarning):
            kept.fit(points)
        np.testing.assert_allclose(kept.cluster_centers_[2], init[2], rtol=1e-6)

    def test_integer_weights_are_repeated_points(self):
        points = mixture(1500, 3, K, seed=17)
        counts = np.random.default_rng(2).integers(1, 4, size=len(points))
        weighted = kmt.KMeans(K, init=rows(points, K), n_init=1, server=self.server.address).fit(
            points, sample_weight=counts)
        repeated = kmt.KMeans(K, init=rows(points, K), n_init=1, server=self.server.address).fit(
            np.repeat(points, counts, axis=0))
        np.testing.assert_array_equal(np.repeat(weighted.labels_, counts), repeated.labels_)
        np.testing.assert_allclose(weighted.cluster_centers_, repeated.cluster_centers_,
                                   rtol=1e-5)
        self.assertEqual(weighted.n_iter_, repeated.n_iter_)

    def test_callable_init_is_called_as_scikit_learn_calls_it(self):
        points = mixture(2000, 3, K, seed=19)

        def first_rows(X, n_clusters, random_state):
            # scikit-learn passes the data minus its mean, and a RandomState.
            self.assertAlmostEqual(float(np.abs(X.mean(axis=0)).max()), 0.0, places=6)
            return X[random_state.permutation(len(X))[:n_clusters]]
        for n_init in (1, 3):
            with self.subTest(n_init=n_init):
                got = kmt.KMeans(K, init=first_rows, n_init=n_init, random_state=4,
                                 server=self.server.address).fit(points)
                want = sklearn.cluster.KMeans(K, init=first_rows, n_init=n_init,
                                              random_state=4).fit(points)
                assert_same_fit(self, got, want, 1e-5)

    def test_transform_predict_and_score_are_scikit_learns(self):
        points = mixture(3000, 4, K, seed=23)
        test = mixture(700, 4, K, seed=29)
        got, want = self.fit_both(points, rows(points, K))
        np.testing.assert_array_equal(got.predict(test), want.predict(test))
        self.assertEqual(got.predict(test).dtype, np.int32)
        np.testing.assert_allclose(got.transform(test), want.transform(test), rtol=1e-5,
                                   atol=1e-5)
        self.assertEqual(got.transform(test).dtype, np.float64)
        self.assertAlmostEqual(got.score(test), want.score(test), delta=1e-5 * -want.score(test))
        self.assertAlmostEqual(got.score(points), -got.inertia_, delta=1e-5 * got.inertia_)
        np.testing.assert_allclose(
            kmt.KMeans(K, init=rows(points, K), n_init=1, server=self.server.address)
            .fit_transform(points), want.transform(points), rtol=1e-5, atol=1e-5)
        # Fewer points than clusters, one at a time.
        np.testing.assert_array_equal([got.predict(test[i:i + 1])[0] for i in range(5)],
                                      want.predict(test[:5]))
        # Batches of a few points give the same as one batch.
        small = kmt.KMeans(K, init=rows(points, K), n_init=1, server=self.server.address,
                           batch_size=64).fit(points[:64])
        np.testing.assert_array_equal(
            small.predict(test), kmt.KMeans(K, init=rows(points, K), n_init=1,
                                            server=self.server.address).fit(points[:64])
            .predict(test))


class KMeansPlusPlusTest(ServedTest):
    """The server's k-means++ is not scikit-learn's draw for draw, so these
    check what holds whatever the draws: determinism, restarts, quality."""
    points = mixture(5000, 4, K, seed=31, spread=0.3)

    def test_a_random_state_names_one_fit_on_either_path(self):
        for batch_size in (None, 1000):
            for init in ("k-means++", "random"):
                with self.subTest(batch_size=batch_size, init=init):
                    fits = [kmt.KMeans(K, init=init, n_init=2, random_state=8,
                                       batch_size=batch_size, server=self.server.address)
                            .fit(self.points) for _ in range(2)]
                    np.testing.assert_array_equal(fits[0].labels_, fits[1].labels_)
                    np.testing.assert_array_equal(fits[0].cluster_centers_,
                                                  fits[1].cluster_centers_)

    def test_kmeans_parallel_runs_as_a_resident_job_whatever_the_size(self):
        # X fits one request at batch_size=None: k-means‖ runs on the same
        # shards all the same, with n_init='auto' one initialisation.
        small, large = (kmt.KMeans(K, init="k-means||", n_init="auto", random_state=3,
                                   batch_size=batch_size, server=self.server.address)
                        .fit(self.points) for batch_size in (None, 2000))
        np.testing.assert_array_equal(small.cluster_centers_, large.cluster_centers_)
        np.testing.assert_array_equal(small.labels_, large.labels_)
        self.assertEqual(small._n_init, 1)

    def test_one_request_and_a_resident_job_choose_the_same_start(self):
        # k-means++ over the shards draws as the server's k-means++ draws.
        for init in ("k-means++", "random"):
            for n_init in (1, 3):
                with self.subTest(init=init, n_init=n_init):
                    one, job = (kmt.KMeans(K, init=init, n_init=n_init, random_state=3,
                                           batch_size=batch_size, server=self.server.address)
                                .fit(self.points) for batch_size in (None, 2000))
                    np.testing.assert_array_equal(one.labels_, job.labels_)
                    np.testing.assert_allclose(one.cluster_centers_, job.cluster_centers_,
                                               rtol=1e-5)
                    self.assertEqual(one.n_iter_, job.n_iter_)

    def test_two_level_in_one_request_and_on_a_sample_beyond_it(self):
        # One request: the server's two-level from the seed, then Lloyd's.
        # Beyond one request: two-level on a sample of one request's rows,
        # then the resident job; n_init='auto' is one initialisation.
        for batch_size in (None, 1000):
            with self.subTest(batch_size=batch_size):
                fits = [kmt.KMeans(K, init="two-level", n_init="auto", random_state=8,
                                   batch_size=batch_size, server=self.server.address)
                        .fit(self.points) for _ in range(2)]
                np.testing.assert_array_equal(fits[0].labels_, fits[1].labels_)
                np.testing.assert_array_equal(fits[0].cluster_centers_, fits[1].cluster_centers_)
                self.assertEqual(fits[0]._n_init, 1)
                self.assertEqual(len(np.unique(fits[0].labels_)), K)
                want = sklearn.cluster.KMeans(K, n_init=3, random_state=0).fit(self.points)
                self.assertLess(fits[0].inertia_, 1.001 * want.inertia_)
        with self.assertRaisesRegex(ValueError, "two-level"):
            kmt.KMeans(K, init="two-levels", server=self.server.address).fit(self.points)

    def test_a_training_sample_iterates_on_a_sample_and_labels_every_point(self):
        # 5,000 points and at most 100 per center: the iterations run on 600
        # rows, in one request or a resident job; labels_ and inertia_ are
        # then every point's, exactly, for the sample's centers.
        for batch_size in (None, 300):
            with self.subTest(batch_size=batch_size):
                fit = kmt.KMeans(K, n_init=1, random_state=2, max_points_per_center=100,
                                 batch_size=batch_size, server=self.server.address
                                 ).fit(self.points)
                again = kmt.KMeans(K, n_init=1, random_state=2, max_points_per_center=100,
                                   batch_size=batch_size, server=self.server.address
                                   ).fit(self.points)
                np.testing.assert_array_equal(fit.cluster_centers_, again.cluster_centers_)
                self.assertEqual(fit.labels_.shape, (len(self.points),))
                d2 = ((self.points[:, None, :].astype(np.float64)
                       - fit.cluster_centers_[None].astype(np.float64)) ** 2).sum(-1)
                np.testing.assert_array_equal(fit.labels_, d2.argmin(1))
                self.assertAlmostEqual(fit.inertia_, d2.min(1).sum(), delta=1e-5 * fit.inertia_)
                # Not the full fit's centers: they came from a sample.
                full = kmt.KMeans(K, n_init=1, random_state=2, batch_size=batch_size,
                                  server=self.server.address).fit(self.points)
                self.assertFalse(np.array_equal(fit.cluster_centers_, full.cluster_centers_))
                self.assertLess(fit.inertia_, 1.05 * full.inertia_)
        # At most that many points in all: every point trains.
        every, full = (kmt.KMeans(K, n_init=1, random_state=2, max_points_per_center=most,
                                  server=self.server.address).fit(self.points)
                       for most in (1000, None))
        np.testing.assert_array_equal(every.cluster_centers_, full.cluster_centers_)

    def test_the_fit_is_as_good_as_scikit_learns(self):
        got = kmt.KMeans(K, n_init=3, random_state=0, server=self.server.address).fit(
            self.points)
        want = sklearn.cluster.KMeans(K, n_init=3, random_state=0).fit(self.points)
        self.assertLess(got.inertia_, 1.001 * want.inertia_)

    def test_more_restarts_never_fit_worse(self):
        one = kmt.KMeans(K, init="random", n_init=1, random_state=5,
                         server=self.server.address).fit(self.points)
        ten = kmt.KMeans(K, init="random", n_init=10, random_state=5,
                         server=self.server.address).fit(self.points)
        self.assertLessEqual(ten.inertia_, one.inertia_)


class BehaviourTest(ServedTest):
    """scikit-learn's errors, warnings and input handling."""
    points = mixture(600, 3, 4, seed=37)

    def kmeans(self, n_clusters=4, **options):
        options.setdefault("n_init", 1)
        return kmt.KMeans(n_clusters, server=self.server.address, random_state=0, **options)

    def test_more_clusters_than_samples_is_scikit_learns_value_error(self):
        with self.assertRaisesRegex(ValueError, r"n_samples=3 should be >= n_clusters=4\."):
            self.kmeans().fit(self.points[:3])

    def test_bad_parameters_are_refused_by_scikit_learns_validation(self):
        for bad in (dict(n_clusters=0), dict(init="kmeans++"), dict(n_init=0),
                    dict(max_iter=0), dict(tol=-1.0), dict(algorithm="fast"),
                    dict(empty_clusters="split"), dict(batch_size=0), dict(timeout=0)):
            with self.subTest(**bad):
                with self.assertRaisesRegex(ValueError, f"The '{next(iter(bad))}' parameter"):
                    kmt.KMeans(**{"n_init": 1, **bad}, server=self.server.address).fit(
                        self.points)
        with self.assertRaisesRegex(ValueError, "initial centers .* does not match the number "
                                                "of clusters 4"):
            self.kmeans(init=self.points[:3]).fit(self.points)
        with self.assertRaisesRegex(ValueError, "The 'model' parameter of KMeans must be a "
                                                "model the server .* serves"):
            self.kmeans(model="no-such-model").fit(self.points)

    def test_kmt_server_names_the_server_of_estimators_without_one(self):
        want = self.kmeans().fit(self.points)
        mini = kmt.MiniBatchKMeans(4, n_init=1, random_state=0, server=self.server.address)
        want_mini = mini.fit(self.points)
        with mock.patch.dict(os.environ, {"KMT_SERVER": self.server.address}):
            got = kmt.KMeans(4, n_init=1, random_state=0)
            self.assertIsNone(got.get_params()["server"])
            self.assertIsNone(clone(got).server)
            got.fit(self.points)
            np.testing.assert_array_equal(got.cluster_centers_, want.cluster_centers_)
            np.testing.assert_array_equal(got.predict(self.points), want.labels_)
            # A resident fit too, and the other estimators.
            resident = kmt.KMeans(4, n_init=1, random_state=0, batch_size=200).fit(self.points)
            np.testing.assert_array_equal(resident.labels_, want.labels_)
            got_mini = kmt.MiniBatchKMeans(4, n_init=1, random_state=0).fit(self.points)
            np.testing.assert_array_equal(got_mini.cluster_centers_, want_mini.cluster_centers_)
            self.assertGreater(kmt.SoftKMeans(4, random_state=0).fit(self.points).n_iter_, 0)
        with mock.patch.dict(os.environ, {"KMT_SERVER": f"http://{self.server.address}"}):
            with self.assertRaisesRegex(ValueError, r"\(from KMT_SERVER\): expected host:port, "
                                                    "no scheme"):
                kmt.KMeans(4, n_init=1).fit(self.points)
        with self.assertRaisesRegex(ValueError, "expected host:port, no scheme"):
            kmt.KMeans(4, n_init=1, server="http://localhost:50051").fit(self.points)

    def test_guard_is_for_learned_models(self):
        # variants_test.py runs a learned model guarded.
        self.assertFalse(kmt.KMeans().guard)
        with self.assertRaisesRegex(ValueError, "guard=True applies to learned models; the "
                                                "server's model 'lloyd-onehot' is exact"):
            self.kmeans(guard=True).fit(self.points)
        with self.assertRaisesRegex(ValueError, "The 'guard' parameter"):
            self.kmeans(guard="yes").fit(self.points)

    def test_fewer_distinct_points_than_clusters_warns(self):
        duplicates = np.repeat(self.points[:3], 50, axis=0)
        with self.assertWarnsRegex(ConvergenceWarning,
                                   r"Number of distinct clusters \(3\) found smaller than "
                                   r"n_clusters \(4\)"):
            self.kmeans().fit(duplicates)

    def test_n_init_warns_as_scikit_learn_1_2(self):
        with self.assertWarnsRegex(FutureWarning, "default value of `n_init` will change from "
                                                  "10 to 'auto' in 1.4"):
            kmt.KMeans(4, server=self.server.address, random_state=0).fit(self.points)
        with self.assertWarnsRegex(RuntimeWarning, "Explicit initial center position passed: "
                                                   "performing only one init in KMeans "
                                                   "instead of n_init=3"):
            self.kmeans(init=self.points[:4], n_init=3).fit(self.points)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            self.kmeans(n_init="auto").fit(self.points)

    def test_elkan_and_deprecated_algorithms_give_lloyds_result(self):
        lloyd = self.kmeans(init=self.points[:4]).fit(self.points)
        elkan = self.kmeans(init=self.points[:4], algorithm="elkan").fit(self.points)
        np.testing.assert_array_equal(lloyd.labels_, elkan.labels_)
        with self.assertWarnsRegex(FutureWarning, "algorithm='full' is deprecated"):
            self.kmeans(init=self.points[:4], algorithm="full").fit(self.points)
        with self.assertWarnsRegex(RuntimeWarning, "algorithm='elkan' doesn't make sense for a "
                                                   "single cluster"):
            self.kmeans(1, algorithm="elkan").fit(self.points)

    def test_every_input_kind_gives_the_same_fit(self):
        init = self.points[:4]
        want = self.kmeans(init=init).fit(self.points)
        integers = np.rint(self.points * 10).astype(np.int64)
        from_ints = self.kmeans(init=init * 10).fit(integers)
        self.assertEqual(from_ints.cluster_centers_.dtype, np.float64)
        self.assertEqual(from_ints.n_features_in_, 3)
        for name, given in (("fortran", np.asfortranarray(self.points)),
                            ("list", self.points.tolist()),
                            ("csr", sp.csr_matrix(self.points)),
                            ("csc", sp.csc_matrix(self.points)),
                            ("read-only", np.frombuffer(self.points.tobytes()).reshape(-1, 3))):
            with self.subTest(name):
                got = self.kmeans(init=init).fit(given)
                np.testing.assert_array_equal(got.labels_, want.labels_)
                np.testing.assert_allclose(got.cluster_centers_, want.cluster_centers_,
                                           rtol=1e-5)
                np.testing.assert_array_equal(got.predict(given), want.labels_)
        float32 = self.kmeans(init=init).fit(self.points.astype(np.float32))
        self.assertEqual(float32.cluster_centers_.dtype, np.float32)
        self.assertEqual(float32.transform(self.points.astype(np.float32)).dtype, np.float32)

    def test_x_is_never_changed(self):
        points = self.points.copy()
        for copy_x in (True, False):
            self.kmeans(copy_x=copy_x).fit(points)
            np.testing.assert_array_equal(points, self.points)

    def test_errors_of_unfitted_and_mismatched_use(self):
        from sklearn.exceptions import NotFittedError
        with self.assertRaises(NotFittedError):
            self.kmeans().predict(self.points)
        fitted = self.kmeans().fit(self.points)
        with self.assertRaisesRegex(ValueError, "X has 2 features, but KMeans is expecting 3"):
            fitted.predict(self.points[:, :2])
        # The column means stand in for scikit-learn's finiteness check: one
        # bad value, in either dtype, still gets its error.
        for dtype in (np.float32, np.float64):
            for bad, error in ((np.nan, "Input X contains NaN"),
                               (np.inf, "Input X contains infinity"),
                               (-np.inf, "Input X contains infinity")):
                X = self.points.astype(dtype)
                X[7, 1] = bad
                with self.assertRaisesRegex(ValueError, error):
                    self.kmeans().fit(X)
        with self.assertRaisesRegex(ValueError, "Negative values in data passed to "
                                                "`sample_weight`"):
            self.kmeans().fit(self.points, sample_weight=-np.ones(len(self.points)))

    def test_minibatch_points_that_are_not_finite_get_scikit_learns_error(self):
        # MiniBatchKMeans leaves the points' check to the service, which
        # checks every value it loads: its refusal becomes scikit-learn's
        # error. A sample that meets init or the service before the load
        # (k-means++'s, n_init's) is checked first.
        points = np.random.default_rng(3).normal(size=(5000, 3))
        for dtype in (np.float32, np.float64):
            for init, n_init in ((points[:4], 1), ("k-means++", 1), ("k-means++", 3)):
                for bad, error in ((np.nan, "Input X contains NaN"),
                                   (np.inf, "Input X contains infinity")):
                    X = points.astype(dtype)
                    X[4321, 2] = bad
                    with self.assertRaisesRegex(ValueError, error):
                        kmt.MiniBatchKMeans(4, init=init, n_init=n_init, batch_size=256,
                                            random_state=0, server=self.server.address).fit(X)

    def test_feature_names_out_and_pickle(self):
        fitted = self.kmeans().fit(self.points)
        self.assertEqual(list(fitted.get_feature_names_out()),
                         [f"kmeans{j}" for j in range(4)])
        again = pickle.loads(pickle.dumps(fitted))
        np.testing.assert_array_equal(again.predict(self.points), fitted.labels_)

    def test_verbose_prints_scikit_learns_progress(self):
        for batch_size in (None, 200):  # one request, then a resident job
            with self.subTest(batch_size=batch_size):
                out = io.StringIO()
                with contextlib.redirect_stdout(out):
                    fitted = self.kmeans(init=self.points[:4], verbose=1,
                                         batch_size=batch_size).fit(self.points)
                lines = out.getvalue().splitlines()
                self.assertEqual(lines[0], "Initialization complete")
                iterations = [line for line in lines if line.startswith("Iteration ")]
                self.assertEqual(len(iterations), fitted.n_iter_)
                self.assertRegex(lines[-1], f"^Converged at iteration {fitted.n_iter_ - 1}: ")

    def test_verbose_reports_a_resident_fits_steps_on_stderr(self):
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            fitted = self.kmeans(init=self.points[:4], verbose=1, batch_size=200).fit(self.points)
        steps = [line for line in err.getvalue().splitlines() if line.startswith("kmt: step ")]
        # The initial centers' step, one per iteration and the labels' step.
        self.assertEqual(len(steps), fitted.n_iter_ + 1, err.getvalue())
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            self.kmeans(init=self.points[:4], batch_size=200).fit(self.points)
        self.assertEqual(err.getvalue(), "")


class ResidentFailoverTest(unittest.TestCase):
    def test_a_replica_killed_during_a_resident_fit_changes_nothing(self):
        points = mixture(40000, 8, K, seed=47, spread=4.0)
        init = rows(points, K)
        a, b = Server("--model_dir=", "--workers=1"), Server("--model_dir=", "--workers=1")
        try:
            options = dict(init=init, n_init=1, batch_size=10000,
                           server=f"ipv4:{a.address},{b.address}")
            clean = kmt.KMeans(K, **options).fit(points)
            self.assertGreater(clean.n_iter_, 5)

            class KillAtThirdIteration(io.StringIO):
                # verbose's progress says where the fit is; b dies there.
                def write(self, text):
                    if text.startswith("Iteration 3,"):
                        b.kill()
                    return super().write(text)
            with contextlib.redirect_stdout(KillAtThirdIteration()):
                killed = kmt.KMeans(K, verbose=1, **options).fit(points)
            self.assertIsNotNone(b.proc.poll())
            np.testing.assert_array_equal(killed.labels_, clean.labels_)
            np.testing.assert_array_equal(killed.cluster_centers_, clean.cluster_centers_)
            self.assertEqual(killed.inertia_, clean.inertia_)
            self.assertEqual(killed.n_iter_, clean.n_iter_)
            want = sklearn.cluster.KMeans(K, init=init, n_init=1).fit(points)
            assert_same_fit(self, killed, want, 1e-5)
        finally:
            a.stop()
            b.stop()


class ColumnMeansTest(unittest.TestCase):
    """kmt.served.column_means is numpy's X.mean(axis=0) to the bit, by the
    compiled extension where it applies and numpy elsewhere."""

    def assert_numpy_means(self, X):
        from kmt.served import column_means
        self.assertEqual(column_means(X).tobytes(), X.mean(axis=0).tobytes(),
                         f"{X.dtype} {X.shape}")

    @unittest.skipUnless(os.environ.get("KMT_EXTENSION_DIR"), "a build without kmt._driver")
    def test_the_compiled_means_are_numpys(self):
        from kmt import _driver
        rng = np.random.default_rng(5)
        for dtype in (np.float32, np.float64):
            for shape in ((1, 1), (1, 7), (4099, 32), (4096, 33), (20000, 5), (3, 70)):
                X = (rng.normal(size=shape) * 10 + 1e4).astype(dtype)
                self.assertEqual(_driver.column_means(X).tobytes(), X.mean(axis=0).tobytes())
                self.assert_numpy_means(X)
            # A column of -0 has the mean +0; NaN and infinities carry through.
            X = np.full((5, 3), -0.0, dtype)
            X[2, 1], X[3, 2] = np.nan, np.inf
            self.assertEqual(_driver.column_means(X).tobytes(), X.mean(axis=0).tobytes())

    def test_other_layouts_are_numpys(self):
        X = np.random.default_rng(6).normal(size=(300, 8))
        for Y in (np.asfortranarray(X), X[::2], X.astype(np.float16)):
            self.assert_numpy_means(Y)


class FitVariancesTest(unittest.TestCase):
    """kmt.served.fit_variances, the tolerance's variances, is numpy's
    np.var(X, axis=0) to the bit (a float16 X's of its float32 values), by
    the compiled extension without numpy's n x d array of deviations where
    it applies."""

    def test_the_variances_are_numpys(self):
        from kmt.served import fit_variances
        rng = np.random.default_rng(5)
        for dtype in (np.float32, np.float64, np.float16):
            for shape in ((1, 1), (1, 7), (4099, 32), (4096, 33), (20000, 5), (3, 70), (2000, 1)):
                X = (rng.normal(size=shape) * 10 + (100 if dtype == np.float16 else 1e4))
                X = X.astype(dtype)
                want = np.var(X.astype(np.float32) if dtype == np.float16 else X, axis=0)
                self.assertEqual(fit_variances(X).tobytes(), want.tobytes(), f"{dtype} {shape}")
                Y = np.asfortranarray(X)
                want = np.var(Y.astype(np.float32) if dtype == np.float16 else Y, axis=0)
                self.assertEqual(fit_variances(Y).tobytes(), want.tobytes(), f"F {dtype} {shape}")


class PipelineTest(ServedTest):
    def test_grid_search_over_a_pipeline_picks_the_number_of_clusters(self):
        # Four classes, each a blob: a linear model on the distances to the
        # centers separates them once there are enough clusters.
        rng = np.random.default_rng(41)
        centers = rng.uniform(-10, 10, size=(4, 6))
        y = rng.integers(0, 4, size=800)
        X = centers[y] + rng.normal(0, 1.0, size=(800, 6))
        pipeline = Pipeline([("scale", StandardScaler()),
                             ("kmeans", kmt.KMeans(n_init="auto", random_state=0,
                                                   server=self.server.address)),
                             ("classify", LinearSVC(dual=False))])
        search = GridSearchCV(pipeline, {"kmeans__n_clusters": [1, 4, 8]}, cv=3)
        search.fit(X, y)
        self.assertIn(search.best_params_["kmeans__n_clusters"], (4, 8))
        self.assertGreater(search.best_score_, 0.95)
        self.assertEqual(search.best_estimator_.named_steps["kmeans"].cluster_centers_.shape[1],
                         6)
        self.assertGreater(search.score(X, y), 0.95)

    def test_grid_search_by_the_kmeans_score(self):
        X = mixture(600, 3, 5, seed=43, spread=0.3)
        search = GridSearchCV(kmt.KMeans(n_init="auto", random_state=0,
                                         server=self.server.address),
                              {"n_clusters": [2, 5], "init": ["k-means++", "random"]}, cv=3)
        search.fit(X)
        self.assertEqual(search.best_params_["n_clusters"], 5)  # less inertia, higher score


if __name__ == "__main__":
    unittest.main(verbosity=2)
