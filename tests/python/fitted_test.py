"""Fitted models through a real kmt-server watching a model directory: a fit
saved as version 1 is served by name with the labels and distances of the
estimator's predict, bit for bit; a refit saved as version 2 rolls out while
predictions by name run, none failing and each call answered by one version;
--keep_versions=2 retires version 1 once version 3 is out; the file reads
back into an estimator; the CLI's whole mode writes one too."""
import os
import subprocess
import tempfile
import threading
import time
import unittest

import numpy as np

from estimator_support import Server, kmt, mixture
from kmt.fitted import fingerprint  # noqa: E402 (kmt is on the path from here)

K, D = 6, 5


def wait_for(condition, seconds=60):
    """Polls until `condition()` holds (a bound for a loaded machine, not a
    measure); False if it never did."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


class FittedModelTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.models = tempfile.mkdtemp(prefix="kmt-fitted-models-")
        cls.server = Server(f"--model_dir={cls.models}", "--model_poll_s=0.05",
                            "--keep_versions=2")
        cls.address = cls.server.address

    @classmethod
    def tearDownClass(cls):
        assert cls.server.stop() == 0

    def listed(self, name):
        for info in kmt.Client(self.address).models():
            if info.name == name:
                return info
        return None

    def version_state(self, name, version):
        client = kmt.Client(self.address)
        response = client.stub.ListModels(kmt.pb.ListModelsRequest())
        for info in list(response.models) + list(response.unavailable):
            if info.name == name:
                for v in info.versions:
                    if v.version == version:
                        return kmt.pb.ModelVersionState.Name(v.state), v.reason
        return None, ""

    def fit(self, X, seed, dtype=np.float64):
        return kmt.KMeans(K, n_init=1, random_state=seed, server=self.address).fit(X.astype(dtype))

    def publish(self, estimator, name, version, X):
        path = os.path.join(self.models, name, str(version), "model.kmt")
        estimator.save_model(path, X=X)
        return path

    def test_a_saved_fit_is_served_by_name_as_predict_answers_bit_for_bit(self):
        for dtype in (np.float64, np.float32):
            with self.subTest(dtype=dtype.__name__):
                name = f"shop-{np.dtype(dtype).name}"
                X = mixture(3000, D, K, seed=3, offset=40.0, dtype=dtype)
                Y = mixture(2500, D, K, seed=4, offset=40.0, dtype=dtype)
                fitted = self.fit(X, seed=0, dtype=dtype)
                self.publish(fitted, name, 1, X)
                self.assertTrue(wait_for(lambda: self.listed(name) is not None))
                info = self.listed(name)
                self.assertEqual((info.kind, info.d, info.k), ("fitted", D, K))
                self.assertEqual(info.fitted.n, len(X))
                self.assertEqual(info.fitted.inertia, fitted.inertia_)
                self.assertEqual(info.fitted.iterations, fitted.n_iter_)
                self.assertEqual(info.fitted.algorithm, "KMeans/lloyd")
                self.assertEqual(info.fitted.data_fingerprint, fingerprint(X))
                self.assertTrue(info.provenance.created.endswith("Z"))

                served = kmt.ServedModel(name, server=self.address)
                np.testing.assert_array_equal(served.predict(Y), fitted.predict(Y))
                self.assertEqual(served.model_version_, 1)
                np.testing.assert_array_equal(served.transform(Y), fitted.transform(Y))
                self.assertEqual(served.score(Y), fitted.score(Y))
                # Fewer points than centers: completed on the server.
                np.testing.assert_array_equal(served.predict(Y[:2]), fitted.predict(Y[:2]))

                loaded = kmt.KMeans.from_model(os.path.join(self.models, name, "1", "model.kmt"),
                                               server=self.address)
                np.testing.assert_array_equal(loaded.cluster_centers_, fitted.cluster_centers_)
                self.assertEqual(loaded.cluster_centers_.dtype, fitted.cluster_centers_.dtype)
                self.assertEqual(loaded.inertia_, fitted.inertia_)
                np.testing.assert_array_equal(loaded.predict(Y), fitted.predict(Y))

    def test_a_refit_rolls_out_under_predictions_and_older_versions_retire(self):
        name = "rolling"
        X1 = mixture(2000, D, K, seed=5)
        X2 = mixture(2000, D, K, seed=6, offset=0.7)
        X3 = mixture(2000, D, K, seed=7, offset=1.4)
        Y = mixture(1000, D, K, seed=8, offset=0.7)
        fits = {1: self.fit(X1, 1), 2: self.fit(X2, 2), 3: self.fit(X3, 3)}
        want = {v: f.predict(Y) for v, f in fits.items()}
        self.assertFalse(np.array_equal(want[1], want[2]))
        self.publish(fits[1], name, 1, X1)
        self.assertTrue(wait_for(lambda: self.listed(name) is not None))

        answers, failures, stop = [], [], threading.Event()

        def predict_in_a_loop():
            served = kmt.ServedModel(name, server=self.address, batch_size=100)
            while not stop.is_set():
                try:
                    labels = served.predict(Y)  # 10 batches, one version
                    answers.append((served.model_version_, labels))
                except Exception as e:  # a failed call fails the test below
                    failures.append(e)

        thread = threading.Thread(target=predict_in_a_loop)
        thread.start()
        try:
            self.assertTrue(wait_for(lambda: len(answers) >= 3))
            self.publish(fits[2], name, 2, X2)
            self.assertTrue(wait_for(lambda: sum(v == 2 for v, _ in answers) >= 3))
            self.publish(fits[3], name, 3, X3)
            self.assertTrue(wait_for(lambda: sum(v == 3 for v, _ in answers) >= 3))
        finally:
            stop.set()
            thread.join()
        self.assertEqual(failures, [])
        for version, labels in answers:
            np.testing.assert_array_equal(labels, want[version], err_msg=f"version {version}")
        self.assertEqual({v for v, _ in answers}, {1, 2, 3})
        state, reason = self.version_state(name, 1)
        self.assertEqual(state, "MODEL_VERSION_RETIRED")
        self.assertEqual(reason, "older than the latest 2 available (--keep_versions)")
        self.assertEqual(self.version_state(name, 2)[0], "MODEL_VERSION_AVAILABLE")
        np.testing.assert_array_equal(
            kmt.ServedModel(name, version=2, server=self.address).predict(Y), want[2])

    def test_requests_the_model_cannot_take_are_refused_by_name(self):
        name = "narrow"
        X = mixture(500, D, K, seed=9)
        self.publish(self.fit(X, 0), name, 1, X)
        self.assertTrue(wait_for(lambda: self.listed(name) is not None))
        with self.assertRaisesRegex(ValueError, f"d = {D + 1}, but model '{name}' is fitted: "
                                    f"its centers have d = {D}"):
            kmt.ServedModel(name, server=self.address).predict(np.zeros((3, D + 1)))
        client = kmt.Client(self.address)
        with self.assertRaisesRegex(kmt.ClusterError, f"centers_f64 is set; model '{name}' is "
                                    f"fitted: it serves its own {K} centers"):
            client.cluster(X[:20], K, model=name, iterations=0, centers=X[:K])
        with self.assertRaisesRegex(ValueError, "must name a fitted model; 'lloyd-onehot'"):
            kmt.ServedModel("lloyd-onehot", server=self.address).predict(X)

    def test_lloyds_steps_from_the_fitted_centers_adapt_them_to_a_batch(self):
        name = "steps"
        X = mixture(2000, D, K, seed=10)
        fitted = self.fit(X, 0)
        self.publish(fitted, name, 1, X)
        self.assertTrue(wait_for(lambda: self.listed(name) is not None))
        drifted = X + 0.5
        result = kmt.Client(self.address).cluster(drifted, 0, model=name, iterations=10)
        given = kmt.Client(self.address).cluster(drifted, K, iterations=10,
                                                 centers=fitted.cluster_centers_)
        self.assertEqual(result.model_version, 1)
        self.assertLess(result.objective, fitted.score(drifted) * -1)
        np.testing.assert_allclose(result.centers, given.centers, rtol=0, atol=1e-9)

    def test_the_command_line_writes_a_fitted_model(self):
        X = mixture(3000, D, K, seed=12).astype(np.float32)
        data = os.path.join(self.models, "..", "cli-points.npy")
        np.save(data, X)
        path = os.path.join(self.models, "cli", "1", "model.kmt")
        subprocess.run([os.environ["KMT_CLI"], "cluster", f"--server={self.address}",
                        f"--input={data}", f"--k={K}", "--mode=whole", "--batch_size=1000",
                        f"--model_out={path}"], check=True, capture_output=True)
        self.assertTrue(wait_for(lambda: self.listed("cli") is not None))
        info = self.listed("cli")
        self.assertEqual((info.kind, info.d, info.k, info.fitted.n), ("fitted", D, K, len(X)))
        self.assertEqual(info.fitted.algorithm, "lloyd")
        loaded = kmt.KMeans.from_model(path, server=self.address)
        served = kmt.ServedModel("cli", server=self.address)
        np.testing.assert_array_equal(served.predict(X), loaded.predict(X))
        np.testing.assert_array_equal(served.transform(X), loaded.transform(X))
        listed = subprocess.run([os.environ["KMT_CLI"], "models", f"--server={self.address}"],
                                check=True, capture_output=True, text=True).stdout
        self.assertIn(f"  fitted: version 1, float32, n={len(X)} inertia=", listed)
        self.assertIn(f"iterations={info.fitted.iterations} algorithm=lloyd", listed)

    def test_a_mini_batch_fit_saves_and_serves_as_it_predicts(self):
        X = mixture(4000, D, K, seed=13)
        fitted = kmt.MiniBatchKMeans(K, n_init=1, random_state=0, batch_size=512,
                                     server=self.address).fit(X)
        self.publish(fitted, "minibatch", 1, X)
        self.assertTrue(wait_for(lambda: self.listed("minibatch") is not None))
        self.assertEqual(self.listed("minibatch").fitted.algorithm, "MiniBatchKMeans")
        np.testing.assert_array_equal(
            kmt.ServedModel("minibatch", server=self.address).predict(X), fitted.predict(X))


if __name__ == "__main__":
    unittest.main(verbosity=2)
