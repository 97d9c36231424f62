"""What the estimator suites share: kmt and the test harness on the path,
the data they cluster, and the comparison of a kmt fit with scikit-learn's."""
import os
import signal
import sys
import unittest

import numpy as np

SOURCE_DIR = os.environ["KMT_SOURCE_DIR"]
sys.path.insert(0, os.path.join(SOURCE_DIR, "tests/deploy"))
sys.path.insert(0, os.path.join(SOURCE_DIR, "python"))

import kmt  # noqa: E402,F401
from harness import Server  # noqa: E402


class ServedTest(unittest.TestCase):
    """Tests that share one kmt-server, started with SERVER_FLAGS."""
    SERVER_FLAGS = ("--model_dir=",)

    @classmethod
    def setUpClass(cls):
        cls.server = Server(*cls.SERVER_FLAGS)

    @classmethod
    def tearDownClass(cls):
        assert cls.server.stop() == 0


class TwoReplicasTest(ServedTest):
    """ServedTest with a second server: `both` names the two replicas, for
    resident fits whose shards spread over them."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.other = Server(*cls.SERVER_FLAGS)
        cls.both = f"ipv4:{cls.server.address},{cls.other.address}"

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        assert cls.other.stop() == 0


def jobs_by_code(server):
    """kmt_jobs_total of a server by its code label, from /metrics."""
    jobs = {}
    for line in server.metrics().splitlines():
        if line.startswith("kmt_jobs_total{"):
            code = line.split('code="', 1)[1].split('"', 1)[0]
            jobs[code] = float(line.rsplit(" ", 1)[1])
    return jobs


def fits_with_a_replica_killed(test, points, k, when, **options):
    """kmt.fit_resident of `points` on two fresh replicas a and b, once as it
    runs and once with b killed when a logged line starts with `when` (its
    shards move to a): both results. `options`: fit_resident's."""
    a = Server("--model_dir=", "--workers=1")
    b = Server("--model_dir=", "--workers=1")
    try:
        both = f"ipv4:{a.address},{b.address}"
        clean = kmt.fit_resident(both, points, k, **options)
        news = []

        def log(line):
            news.append(line)
            if line.startswith(when):
                b.proc.send_signal(signal.SIGKILL)
        killed = kmt.fit_resident(both, points, k, log=log, **options)
        test.assertTrue(any("failed" in line for line in news), news)
        return clean, killed
    finally:
        a.stop()
        b.stop()


def mixture(n, d, k, seed=7, spread=2.0, offset=0.0, dtype=np.float64):
    """n points around k centers drawn in [-6, 6]^d, Gaussian noise of
    `spread`, everything moved by `offset`: clusters that touch, so Lloyd's
    takes a few dozen iterations."""
    rng = np.random.default_rng(seed)
    centers = rng.uniform(-6, 6, size=(k, d))
    points = centers[rng.integers(0, k, size=n)] + rng.normal(0, spread, size=(n, d))
    return (points + offset).astype(dtype)


def rows(points, k, seed=11):
    """k distinct rows of the points, as initial centers."""
    return points[np.random.default_rng(seed).choice(len(points), size=k, replace=False)].copy()


def assert_same_fit(test, got, want, rtol):
    """A kmt fit equals scikit-learn's: the same labels and iterations, the
    centers and inertia to `rtol` (relative to the data's scale for the
    centers), the attributes of the same types."""
    np.testing.assert_array_equal(got.labels_, want.labels_)
    test.assertEqual(got.n_iter_, want.n_iter_)
    scale = np.abs(want.cluster_centers_).max()
    np.testing.assert_allclose(got.cluster_centers_, want.cluster_centers_, rtol=0,
                               atol=rtol * scale)
    test.assertAlmostEqual(got.inertia_, want.inertia_, delta=rtol * want.inertia_)
    test.assertEqual(got.cluster_centers_.dtype, want.cluster_centers_.dtype)
    test.assertEqual(got.labels_.dtype, want.labels_.dtype)
    test.assertIsInstance(got.n_iter_, int)
    test.assertIsInstance(got.inertia_, float)
