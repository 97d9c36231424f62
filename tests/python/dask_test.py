"""kmt.dask.KMeans on a dask.distributed LocalCluster of two worker processes
and two real kmt-server replicas: the same fit as scikit-learn's from the
same initial centers (with and without sample_weight, with an empty cluster
relocated, from a dask DataFrame), the same initial centers as kmt.KMeans's
for the same seed (k-means‖, k-means++, random), the blocks mapped through
the service by predict, transform and score, a worker and a replica killed
and a replica drained (SIGTERM) mid-fit without changing the result, and bad
input refused. Dask arrays of scipy.sparse blocks (CSR, CSC, made by
map_blocks) load as sparse shards: the fit of kmt.KMeans on the same points
made dense, k-means++ and k-means‖ as kmt.KMeans's on the matrix, and a
matrix of 2^17 features sent and held as its nonzeros."""
import contextlib
import os
import signal
import types
import unittest
import warnings
from unittest import mock

import dask
import dask.array as da
import dask.dataframe as dd
import distributed
import grpc
import numpy as np
import scipy.sparse as sp
import sklearn.cluster
from sklearn.utils._param_validation import InvalidParameterError

from estimator_support import (Server, ServedTest, TwoReplicasTest, assert_same_fit, jobs_by_code,
                               kmt, mixture, rows)
from sparse_test import documents, starts

import kmt.dask  # noqa: E402
import kmt.dask.job  # noqa: E402

K = 6


def blocks_of(points, size):
    """A dask array of `points` (an array, or a CSR matrix: CSR blocks) in
    blocks of `size` rows, each its own task with no dependency, so that
    Dask spreads them over the workers and computes a block again if its
    worker dies."""
    n = points.shape[0]
    copy = sp.csr_matrix if sp.issparse(points) else np.array
    return da.concatenate([
        da.from_delayed(dask.delayed(copy)(points[i:i + size]),
                        shape=(min(size, n - i), points.shape[1]), dtype=points.dtype,
                        meta=points[:0])
        for i in range(0, n, size)])


class Fitted:
    """A fit's attributes with labels_ computed."""

    def __init__(self, km):
        self.labels_ = km.labels_.compute()
        self.cluster_centers_, self.inertia_, self.n_iter_ = (km.cluster_centers_, km.inertia_,
                                                              km.n_iter_)


def held_shards(dask_worker):
    """Client.run: how many shards this worker holds for open fits."""
    return sum(len(shards) for (address, _), shards in kmt.dask.worker._held.items()
               if address == dask_worker.address)


def count_chunks(dask_worker):
    """Client.run: from now on this worker's shard loads note what they
    sent, (whether sparse, chunks, their bytes, the largest chunk's bytes),
    until counted_chunks."""
    module = kmt.dask.worker
    replica_of = getattr(module._replica, "uncounted", module._replica)
    noted = []

    class Counting:
        def __init__(self, replica):
            self.replica = replica

        def load(self, *args, **kwargs):
            shard = self.replica.load(*args, **kwargs)
            noted.append((kwargs.get("csr") is not None, shard.chunks, shard.chunk_bytes_sent,
                          shard.largest_chunk_bytes))
            return shard

    def counting(*args):
        return Counting(replica_of(*args))
    counting.uncounted, counting.noted = replica_of, noted
    module._replica = counting


def counted_chunks(dask_worker):
    """Client.run: the loads noted since count_chunks; counting stops."""
    module = kmt.dask.worker
    noted = module._replica.noted
    module._replica = module._replica.uncounted
    return noted


@contextlib.contextmanager
def chunks_sent():
    """The shard loads every worker makes in the block, as (whether sparse,
    chunks, their bytes, the largest chunk's bytes), in a list filled when
    it ends."""
    client.run(count_chunks)
    noted = []
    try:
        yield noted
    finally:
        noted.extend(c for loads in client.run(counted_chunks).values() for c in loads)


def jobs_ended(server):
    return sum(float(line.rsplit(" ", 1)[1]) for line in server.metrics().splitlines()
               if line.startswith("kmt_jobs_total{"))


# One cluster of two worker processes for every test (its start is most of
# a test's time); a worker killed is restarted by its nanny.
cluster = client = None


