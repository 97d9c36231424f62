"""Resident jobs from Python (kmt.fit_resident) on real kmt-server replicas:
k-means++ over the shards chooses the server's centers for the seed,
k-means‖ the C++ coordinator's (`kmt cluster --init='kmeans||'`), Lloyd's
over the shards equals Lloyd's on all points at once, and a replica killed
during the iterations, during k-means++ or during k-means‖ changes
nothing, nor does one drained (SIGTERM) in the middle of a kmt.KMeans fit.
A job that ends as its client meant it to is counted OK on the replica,
not CANCELLED."""
import os
import signal
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

import numpy as np

SOURCE_DIR = os.environ["KMT_SOURCE_DIR"]
sys.path.insert(0, os.path.join(SOURCE_DIR, "tests/deploy"))
sys.path.insert(0, os.path.join(SOURCE_DIR, "python"))

import kmt  # noqa: E402
from estimator_support import fits_with_a_replica_killed, jobs_by_code  # noqa: E402
from harness import Server  # noqa: E402

K = 6


def mixture(n, d, seed=21):
    rng = np.random.default_rng(seed)
    centers = rng.uniform(0, 4, size=(16, d))
    return (centers[rng.integers(0, 16, size=n)] + rng.normal(0, 0.5, size=(n, d))).astype(
        np.float32)


POINTS = mixture(30000, 8)


class ResidentTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.a = Server("--model_dir=", "--workers=1")
        cls.b = Server("--model_dir=", "--workers=1")
        cls.both = f"ipv4:{cls.a.address},{cls.b.address}"
        cls.client = kmt.Client(cls.a.address, timeout=120)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        assert cls.a.stop() == 0
        assert cls.b.stop() == 0

    def test_kmeans_plus_plus_over_the_shards_chooses_the_servers_centers(self):
        for plain, init in ((False, "kmeans++"), (True, "plain-kmeans++")):
            with self.subTest(init=init):
                got = kmt.fit_resident(self.both, POINTS, K, iterations=0, seed=4,
                                       plain_seeding=plain, streams_per_server=2, timeout=120)
                self.assertEqual(got.shards, 4)
                want = self.client.cluster(POINTS, K, iterations=0, init=init, seed=4)
                np.testing.assert_array_equal(got.centers, want.centers)
                np.testing.assert_array_equal(got.labels, want.labels)

    def test_kmeans_parallel_chooses_the_centers_of_the_cli_for_the_seed(self):
        with tempfile.TemporaryDirectory() as work:
            POINTS.tofile(os.path.join(work, "points.f32"))
            out = os.path.join(work, "centers.npy")
            for seed in (4, 5):
                with self.subTest(seed=seed):
                    subprocess.run(
                        [os.environ["KMT_CLI"], "cluster", "--mode=whole",
                         f"--server={self.both}", "--streams=2",
                         f"--input={os.path.join(work, 'points.f32')}", "--d=8", f"--k={K}",
                         "--iterations=0", f"--seed={seed}", "--init=kmeans||",
                         f"--centers_out={out}"], check=True, capture_output=True)
                    news = []
                    got = kmt.fit_resident(self.both, POINTS, K, iterations=0, seed=seed,
                                           init="kmeans||", streams_per_server=2, timeout=120,
                                           log=news.append)
                    np.testing.assert_array_equal(got.centers, np.load(out))
                    self.assertIn("k-means||: 2 rounds", " ".join(news))

    def test_lloyds_over_the_shards_is_lloyds_on_all_points(self):
        start = POINTS[:K]
        got = kmt.fit_resident(self.both, POINTS, K, centers=start, iterations=7,
                               streams_per_server=2, chunk_bytes=64 << 10, timeout=120)
        want = self.client.cluster(POINTS, K, iterations=7, centers=start)
        self.assertEqual(got.iterations_run, 7)
        np.testing.assert_array_equal(got.labels, want.labels)
        # The double sums are added per shard here and per block in the
        # server: their float means may differ by one rounding.
        np.testing.assert_allclose(got.centers, want.centers, rtol=1e-6)
        self.assertAlmostEqual(got.objective, want.objective, delta=1e-6 * want.objective)
        self.assertEqual(len(got.objectives), 7)
        # One replica or two, one shard each or two: the same bits.
        one = kmt.fit_resident(self.a.address, POINTS, K, centers=start, iterations=7,
                               streams_per_server=4, timeout=120)
        np.testing.assert_array_equal(one.centers, got.centers)
        self.assertEqual(one.objectives, got.objectives)
        # Without the iterations' objectives, the same answer; those are NaN.
        ends = kmt.fit_resident(self.both, POINTS, K, centers=start, iterations=7,
                                streams_per_server=2, timeout=120, iteration_objectives=False)
        np.testing.assert_array_equal(ends.centers, got.centers)
        np.testing.assert_array_equal(ends.labels, got.labels)
        self.assertEqual(ends.objective, got.objective)
        self.assertTrue(all(np.isnan(o) for o in ends.objectives[:-1]))
        self.assertEqual(ends.objectives[-1], got.objective)

    def test_ctrl_c_or_a_raising_callback_ends_the_job_within_a_step(self):
        seen = []

        def interrupt(t, *_):
            seen.append(t)
            if t == 2:
                os.kill(os.getpid(), signal.SIGINT)
        with self.assertRaises(KeyboardInterrupt):
            kmt.fit_resident(self.both, POINTS, K, iterations=50, tol=0.0, seed=4,
                             on_iteration=interrupt, timeout=120)
        self.assertEqual(seen, [0, 1, 2])

        def fail(t, *_):
            seen.append(t)
            raise RuntimeError(f"stop at {t}")
        seen.clear()
        with self.assertRaisesRegex(RuntimeError, "stop at 0"):
            kmt.fit_resident(self.both, POINTS, K, iterations=50, seed=4, on_iteration=fail,
                             timeout=120)
        self.assertEqual(seen, [0])
        # The replicas end those jobs: a next one runs as usual.
        self.assertEqual(kmt.fit_resident(self.both, POINTS, K, iterations=1, seed=4,
                                          timeout=120).iterations_run, 1)

    def test_a_large_shards_raw_labels_come_over_several_responses_in_order(self):
        # More labels than one response carries (2^20), as int32 bytes.
        n = (1 << 20) + 4321
        points = ((np.arange(n, dtype=np.int64) * 7919) % 1000).astype(np.float32)[:, None]
        start = np.array([[100.0], [500.0], [900.0]], dtype=np.float32)
        got = kmt.fit_resident(self.a.address, points, 3, centers=start, iterations=2,
                               timeout=120)
        self.assertEqual(got.shards, 1)
        # The final labels are the nearest of the final centers: assigned in
        # two requests, each within the server's points per batch.
        half = n // 2
        want = [self.client.cluster(part, 3, iterations=0, centers=got.centers).labels
                for part in (points[:half], points[half:])]
        np.testing.assert_array_equal(got.labels, np.concatenate(want))

    def test_a_job_that_ends_as_its_client_meant_counts_ok(self):
        before = jobs_by_code(self.a), jobs_by_code(self.b)
        # scikit-learn's name of k-means++ as well as ours.
        got = kmt.fit_resident(self.both, POINTS, K, iterations=3, seed=4, init="k-means++",
                               streams_per_server=2, timeout=120)
        want = kmt.fit_resident(self.both, POINTS, K, iterations=3, seed=4, init="kmeans++",
                                streams_per_server=2, timeout=120)
        np.testing.assert_array_equal(got.centers, want.centers)
        kmt.KMeans(K, n_init=1, max_iter=5, random_state=0, batch_size=5000,
                   server=self.both).fit(POINTS)
        for server, counted in zip((self.a, self.b), before):
            with self.subTest(server=server.address):
                jobs = jobs_by_code(server)
                # Two shards on each replica per fit, three fits: six jobs, all OK.
                self.assertEqual(jobs["OK"] - counted["OK"], 6)
                self.assertEqual(jobs["CANCELLED"], counted["CANCELLED"])
        with self.assertRaisesRegex(ValueError, r"init 'kmeans\+': expected one of kmeans\+\+ "
                                                r"or k-means\+\+, plain-kmeans\+\+, kmeans\|\| or "
                                                r"k-means\|\|, random"):
            kmt.fit_resident(self.a.address, POINTS, K, init="kmeans+")

    def test_an_error_of_the_job_itself_is_raised_naming_the_shard(self):
        # d = 5000 is beyond the server's --max_d: not a replica failure, no move.
        with self.assertRaises(kmt.ServiceError) as caught:
            kmt.fit_resident(self.a.address, POINTS[:, :1].repeat(5000, axis=1)[:10], 2,
                             iterations=1, timeout=60)
        self.assertEqual(caught.exception.code.name, "INVALID_ARGUMENT")
        self.assertIn(f"shard 0 on {self.a.address}", caught.exception.message)


