"""The variants' estimators, learned models through model=, and
kmt.MiniBatchKMeans through a real kmt-server: each variant fits as the
server's model does for the same request, its parameter is checked against
the range ListModels gives, models without a weighted form refuse
sample_weight; MiniBatchKMeans and its partial_fit follow scikit-learn's
MiniBatchKMeans step for step from the same initial centers and random
state."""
import importlib
import itertools
import unittest
from unittest import mock

import numpy as np
import sklearn.cluster
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.validation import has_fit_parameter

from estimator_support import SOURCE_DIR, ServedTest, kmt, mixture, rows

K = 4
# The request seed an estimator with random_state=0 and given centers sends.
SEED_OF_RANDOM_STATE_0 = int(np.random.RandomState(0).randint(np.iinfo(np.int32).max))
VARIANTS = ((kmt.SoftKMeans, "soft-kmeans", {"beta": 2.0}),
            (kmt.SphericalKMeans, "spherical-kmeans", {}),
            (kmt.TrimmedKMeans, "trimmed-kmeans", {"tau": 0.5}),
            (kmt.RobustKMeans, "robust-kmeans", {"beta": 3.0}),
            (kmt.KMedoids, "kmedoids", {"gamma": 1.5}))


class VariantsTest(ServedTest):
    SERVER_FLAGS = (f"--model_dir={SOURCE_DIR}/models",)  # and the learned models
    points = mixture(1500, 3, K, seed=53, offset=2.0)

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.client = kmt.Client(cls.server.address, timeout=120)
        cls.infos = {m.name: m for m in cls.client.models()}

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        super().tearDownClass()

    def test_each_variant_fits_as_its_model_computes(self):
        init = rows(self.points, K)
        for estimator, model, parameters in VARIANTS:
            with self.subTest(model=model):
                fitted = estimator(K, init=init, max_iter=15, tol=0.0, random_state=0,
                                   server=self.server.address, **parameters).fit(self.points)
                self.assertEqual(fitted.cluster_centers_.shape, (K, 3))
                self.assertEqual(fitted.labels_.dtype, np.int32)
                # The same request as the client sends it, points not
                # centered: the algorithms are translation invariant (all
                # but spherical k-means, whose points are never moved).
                want = self.client.cluster(self.points, K, model=model, centers=init,
                                           iterations=15, tol=0.0,
                                           seed=SEED_OF_RANDOM_STATE_0, parameters=parameters)
                np.testing.assert_array_equal(fitted.labels_, want.labels)
                np.testing.assert_allclose(fitted.cluster_centers_, want.centers, rtol=1e-4,
                                           atol=1e-4)
                self.assertAlmostEqual(fitted.inertia_, want.objective,
                                       delta=1e-4 * want.objective)
                self.assertEqual(fitted.n_iter_, want.iterations_run)
                # predict is the nearest final center, as labels_ is.
                np.testing.assert_array_equal(fitted.predict(self.points), fitted.labels_)

    def test_parameters_are_checked_against_the_servers_ranges(self):
        for estimator, model, parameters in VARIANTS:
            for described in self.infos[model].parameters:
                with self.subTest(model=model, parameter=described.name):
                    self.assertIn(described.name, parameters)
                    beyond = described.min - (0 if described.min_exclusive else 1)
                    with self.assertRaisesRegex(InvalidParameterError,
                                                f"The '{described.name}' parameter of "
                                                f"{estimator.__name__} must be in"):
                        estimator(K, server=self.server.address,
                                  **{described.name: beyond}).fit(self.points)

    def test_models_without_a_weighted_form_take_no_sample_weight(self):
        weights = np.linspace(0.5, 2, len(self.points))
        for estimator, model, _ in VARIANTS:
            with self.subTest(model=model):
                # The estimator's fit takes sample_weight where the server's
                # model has a weighted form, as ListModels says.
                takes = has_fit_parameter(estimator, "sample_weight")
                self.assertEqual(takes, self.infos[model].accepts_weights)
                if takes:
                    estimator(K, random_state=0, server=self.server.address).fit(
                        self.points, sample_weight=weights)
                else:
                    with self.assertRaisesRegex(ValueError, f"The server's model '{model}' "
                                                            "does not take sample_weight"):
                        kmt.KMeans(K, model=model, n_init=1, server=self.server.address).fit(
                            self.points, sample_weight=weights)

    def test_spherical_kmeans_compares_directions(self):
        fitted = kmt.SphericalKMeans(K, random_state=0, server=self.server.address).fit(
            self.points)
        np.testing.assert_allclose(np.linalg.norm(fitted.cluster_centers_, axis=1), 1.0,
                                   rtol=1e-5)
        # Scaling a point does not move it to another cluster.
        np.testing.assert_array_equal(fitted.predict(self.points * 7.0), fitted.labels_)

    def test_learned_models_through_model(self):
        learned = "learned-onehot-d32-k10-kpp"
        points = mixture(2000, 32, 10, seed=59, spread=0.5)
        fitted = kmt.KMeans(10, model=learned, n_init=1, max_iter=10, random_state=0,
                            server=self.server.address).fit(points)
        self.assertEqual(fitted.cluster_centers_.shape, (10, 32))
        exact = kmt.KMeans(10, n_init=1, max_iter=10, random_state=0,
                           server=self.server.address).fit(points)
        self.assertLess(fitted.inertia_, 1.5 * exact.inertia_)
        with self.assertRaisesRegex(ValueError, f"The server's model '{learned}' is made for "
                                                "10 clusters; got 4"):
            kmt.KMeans(4, model=learned, n_init=1, server=self.server.address).fit(points)
        with self.assertRaisesRegex(ValueError, f"The server's model '{learned}' is made for "
                                                "32 features; got 3"):
            kmt.KMeans(10, model=learned, n_init=1, server=self.server.address).fit(
                self.points)

    def test_guard_runs_a_learned_model_guarded(self):
        learned = "learned-onehot-d32-k10"
        points = mixture(2000, 32, 10, seed=59, spread=0.5)
        init = rows(points, 10)

        def guarded_layers():
            return sum(float(line.rsplit(" ", 1)[1])
                       for line in self.server.metrics().splitlines()
                       if line.startswith("kmt_guard_layers_total{")
                       and f'model="{learned}"' in line)
        before = guarded_layers()
        fitted = kmt.KMeans(10, model=learned, guard=True, init=init, n_init=1, max_iter=6,
                            random_state=0, server=self.server.address).fit(points)
        # Each of the 6 layers ran guarded: the learned step or Lloyd's.
        self.assertEqual(guarded_layers() - before, 6)
        want = self.client.cluster(points, 10, model=learned, centers=init, iterations=6,
                                   guard=True, seed=SEED_OF_RANDOM_STATE_0)
        np.testing.assert_array_equal(fitted.labels_, want.labels)
        np.testing.assert_allclose(fitted.cluster_centers_, want.centers, rtol=1e-6, atol=1e-6)
        self.assertEqual(fitted.get_params()["guard"], True)
        # Unguarded, the same fit adds no guarded layer.
        before = guarded_layers()
        fitted.set_params(guard=False).fit(points)
        self.assertEqual(guarded_layers(), before)

    def test_a_variant_larger_than_one_request_is_refused(self):
        with self.assertRaisesRegex(ValueError, "only Lloyd's runs as a resident job"):
            kmt.SoftKMeans(K, batch_size=100, server=self.server.address).fit(self.points)

    def test_the_estimators_act_on_the_traits_list_models_gives(self):
        infos = self.infos
        self.assertTrue(infos["spherical-kmeans"].unit_norm)
        self.assertFalse(infos["spherical-kmeans"].translation_invariant)
        for _, model, _ in VARIANTS[:1] + VARIANTS[2:]:
            self.assertTrue(infos[model].translation_invariant, model)
        self.assertFalse(infos["learned-onehot-d32-k10"].translation_invariant)
        # A Lloyd's model at its defaults runs as a resident job, whatever its
        # name: the same fit as lloyd-onehot's; with its parameter set it does
        # not.
        self.assertTrue(infos["lloyd-onehot-linear"].lloyd_at_defaults)
        self.assertFalse(infos["soft-kmeans"].lloyd_at_defaults)
        fits = [kmt.KMeans(K, model=model, n_init=1, batch_size=500, random_state=0,
                           server=self.server.address).fit(self.points)
                for model in ("lloyd-onehot", "lloyd-onehot-linear")]
        np.testing.assert_array_equal(fits[1].labels_, fits[0].labels_)
        np.testing.assert_array_equal(fits[1].cluster_centers_, fits[0].cluster_centers_)
        # The points are sent minus their mean: predict, far from the origin,
        # gives the fit's labels.
        np.testing.assert_array_equal(fits[1].predict(self.points), fits[1].labels_)


