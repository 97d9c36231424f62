"""Float16 data through a real kmt-server: the client sends a float16 array
as float16 bytes (points_f16, no float32 copy), and kmt.KMeans's fit of
float16 X equals, to the bit, its fit of the float32 array of the same
values: labels, centers, inertia and iterations, in one request or as a
resident job, whose shards travel as float16 too; predict, transform and
score likewise."""
import unittest

import numpy as np
from numpy.testing import assert_array_equal

from estimator_support import Server, ServedTest, TwoReplicasTest, kmt, mixture, rows

K = 6


def wire_fields(request):
    """The raw payload fields a WireRequest carries."""
    return sorted(field for field, _ in request.arrays)


def assert_same_fit(test, got, want):
    assert_array_equal(got.labels_, want.labels_)
    test.assertEqual(got.cluster_centers_.dtype, np.float32)
    assert_array_equal(got.cluster_centers_, want.cluster_centers_)
    test.assertEqual(got.inertia_, want.inertia_)
    test.assertEqual(got.n_iter_, want.n_iter_)


class FitMeansTest(unittest.TestCase):
    def test_float16_means_are_the_float32_means_of_the_same_values(self):
        from kmt.served import column_means, fit_means
        rng = np.random.default_rng(5)
        for shape in ((1, 1), (1, 7), (4099, 32), (3, 70), (20000, 5)):
            X = (rng.normal(size=shape) * 100).astype(np.float16)
            X[0, 0] = 6e-8  # a subnormal
            got = fit_means(X)
            self.assertEqual(got.dtype, np.float32)
            self.assertEqual(got.tobytes(), column_means(X.astype(np.float32)).tobytes(), shape)
        # A column of -0 has the mean +0; NaN and infinities carry through.
        X = np.full((5, 3), -0.0, np.float16)
        X[2, 1], X[3, 2] = np.nan, np.inf
        self.assertEqual(fit_means(X).tobytes(), column_means(X.astype(np.float32)).tobytes())
        # Not C-contiguous: the same by numpy.
        X = (rng.normal(size=(300, 8)) * 100).astype(np.float16)
        self.assertEqual(fit_means(X[::2]).tobytes(),
                         column_means(X[::2].astype(np.float32)).tobytes())


class ClientTest(ServedTest):
    def test_float16_points_travel_as_float16_and_cluster_as_their_float32_values(self):
        cl = kmt.Client(self.server.address)
        points = mixture(2000, 5, K, offset=3.0, dtype=np.float16)
        centers = rows(points, K).astype(np.float32)
        wire = cl.wire_request(points, K, centers=centers)
        self.assertEqual(wire_fields(wire), ["centers_f32", "points_f16"])
        sent = dict(wire.arrays)["points_f16"]
        self.assertTrue(np.shares_memory(sent, points))  # no copy made to send it
        got = cl.cluster(points, K, centers=centers, iterations=4)
        want = cl.cluster(points.astype(np.float32), K, centers=centers, iterations=4)
        assert_array_equal(got.labels, want.labels)
        assert_array_equal(got.centers, want.centers)
        self.assertEqual(got.objective, want.objective)
        # Subnormals and the extremes of float16 widen exactly.
        tiny = np.array([[6e-8, 65504.0], [-6e-8, -65504.0], [1e-5, 0.0], [0.0, 1.0]],
                        dtype=np.float16)
        one = cl.cluster(tiny, 4, centers=tiny.astype(np.float32), iterations=0)
        assert_array_equal(one.centers, tiny.astype(np.float32))
        # A NaN is refused as a float32 one is.
        bad = points.copy()
        bad[7, 2] = np.nan
        with self.assertRaisesRegex(kmt.ClusterError, "point 7 has NaN in dimension 2"):
            cl.cluster(bad, K, centers=centers)
        cl.close()