class ResidentFaultTest(unittest.TestCase):
    def run_killed(self, when, **more):
        """A clean run and one where replica b is killed once a logged line
        starts with `when`; both results. `more`: fit_resident's options."""
        return fits_with_a_replica_killed(self, POINTS, K, when, iterations=6, seed=4,
                                          streams_per_server=2, timeout=120, **more)

    def check_same(self, clean, killed):
        self.assertEqual(killed.shard_moves, 2)  # b held two of the four shards
        np.testing.assert_array_equal(killed.centers, clean.centers)
        np.testing.assert_array_equal(killed.labels, clean.labels)
        self.assertEqual(killed.objective, clean.objective)
        self.assertEqual(killed.objectives, clean.objectives)

    def test_a_replica_killed_mid_job_changes_nothing(self):
        # After the third iteration's sums are in: the fourth finds its
        # shards' streams broken.
        clean, killed = self.run_killed("step 3 ")
        self.assertGreaterEqual(clean.iterations_run, 4)
        self.check_same(clean, killed)

    def test_a_replica_killed_during_kmeans_plus_plus_changes_nothing(self):
        # Once 4 centers are chosen: b's shards go to a, which first takes
        # the chosen centers into their distances.
        self.check_same(*self.run_killed("k-means++: 4 of"))

    def test_a_replica_killed_during_kmeans_parallel_changes_nothing(self):
        # After the second round's sample: b's shards go to a, which first
        # takes the groups of centers of the rounds before into their
        # distances, to the bit.
        self.check_same(*self.run_killed("k-means||: round 2 ", init="kmeans||"))


class ResidentDrainTest(unittest.TestCase):
    def test_a_replica_drained_mid_fit_changes_nothing(self):
        """kmt.KMeans as a resident job (batch_size below n) on two replicas,
        b drained after the second iteration, as a rolling update drains a
        pod: its streams end UNAVAILABLE at their next step, the driver
        (kmt._driver) moves b's shards to a and the fit equals a fit without
        the drain, to the bit."""
        a = Server("--model_dir=", "--workers=1")
        b = Server("--model_dir=", "--workers=1")
        try:
            options = dict(n_clusters=K, n_init=1, max_iter=6, tol=0.0, random_state=4,
                           server=f"ipv4:{a.address},{b.address}",
                           batch_size=len(POINTS) // 3, streams_per_server=2)
            clean = kmt.KMeans(**options).fit(POINTS)
            self.assertEqual(clean.n_iter_, 6)
            news = []
            fit_resident = kmt.resident.fit_resident

            def drained_at_step_2(*args, **kwargs):
                def log(line):
                    news.append(line)
                    if line.startswith(("step 2 ", "step 2,")):
                        b.drain()
                return fit_resident(*args, log=log, **kwargs)
            with mock.patch.object(kmt.resident, "fit_resident", drained_at_step_2):
                drained = kmt.KMeans(**options).fit(POINTS)
            moved = [line for line in news
                     if f"{b.address} failed (UNAVAILABLE: server is shutting down" in line]
            self.assertEqual(len(moved), 2, news)  # b held two of the four shards
            np.testing.assert_array_equal(drained.cluster_centers_, clean.cluster_centers_)
            np.testing.assert_array_equal(drained.labels_, clean.labels_)
            self.assertEqual(drained.inertia_, clean.inertia_)
            self.assertEqual(drained.n_iter_, clean.n_iter_)
        finally:
            a.stop()
            b.stop()


if __name__ == "__main__":
    unittest.main(verbosity=2)