class ServerLimitsTest(ServedTest):
    """A server whose --max_points is below the message's: requests carry
    at most as many points as ListModels says."""
    SERVER_FLAGS = ("--model_dir=", "--max_points=400")
    points = mixture(1500, 3, K, seed=67)

    def test_fit_beyond_max_points_runs_as_a_resident_job_and_predict_in_batches(self):
        self.assertTrue(all(m.max_points == 400
                            for m in kmt.Client(self.server.address).models()))
        fitted = kmt.KMeans(K, n_init=1, random_state=0, server=self.server.address).fit(
            self.points)
        resident = kmt.KMeans(K, n_init=1, random_state=0, batch_size=400,
                              server=self.server.address).fit(self.points)
        np.testing.assert_array_equal(fitted.labels_, resident.labels_)
        np.testing.assert_array_equal(fitted.predict(self.points), fitted.labels_)
        self.assertEqual(fitted.transform(self.points).shape, (len(self.points), K))


class MiniBatchKMeansTest(ServedTest):
    points = mixture(6000, 4, K, seed=61)

    def both(self, **options):
        return (kmt.MiniBatchKMeans(K, server=self.server.address, **options),
                sklearn.cluster.MiniBatchKMeans(K, **options))

    def assert_close(self, got, want, rtol):
        scale = np.abs(want.cluster_centers_).max()
        np.testing.assert_allclose(got.cluster_centers_, want.cluster_centers_, rtol=0,
                                   atol=rtol * scale)
        self.assertEqual(got.cluster_centers_.dtype, want.cluster_centers_.dtype)

    def test_fit_follows_scikit_learns_steps(self):
        weights = np.random.default_rng(4).uniform(0.5, 2, size=len(self.points))
        for dtype in (np.float64, np.float32):
            for weighted in (False, True):
                with self.subTest(dtype=dtype.__name__, weighted=weighted):
                    points = self.points.astype(dtype)
                    got, want = self.both(init=rows(points, K), n_init=1, random_state=3,
                                          batch_size=256, tol=1e-4)
                    w = weights if weighted else None
                    got.fit(points, sample_weight=w)
                    want.fit(points, sample_weight=w)
                    self.assertEqual(got.n_steps_, want.n_steps_)
                    self.assertEqual(got.n_iter_, want.n_iter_)
                    self.assertGreater(got.n_steps_, 5)
                    self.assert_close(got, want, 1e-4)
                    np.testing.assert_array_equal(got.labels_, want.labels_)
                    self.assertAlmostEqual(got.inertia_, want.inertia_,
                                           delta=1e-4 * want.inertia_)

    def test_fit_draws_scikit_learns_batches_for_hundreds_of_steps(self):
        # The batches and the reassignments' new centers come from the same
        # RandomState stream, drawn in the driver or on the one shard: the
        # fits agree step for step, and the stream ends where scikit-learn's
        # does.
        module = importlib.import_module("kmt.minibatch")
        for dtype, on_shard in itertools.product((np.float32, np.float64), (True, False)):
            with self.subTest(dtype=dtype.__name__, on_shard=on_shard), mock.patch.object(
                    module, "SMALL_STEP_WORK", module.SMALL_STEP_WORK * on_shard):
                points = self.points.astype(dtype)
                states = np.random.RandomState(8), np.random.RandomState(8)
                options = dict(init=rows(points, K), n_init=1, batch_size=64, max_iter=3,
                               tol=0.0, max_no_improvement=None, reassignment_ratio=0.3)
                got = kmt.MiniBatchKMeans(K, server=self.server.address,
                                          random_state=states[0], **options).fit(points)
                want = sklearn.cluster.MiniBatchKMeans(K, random_state=states[1],
                                                       **options).fit(points)
                self.assertEqual(got.n_steps_, 3 * len(points) // 64)
                self.assertEqual(got.n_steps_, want.n_steps_)
                self.assert_close(got, want, 1e-5)
                np.testing.assert_array_equal(got.labels_, want.labels_)
                self.assertAlmostEqual(got.inertia_, want.inertia_, delta=1e-5 * want.inertia_)
                np.testing.assert_allclose(got._counts, want._counts, rtol=1e-6)
                self.assertEqual(states[0].randint(0, 2**31), states[1].randint(0, 2**31))

    def test_partial_fit_over_a_stream_of_batches_follows_scikit_learns(self):
        got, want = self.both(init=rows(self.points, K), n_init=1, random_state=0)
        for batch in np.array_split(self.points, 30):
            got.partial_fit(batch)
            want.partial_fit(batch)
            self.assert_close(got, want, 1e-4)
            np.testing.assert_array_equal(got.labels_, want.labels_)
        self.assertEqual(got.n_steps_, 30)
        np.testing.assert_allclose(got._counts, want._counts, rtol=1e-6)

    def test_partial_fit_on_batches_smaller_than_k(self):
        got, want = self.both(init=rows(self.points, K), n_init=1, random_state=0)
        # The first batch initialises, so it needs k points; later ones not.
        for batch in [self.points[:10], *np.array_split(self.points[10:70], 20)]:
            got.partial_fit(batch)
            want.partial_fit(batch)
        self.assert_close(got, want, 1e-4)

    def test_reassignment_of_starved_centers_as_scikit_learns(self):
        init = rows(self.points, K)
        init[1] = 80.0  # takes in nothing: reassigned to a batch point
        got, want = self.both(init=init, n_init=1, random_state=5, batch_size=100,
                              max_iter=2)
        got.fit(self.points)
        want.fit(self.points)
        self.assertLess(np.abs(got.cluster_centers_[1]).max(), 20)
        self.assert_close(got, want, 1e-4)

    def test_kmeans_plus_plus_on_the_init_sample(self):
        got = kmt.MiniBatchKMeans(K, n_init=3, random_state=0, server=self.server.address).fit(
            self.points)
        want = sklearn.cluster.MiniBatchKMeans(K, n_init=3, random_state=0).fit(self.points)
        self.assertLess(got.inertia_, 1.05 * want.inertia_)
        with self.assertWarnsRegex(FutureWarning, "will change from 3 to 'auto'"):
            kmt.MiniBatchKMeans(K, random_state=0, server=self.server.address).fit(self.points)


if __name__ == "__main__":
    unittest.main(verbosity=2)