def setUpModule():
    global cluster, client
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None)
    client = distributed.Client(cluster)


def tearDownModule():
    client.close()
    cluster.close()


class DaskTest(TwoReplicasTest):
    SERVER_FLAGS = ("--model_dir=", "--workers=1")

    def fit(self, X, server=None, cls=None, sample_weight=None, **options):
        options = {"n_init": 1, **options}
        return (cls or kmt.dask.KMeans)(K, server=server or self.both, **options).fit(
            X, sample_weight=sample_weight)

    def test_same_fit_as_scikit_learn_from_the_same_initial_centers(self):
        points = mixture(4000, 5, K)
        weights = np.random.default_rng(3).uniform(0.5, 2.0, size=len(points))
        jobs = jobs_ended(self.server), jobs_ended(self.other)
        codes = jobs_by_code(self.server), jobs_by_code(self.other)
        for weighted in (False, True):
            with self.subTest(weighted=weighted):
                w = weights if weighted else None
                got = self.fit(blocks_of(points, 600), init=rows(points, K),
                               sample_weight=None if w is None else da.from_array(w, chunks=900))
                want = sklearn.cluster.KMeans(K, init=rows(points, K), n_init=1).fit(
                    points, sample_weight=w)
                self.assertGreater(want.n_iter_, 5)  # a real run, not one step
                assert_same_fit(self, Fitted(got), want, 1e-5)
                self.assertEqual(got.labels_.chunks, ((600,) * 6 + (400,),))
        # Blocks of unknown sizes (a boolean selection's) are measured as they load.
        X = da.from_array(points, chunks=700)
        unknown = X[X[:, 0] > -np.inf]
        self.assertTrue(np.isnan(unknown.shape[0]))
        got = self.fit(unknown, init=rows(points, K))
        want = sklearn.cluster.KMeans(K, init=rows(points, K), n_init=1).fit(points)
        assert_same_fit(self, Fitted(got), want, 1e-5)
        # Blocks i mod 2 on each replica: both held shards, and every job
        # ended as the client meant it to: OK, not CANCELLED.
        self.assertGreater(jobs_ended(self.server), jobs[0])
        self.assertGreater(jobs_ended(self.other), jobs[1])
        for server, counted in zip((self.server, self.other), codes):
            with self.subTest(server=server.address):
                self.assertEqual(jobs_by_code(server), {
                    **counted, "OK": counted["OK"] + jobs_ended(server) - sum(counted.values())})

    def test_float64_blocks_are_float64_shards_as_scikit_learns_to_1e_7(self):
        # Near 1e6, below float32's spacing there: float32 shards would lose
        # the digits scikit-learn keeps; float32 blocks stay float32.
        points = mixture(4000, 4, K, seed=23, offset=1e6)
        weights = np.random.default_rng(4).uniform(0.5, 2.0, size=len(points))
        for weighted in (False, True):
            with self.subTest(weighted=weighted):
                w = weights if weighted else None
                got = self.fit(blocks_of(points, 700), init=rows(points, K), tol=0.0,
                               sample_weight=None if w is None else da.from_array(w, chunks=700))
                want = sklearn.cluster.KMeans(K, init=rows(points, K), n_init=1, tol=0.0).fit(
                    points, sample_weight=w)
                self.assertEqual(got.cluster_centers_.dtype, np.float64)
                np.testing.assert_array_equal(got.labels_.compute(), want.labels_)
                self.assertEqual(got.n_iter_, want.n_iter_)
                np.testing.assert_allclose(got.cluster_centers_ - 1e6,
                                           want.cluster_centers_ - 1e6, rtol=1e-7)
                np.testing.assert_allclose(got.inertia_, want.inertia_, rtol=1e-7)
        small = points.astype(np.float32) - np.float32(1e6)
        got = self.fit(da.from_array(small, chunks=700), init=rows(small, K), max_iter=2)
        self.assertEqual(got.cluster_centers_.dtype, np.float32)

    def test_every_tolerance_and_max_iter_stop_as_scikit_learns(self):
        points = mixture(3000, 4, K, seed=5)
        for options in (dict(tol=0.0), dict(tol=1e-2), dict(max_iter=3)):
            with self.subTest(**options):
                got = self.fit(da.from_array(points, chunks=700), init=rows(points, K),
                               **options)
                want = sklearn.cluster.KMeans(K, init=rows(points, K), n_init=1,
                                              **options).fit(points)
                assert_same_fit(self, Fitted(got), want, 1e-5)

    def test_an_empty_cluster_moves_to_the_farthest_point_as_scikit_learns(self):
        points = mixture(2000, 3, K, seed=13)
        init = rows(points, K)
        init[2] = [60.0, 60.0, 60.0]  # no point is nearest: empty after the first step
        got = self.fit(blocks_of(points, 300), init=init)
        want = sklearn.cluster.KMeans(K, init=init, n_init=1).fit(points)
        assert_same_fit(self, Fitted(got), want, 1e-5)

    def test_initialisations_choose_kmt_kmeans_centers(self):
        points = mixture(3000, 4, K, seed=31)
        weights = np.random.default_rng(5).uniform(0.5, 2.0, size=len(points))
        for init, n_init, w in (("k-means||", 1, None), ("k-means||", 1, weights),
                                ("k-means++", 1, None), ("k-means++", 1, weights),
                                ("k-means++", 2, None), ("random", 2, weights)):
            with self.subTest(init=init, n_init=n_init, weighted=w is not None):
                got = self.fit(da.from_array(points, chunks=500), init=init, n_init=n_init,
                               random_state=3, sample_weight=w, max_iter=4)
                # kmt.KMeans's resident job (batch_size below n), in one process.
                want = kmt.KMeans(K, init=init, n_init=n_init, random_state=3, max_iter=4,
                                  server=self.both, batch_size=1000).fit(points,
                                                                         sample_weight=w)
                np.testing.assert_array_equal(got.labels_.compute(), want.labels_)
                np.testing.assert_allclose(got.cluster_centers_, want.cluster_centers_,
                                           rtol=0, atol=1e-12)
                self.assertEqual(got.n_iter_, want.n_iter_)

    def test_a_dask_dataframe_is_fitted_as_its_values(self):
        points = mixture(2000, 3, K, seed=43)
        frame = dd.from_dask_array(da.from_array(points, chunks=500), columns=["a", "b", "c"])
        got = self.fit(frame, init=rows(points, K), random_state=1)
        want = sklearn.cluster.KMeans(K, init=rows(points, K), n_init=1).fit(points)
        assert_same_fit(self, Fitted(got), want, 1e-5)
        self.assertEqual(list(got.feature_names_in_), ["a", "b", "c"])

    def test_predict_transform_and_score_map_blocks_through_the_service(self):
        points = mixture(3000, 4, K, seed=23)
        test = mixture(700, 4, K, seed=29)
        got = self.fit(da.from_array(points, chunks=1000), init=rows(points, K))
        want = sklearn.cluster.KMeans(K, init=rows(points, K), n_init=1).fit(points)
        dtest = da.from_array(test, chunks=(200, 2))  # column blocks are joined
        predicted = got.predict(dtest)
        self.assertIsInstance(predicted, da.Array)
        np.testing.assert_array_equal(predicted.compute(), want.predict(test))
        np.testing.assert_array_equal(got.predict(test), want.predict(test))
        distances = got.transform(dtest)
        self.assertEqual(distances.chunks, ((200, 200, 200, 100), (K,)))
        np.testing.assert_allclose(distances.compute(), want.transform(test), rtol=1e-5)
        self.assertAlmostEqual(got.score(dtest), want.score(test), delta=1e-5 * -want.score(test))
        np.testing.assert_array_equal(got.fit_predict(da.from_array(points, chunks=1000))
                                      .compute(), want.labels_)

    def test_bad_input_is_refused(self):
        points = mixture(500, 3, K, seed=37)
        X = da.from_array(points, chunks=100)
        nan = points.copy()
        nan[321, 1] = np.nan
        cases = [
            (TypeError, "takes a dask array", points, {}),
            (ValueError, "Expected 2D array", X[:, 0], {}),
            (ValueError, "contains NaN", da.from_array(nan, chunks=100), {}),
            (ValueError, "n_samples=4 should be >= n_clusters=6", X[:4], {}),
            (ValueError, "Negative values", X, {"sample_weight": -np.ones(500)}),
            (ValueError, r"expected \(500,\)", X, {"sample_weight": np.ones(499)}),
            (ValueError, "zero everywhere", X, {"sample_weight": np.zeros(500)}),
        ]
        for error, message, data, fit_options in cases:
            with self.subTest(message=message):
                with self.assertRaisesRegex(error, message):
                    self.fit(data, init="random", **fit_options)
        # NaN fails once, in the client, before any block is loaded.
        jobs = jobs_ended(self.server), jobs_ended(self.other)
        for init in ("k-means||", rows(points, K)):
            with self.assertRaisesRegex(ValueError, r"^Input X contains NaN \(row 321\)\.$"):
                self.fit(blocks_of(nan, 100), init=init)
        self.assertEqual((jobs_ended(self.server), jobs_ended(self.other)), jobs)
        with self.assertRaisesRegex(ValueError, "Lloyd's only, not the server's model"):
            self.fit(X, model="soft-kmeans")
        with self.assertRaises(InvalidParameterError):
            kmt.dask.KMeans(0, server=self.both).fit(X)
        with self.assertRaisesRegex(ValueError, "expecting 3 features"):
            self.fit(X, init="random").predict(da.ones((10, 4), chunks=5))


