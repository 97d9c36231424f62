"""kmt.MiniBatchKMeans as an online model, through a real kmt-server:
partial_fit with a forgetting factor follows a stream whose clusters drift
(its objective on each next batch within a stated factor of a fresh fit on
that batch) where the same stream without one lags far behind; the factor's
forms (decay_factor per batch or per point, half_life) are one rule; without
one, partial_fit is scikit-learn's; kmt.ModelPublisher publishes the model
as the versions of a served fitted model, which a server polling the
directory rolls out to the clients that label points by its name."""
import os
import shutil
import tempfile
import time
import unittest

import numpy as np
import sklearn.cluster

from estimator_support import ServedTest, kmt

K = 3


def drifting_stream(batches=60, size=400, d=4, speed=0.15, seed=5):
    """`batches` batches of `size` points around K means that each move
    `speed` per batch along a direction of their own (noise 0.5): after 60
    batches each mean is 9 away from where it began."""
    rng = np.random.default_rng(seed)
    start = rng.uniform(-6, 6, size=(K, d))
    direction = rng.normal(size=(K, d))
    direction /= np.linalg.norm(direction, axis=1)[:, None]
    for t in range(batches):
        means = start + speed * t * direction
        yield means[rng.integers(0, K, size)] + rng.normal(0, 0.5, size=(size, d))


def objective(centers, points):
    """The points' k-means objective under the centers, in float64."""
    return float(((points[:, None, :] - centers[None]) ** 2).sum(-1).min(1).sum())


class OnlineModelTest(ServedTest):
    batches = list(drifting_stream())

    def estimator(self, **options):
        return kmt.MiniBatchKMeans(K, init=self.batches[0][:K], n_init=1, random_state=0,
                                   server=self.server.address, **options)

    def follow(self, model, judged_from=30):
        """partial_fit over the stream; each batch from `judged_from` on is
        first scored by the model as it stands (before it sees the batch),
        as a ratio to a fresh k-means fit of that batch."""
        ratios = []
        for t, batch in enumerate(self.batches):
            if t >= judged_from:
                fresh = sklearn.cluster.KMeans(K, n_init=3, random_state=0).fit(batch).inertia_
                ratios.append(objective(model.cluster_centers_, batch) / fresh)
            model.partial_fit(batch)
        return np.array(ratios)

    def test_with_a_half_life_the_model_follows_the_drift_and_without_it_lags(self):
        following = self.follow(self.estimator(half_life=2))
        lagging = self.follow(self.estimator())
        # Within 1.5 of a fresh fit on every batch it has not seen yet
        # (about 1.3 on this stream), where weighing all history alike
        # leaves the centers many noise widths behind (about 13 times).
        self.assertLess(following.max(), 1.5)
        self.assertGreater(lagging.mean(), 5)

    def test_the_factors_forms_are_one_rule(self):
        batches = self.batches[:8]
        rows = len(batches[0])
        per_batch = self.estimator(decay_factor=0.5)
        half_life = self.estimator(half_life=1)
        per_point = self.estimator(decay_factor=0.5 ** (1 / rows), time_unit="points")
        for batch in batches:
            for model in (per_batch, half_life, per_point):
                model.partial_fit(batch)
        np.testing.assert_array_equal(per_batch.cluster_centers_, half_life.cluster_centers_)
        np.testing.assert_allclose(per_batch.cluster_centers_, per_point.cluster_centers_,
                                   rtol=1e-12)
        np.testing.assert_allclose(per_batch._counts, per_point._counts, rtol=1e-9)

    def test_without_a_factor_or_with_one_partial_fit_is_scikit_learns(self):
        got = self.estimator(decay_factor=1.0)
        want = sklearn.cluster.MiniBatchKMeans(K, init=self.batches[0][:K], n_init=1,
                                               random_state=0)
        for batch in self.batches[:10]:
            got.partial_fit(batch)
            want.partial_fit(batch)
        np.testing.assert_allclose(got.cluster_centers_, want.cluster_centers_, rtol=1e-6)
        np.testing.assert_allclose(got._counts, want._counts, rtol=1e-9)

    def test_the_forgetting_factor_is_checked(self):
        with self.assertRaisesRegex(ValueError, "decay_factor and half_life both set"):
            self.estimator(decay_factor=0.9, half_life=3).partial_fit(self.batches[0])
        for bad in ({"decay_factor": 0.0}, {"decay_factor": 1.5}, {"half_life": 0},
                    {"time_unit": "seconds"}):
            with self.subTest(**bad), self.assertRaises(ValueError):
                self.estimator(**bad).partial_fit(self.batches[0])