class KMeansTest(ServedTest):
    def test_a_float16_fit_is_the_float32_fit_of_the_same_values(self):
        X = mixture(4000, 5, K, offset=20.0, dtype=np.float16)
        X32 = X.astype(np.float32)
        weights = np.random.default_rng(3).uniform(0.5, 2.0, size=len(X))
        for init, weighted, tol in ((rows(X32, K), False, 0.0), (rows(X32, K), True, 1e-4),
                                    ("k-means++", False, 1e-4)):
            with self.subTest(init=str(init)[:9], weighted=weighted, tol=tol):
                options = dict(init=init, tol=tol, random_state=5)
                sample_weight = weights if weighted else None
                got = kmt.KMeans(K, n_init=1, server=self.server.address, **options).fit(
                    X, sample_weight=sample_weight)
                want = kmt.KMeans(K, n_init=1, server=self.server.address, **options).fit(
                    X32, sample_weight=sample_weight)
                self.assertGreater(want.n_iter_, 3)
                assert_same_fit(self, got, want)
        # predict, transform and score of float16 X are those of its float32
        # values, and predict gives the fit's labels.
        assert_array_equal(got.predict(X), got.labels_)
        assert_array_equal(got.predict(X), want.predict(X32))
        self.assertEqual(got.transform(X).dtype, np.float32)
        assert_array_equal(got.transform(X), want.transform(X32))
        self.assertEqual(got.score(X), want.score(X32))
        # What the fit sent: the float16 array itself, no float32 copy.
        estimator = kmt.KMeans(K, n_init=1, init=rows(X32, K), server=self.server.address)
        cl = kmt.Client(self.server.address)
        plan = estimator._plan(X, None, distances=False)
        self.assertIs(plan.X, X)
        request = estimator._requests(plan, cl)[0]
        self.assertEqual(wire_fields(request), ["centers_f32", "points_f16"])
        self.assertTrue(np.shares_memory(dict(request.arrays)["points_f16"], X))
        cl.close()


class ResidentTest(TwoReplicasTest):
    """Float16 X beyond one request: a resident job on two replicas."""

    def test_a_resident_float16_fit_is_the_float32_fit_of_the_same_values(self):
        X = mixture(6000, 5, K, seed=21, offset=50.0, dtype=np.float16)
        X32 = X.astype(np.float32)
        for tol in (0.0, 1e-4):
            with self.subTest(tol=tol):
                options = dict(init=rows(X32, K), n_init=1, server=self.both, tol=tol,
                               batch_size=len(X) // 3)
                got = kmt.KMeans(K, **options).fit(X)
                want = kmt.KMeans(K, **options).fit(X32)
                self.assertGreater(want.n_iter_, 3)
                assert_same_fit(self, got, want)

    def test_float16_shards_travel_in_two_bytes_a_value(self):
        # A replica that takes messages of 150,000 bytes at most, and points
        # over the wire only (not from this client's memory): chunks of
        # 200,000 bytes of float32 values are too large for it, the same
        # points as float16 (and their float32 offset) are not.
        from kmt.served import fit_means
        small = Server("--model_dir=", "--max_message_bytes=150000", "--shared_points=false")
        try:
            X = mixture(4000, 16, K, seed=9, offset=5.0, dtype=np.float16)
            X32 = X.astype(np.float32)
            offset = fit_means(X)
            options = dict(centers=rows(X32, K), iterations=30, chunk_bytes=200_000,
                           offset=offset)
            # With tol the driver's variance comes from the shards' moments,
            # of the points shifted as the replicas hold them.
            for tol in (0.0, 1e-3):
                with self.subTest(tol=tol):
                    got = kmt.fit_resident(small.address, X, K, tol=tol, **options)
                    want = kmt.fit_resident(self.server.address, X32, K, tol=tol, **options)
                    assert_array_equal(got.labels, want.labels)
                    assert_array_equal(got.centers, want.centers)
                    self.assertEqual(got.objective, want.objective)
                    self.assertEqual(got.iterations_run, want.iterations_run)
            self.assertLess(got.iterations_run, 30)
            with self.assertRaisesRegex(kmt.ServiceError, "larger than max"):
                kmt.fit_resident(small.address, X32, K, **options)
        finally:
            assert small.stop() == 0


if __name__ == "__main__":
    unittest.main()