class DaskFaultTest(unittest.TestCase):
    """A worker or a replica killed after the third iteration, or a worker
    during k-means++: the fit loads the lost shards again (sparse blocks as
    sparse shards) and repeats the step, and ends where a run without the
    fault ends, to the bit."""

    def setUp(self):
        self.a = Server("--model_dir=", "--workers=1")
        self.b = Server("--model_dir=", "--workers=1")
        client.wait_for_workers(2)
        self.points = mixture(4000, 5, K, seed=41)
        self.weights = np.random.default_rng(7).uniform(0.5, 2.0, size=len(self.points))
        self.documents = documents(len(self.points), 300, k=K, seed=41)

    def tearDown(self):
        self.a.stop()
        self.b.stop()

    def run_killed(self, kill, during_seeding=False, sparse=False):
        """A clean fit and one where `kill()` runs after iteration 2 or, from
        k-means++, before its fifth round over the shards; of the sparse
        documents if `sparse`."""
        points = self.documents if sparse else self.points
        X = blocks_of(points, 500)
        w = da.from_array(self.weights, chunks=500)
        options = dict(n_clusters=K, n_init=1, tol=0.0, max_iter=6,
                       server=f"ipv4:{self.a.address},{self.b.address}",
                       **(dict(init="k-means++", random_state=2) if during_seeding
                          else dict(init=starts(points, K) if sparse else rows(points, K))))
        clean = kmt.dask.KMeans(**options).fit(X, sample_weight=w)
        # Computed and let go before a worker holding some dies (Dask would
        # try to compute them again, and fail: the fit is over).
        clean_labels = clean.labels_.compute()
        del clean.labels_
        self.assertEqual(clean.n_iter_, 6)
        killed, rounds = [], []
        round_of = kmt.dask.job.DaskJob.round

        def counted(job, make):
            rounds.append(len(rounds))
            if during_seeding and len(rounds) == 5:
                kill()
                killed.append(len(rounds))
            return round_of(job, make)

        class Killed(kmt.dask.KMeans):
            def _iteration_done(self, t, objective, shift, convergence):
                if t == 2 and not during_seeding:
                    kill()
                    killed.append(t)
        with mock.patch.object(kmt.dask.job.DaskJob, "round", counted):
            faulty = Killed(**options).fit(X, sample_weight=w)
        self.assertEqual(killed, [5 if during_seeding else 2])
        self.assertEqual(faulty.n_iter_, clean.n_iter_)
        np.testing.assert_array_equal(faulty.cluster_centers_, clean.cluster_centers_)
        self.assertEqual(faulty.inertia_, clean.inertia_)
        np.testing.assert_array_equal(faulty.labels_.compute(), clean_labels)

    def kill_a_worker(self):
        held = client.run(held_shards)
        victim = sorted(held)[0]
        self.assertGreater(held[victim], 0)
        pid = client.run(os.getpid, workers=[victim])[victim]
        os.kill(pid, signal.SIGKILL)

    def test_a_worker_killed_mid_fit_changes_nothing(self):
        self.run_killed(self.kill_a_worker)

    def test_a_worker_killed_during_kmeans_plus_plus_changes_nothing(self):
        # Its shards, loaded again, first take the centers chosen so far.
        self.run_killed(self.kill_a_worker, during_seeding=True)

    def test_a_worker_killed_during_kmeans_plus_plus_of_sparse_blocks_changes_nothing(self):
        self.run_killed(self.kill_a_worker, during_seeding=True, sparse=True)

    def kill_b(self):
        in_flight = [line for line in self.b.metrics().splitlines()
                     if line.startswith("kmt_jobs_in_flight")]
        self.assertGreater(float(in_flight[0].rsplit(" ", 1)[1]), 0)
        self.b.proc.send_signal(signal.SIGKILL)
        self.b.proc.wait()

    def test_a_replica_killed_mid_fit_changes_nothing(self):
        for sparse in (False, True):
            with self.subTest(sparse=sparse):
                if sparse:
                    self.b.stop()
                    self.b = Server("--model_dir=", "--workers=1")
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ResourceWarning)
                    self.run_killed(self.kill_b, sparse=sparse)

    def test_a_replica_drained_mid_fit_changes_nothing(self):
        # As a rolling update drains a pod: b ends its streams UNAVAILABLE
        # at their next step, and their blocks go to a.
        failed = []
        taken_as_gone = kmt.dask.job.DaskJob._failed

        def noted(job, shard, status):
            failed.append(status)
            return taken_as_gone(job, shard, status)
        with mock.patch.object(kmt.dask.job.DaskJob, "_failed", noted):
            self.run_killed(self.b.drain)
        self.assertTrue(failed)
        for _, code, message in failed:
            self.assertEqual(code.name, "UNAVAILABLE")
            self.assertIn("server is shutting down", message)