class PublishedModelTest(ServedTest):
    """A server that polls a model directory every 50 ms and keeps the
    latest 2 versions of each model."""
    directory = tempfile.mkdtemp(prefix="kmt-online-")
    SERVER_FLAGS = (f"--model_dir={directory}", "--model_poll_s=0.05", "--keep_versions=2")
    batches = OnlineModelTest.batches

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        shutil.rmtree(cls.directory, ignore_errors=True)

    def served_version(self):
        info = next((m for m in kmt.Client(self.server.address).models() if m.name == "live"),
                    None)
        return info.default_version if info is not None else 0

    def wait_for_version(self, version):
        deadline = time.monotonic() + 30
        while self.served_version() != version:
            self.assertLess(time.monotonic(), deadline, f"version {version} never served")
            time.sleep(0.02)

    def test_the_published_versions_follow_the_drift_and_answer_as_the_model_did(self):
        model = kmt.MiniBatchKMeans(K, init=self.batches[0][:K], n_init=1, random_state=0,
                                    half_life=2, server=self.server.address)
        publisher = kmt.ModelPublisher(self.directory, "live", every_batches=10)
        served = kmt.ServedModel("live", server=self.server.address)
        published = []
        for t, batch in enumerate(self.batches):
            model.partial_fit(batch)
            version = publisher.offer(model)
            if version is None:
                continue
            published.append(version)
            # What the model predicted when it was published is what the
            # server answers by name once the version is out, bit for bit;
            # and the version follows the stream: within 1.5 times a fresh
            # fit of the batch after it.
            expected = model.predict(self.batches[min(t + 1, len(self.batches) - 1)])
            self.wait_for_version(version)
            following = self.batches[min(t + 1, len(self.batches) - 1)]
            np.testing.assert_array_equal(served.predict(following), expected)
            self.assertEqual(served.model_version_, version)
            if t >= 30:
                fresh = sklearn.cluster.KMeans(K, n_init=3, random_state=0).fit(following)
                centers = model.cluster_centers_
                self.assertLess(objective(centers, following), 1.5 * fresh.inertia_)
        # The first batch's and every tenth after it.
        self.assertEqual(published, [1, 2, 3, 4, 5, 6])
        # --keep_versions=2: the older versions retired, their files kept.
        info = next(m for m in kmt.Client(self.server.address).models() if m.name == "live")
        states = {v.version: v.state for v in info.versions}
        self.assertEqual(states[6], kmt.pb.MODEL_VERSION_AVAILABLE)
        self.assertEqual(states[5], kmt.pb.MODEL_VERSION_AVAILABLE)
        self.assertEqual(states[1], kmt.pb.MODEL_VERSION_RETIRED)
        self.assertTrue(os.path.exists(os.path.join(self.directory, "live", "1", "model.kmt")))
        # A publisher started again goes on from the highest version there.
        self.assertEqual(kmt.ModelPublisher(self.directory, "live").publish(model), 7)

    def test_the_publisher_checks_its_settings(self):
        with self.assertRaisesRegex(ValueError, "every_batches=0"):
            kmt.ModelPublisher(self.directory, "x", every_batches=0)
        with self.assertRaisesRegex(ValueError, "non-empty file name"):
            kmt.ModelPublisher(self.directory, "a/b")
        with self.assertRaisesRegex(ValueError, "offer needs every_batches or every_seconds"):
            kmt.ModelPublisher(self.directory, "x").offer(None)


if __name__ == "__main__":
    unittest.main(verbosity=2)