class DaskOutOfReplicasTest(unittest.TestCase):
    """With no live replica left a fit fails UNAVAILABLE, whatever code the
    last stream ended with (one opened as its replica's drain began ends
    CANCELLED), that code and message kept in the error's text."""

    def test_the_last_failure_is_unavailable_and_named(self):
        shard = types.SimpleNamespace(block=3, replica=1, worker="w")
        job = types.SimpleNamespace(alive=[False, True], servers=["a:1", "b:2"],
                                    shards=[shard], log=None)
        with self.assertRaises(kmt.ServiceError) as raised:
            kmt.dask.job.DaskJob._failed(job, shard,
                                         ("failed", grpc.StatusCode.CANCELLED, "Cancelled"))
        self.assertEqual(raised.exception.code, grpc.StatusCode.UNAVAILABLE)
        self.assertIn("block 3: no replica left: CANCELLED: Cancelled", str(raised.exception))


class DaskSparseTest(TwoReplicasTest):
    """Dask arrays of scipy.sparse blocks on two replicas: sparse shards,
    the fit of the same points made dense."""

    SERVER_FLAGS = ("--model_dir=", "--workers=1")

    def test_sparse_blocks_fit_as_kmt_kmeans_on_the_dense_points(self):
        weights = np.random.default_rng(6).uniform(0.5, 2.0, size=3000)
        for dtype, rtol in ((np.float32, 1e-5), (np.float64, 1e-6)):
            X = documents(3000, 400, k=K, dtype=dtype)
            dense = X.toarray()
            init = starts(X, K)
            blocks = {
                "csr": da.from_array(X, chunks=(700, -1)),
                "csc": da.from_array(X.tocsc(), chunks=(700, -1)),
                "csr in column blocks": da.from_array(X, chunks=(700, 150)),
                "map_blocks": da.from_array(dense, chunks=(600, -1)).map_blocks(sp.csr_matrix),
            }
            for (name, dX), weighted in ((b, w) for b in blocks.items() for w in (False, True)):
                with self.subTest(dtype=np.dtype(dtype).name, blocks=name, weighted=weighted):
                    self.assertTrue(kmt.dask.estimator.is_sparse(dX))
                    w = weights if weighted else None
                    with chunks_sent() as chunks:
                        got = kmt.dask.KMeans(K, init=init, n_init=1, server=self.both).fit(
                            dX, sample_weight=None if w is None else da.from_array(w, chunks=700))
                    want = kmt.KMeans(K, init=init, n_init=1, server=self.both).fit(
                        dense, sample_weight=w)
                    self.assertGreater(want.n_iter_, 3)
                    self.assertTrue(chunks)
                    self.assertTrue(all(sparse for sparse, *_ in chunks))
                    self.assertEqual(got.cluster_centers_.dtype, dtype)
                    np.testing.assert_array_equal(got.labels_.compute(), want.labels_)
                    self.assertEqual(got.n_iter_, want.n_iter_)
                    np.testing.assert_allclose(got.cluster_centers_, want.cluster_centers_,
                                               rtol=rtol, atol=rtol * np.abs(dense).max())
                    np.testing.assert_allclose(got.inertia_, want.inertia_, rtol=rtol)
            # The tolerance is scikit-learn's for sparse X (the blocks'
            # variances merged; float32's computed in float32 there): the
            # same stop as its fit of the CSR matrix.
            got = kmt.dask.KMeans(K, init=init, n_init=1, tol=1e-2, server=self.both).fit(
                blocks["csr"])
            want = sklearn.cluster.KMeans(K, init=init, n_init=1, tol=1e-2).fit(X)
            self.assertAlmostEqual(got._absolute_tol, kmt.kmeans.tolerance(X, 1e-2),
                                   delta=1e-6 * got._absolute_tol)
            self.assertEqual(got.n_iter_, want.n_iter_)
            np.testing.assert_array_equal(got.labels_.compute(), want.labels_)
        # predict, transform and score take sparse blocks, as kmt.KMeans takes
        # sparse X.
        fitted = kmt.KMeans(K, init=init, n_init=1, tol=1e-2, server=self.both).fit(X)
        np.testing.assert_array_equal(got.predict(blocks["csc"]).compute(), want.labels_)
        np.testing.assert_allclose(got.transform(blocks["csr"]).compute(), fitted.transform(X),
                                   rtol=1e-12)
        self.assertAlmostEqual(got.score(blocks["csr"]), fitted.score(X),
                               delta=1e-12 * -fitted.score(X))

    def test_small_chunks_and_empty_rows_load_the_whole_block(self):
        # Chunks of 1 KiB: many per block, a block's first ones of empty rows
        # only (a float64 shard all the same).
        X = documents(2000, 300, k=K, seed=12, per_row=30)
        X = sp.vstack([sp.csr_matrix((150, 300)), X[150:1200],
                       sp.csr_matrix((100, 300)), X[1300:]], format="csr")
        init = starts(X[150:], K)
        for dtype, weighted in ((np.float64, False), (np.float64, True), (np.float32, True)):
            with self.subTest(dtype=np.dtype(dtype).name, weighted=weighted):
                Xt = X.astype(dtype)
                w = np.linspace(0.5, 2.0, X.shape[0]) if weighted else None
                with mock.patch.object(kmt.dask.estimator, "CHUNK_BYTES", 1 << 10), \
                        chunks_sent() as chunks:
                    got = kmt.dask.KMeans(K, init=init, n_init=1, server=self.both).fit(
                        da.from_array(Xt, chunks=(500, -1)), sample_weight=w)
                want = kmt.KMeans(K, init=init, n_init=1, server=self.both).fit(
                    Xt.toarray(), sample_weight=w)
                np.testing.assert_array_equal(got.labels_.compute(), want.labels_)
                np.testing.assert_allclose(got.cluster_centers_, want.cluster_centers_,
                                           rtol=1e-5, atol=1e-6)
                self.assertGreater(sum(count for _, count, *_ in chunks), 4 * 4 * 4)
                # Every chunk holds at most 1 KiB of offsets, columns, values
                # and weights (a row's 30 nonzeros fill 376 bytes), a few
                # bytes of framing more.
                self.assertTrue(all(largest < (1 << 10) + 64 for *_, largest in chunks))

    def test_seedings_choose_kmt_kmeans_centers(self):
        X = documents(2000, 300, k=K, seed=8)
        dX = da.from_array(X, chunks=(500, -1))
        for init, n_init in (("k-means++", 1), ("k-means++", 2), ("k-means||", 1), ("random", 2)):
            with self.subTest(init=init, n_init=n_init):
                options = dict(init=init, n_init=n_init, random_state=4, max_iter=5,
                               server=self.both)
                got = kmt.dask.KMeans(K, **options).fit(dX)
                # kmt.KMeans's resident job on the matrix in one process.
                want = kmt.KMeans(K, **options).fit(X)
                np.testing.assert_array_equal(got.labels_.compute(), want.labels_)
                np.testing.assert_allclose(got.cluster_centers_, want.cluster_centers_,
                                           rtol=1e-12)
                self.assertEqual(got.n_iter_, want.n_iter_)

    def test_a_sparse_value_not_finite_is_refused_once_naming_its_row_and_column(self):
        X = documents(500, 100, k=K, seed=9)
        at = X.indptr[321] + 1
        column = X.indices[at]
        for value, what in ((np.nan, "NaN"), (np.inf, "infinity")):
            bad = X.copy()
            bad.data[at] = value
            bad.data[X.indptr[450]] = value  # a later one, in another block
            jobs = jobs_ended(self.server), jobs_ended(self.other)
            with self.subTest(value=value):
                with self.assertRaisesRegex(ValueError, rf"^Input X contains {what}.* "
                                                        rf"\(row 321, column {column}\)\.$"):
                    kmt.dask.KMeans(K, init=starts(X, K), n_init=1, server=self.both).fit(
                        da.from_array(bad, chunks=(100, -1)))
                self.assertEqual((jobs_ended(self.server), jobs_ended(self.other)), jobs)


class DaskWideSparseTest(ServedTest):
    """4000 documents of 2^17 features (2 GB dense as float32) on a replica
    with room for 32 MiB of shards: the workers send and the replica holds
    their nonzeros, and each step's centers go to a worker once."""
    SERVER_FLAGS = ("--model_dir=", "--workers=1", f"--max_resident_bytes={32 << 20}")

    def test_a_matrix_too_large_dense_is_sent_as_its_nonzeros(self):
        d = 1 << 17
        X = documents(4000, d, k=K, per_row=30, dtype=np.float32)
        init = starts(X, K)
        steps, answered = [], []
        submit, round_of = client.submit, kmt.dask.job.DaskJob.round

        def noted(function, *args, **kwargs):
            if function is kmt.dask.worker.step:
                steps.append(args[1])
            return submit(function, *args, **kwargs)

        def sized(job, requests):
            answers = round_of(job, requests)
            answered.append(sum(len(a) for a in answers))
            return answers
        with chunks_sent() as chunks, mock.patch.object(client, "submit", noted), \
                mock.patch.object(kmt.dask.job.DaskJob, "round", sized):
            got = kmt.dask.KMeans(K, init=init, n_init=1, max_iter=4, tol=0.0,
                                  server=self.server.address).fit(
                da.from_array(X, chunks=(500, -1)))
        # A step's centers go to each worker once, not once for each of its
        # shards; the shards' sums come back as rows of their nonzero
        # columns (at most 12 bytes a nonzero of X), not as 8 dense
        # 6 x 2^17 matrices of doubles (50 MB).
        self.assertGreaterEqual(len(steps), 4)
        for requests in steps:
            self.assertEqual(len(set(requests)), len(requests))
        self.assertLess(max(answered), 12 * X.nnz + 64 * X.shape[0] + (64 << 10))
        want = sklearn.cluster.KMeans(K, init=init, n_init=1, max_iter=4, tol=0.0).fit(X)
        np.testing.assert_array_equal(got.labels_.compute(), want.labels_)
        np.testing.assert_allclose(got.cluster_centers_, want.cluster_centers_, rtol=1e-5,
                                   atol=1e-6)
        # 4 bytes a column and 4 a value, 8 a row's offset; a few bytes of
        # framing per chunk: about the nonzeros, where dense rows would be
        # X.shape[0] * d * 4.
        sent = sum(size for _, _, size, _ in chunks)
        self.assertTrue(all(sparse for sparse, *_ in chunks))
        self.assertGreaterEqual(sent, X.nnz * 8 + X.shape[0] * 8)
        self.assertLess(sent, 1.01 * (X.nnz * 8 + X.shape[0] * 8) + 64 * sum(count for _, count, *_ in chunks))


if __name__ == "__main__":
    unittest.main(verbosity=2)
