"""Sparse X end to end through real kmt-server replicas: kmt.KMeans and
kmt.fit_resident load a scipy.sparse matrix as sparse resident shards (its
nonzeros, never made dense, not shifted) and fit what they fit on the same
matrix made dense, and what scikit-learn's KMeans fits on the CSR matrix,
from the same initial centers; k-means++, k-means|| and n_init run on it,
kmt.MiniBatchKMeans's steps too, and a killed replica's shards move;
predict, transform and score (kmt.ServedModel's too) send it as points_csr;
the replicas hold about its nonzeros, so a matrix of 2^17 features that
densified would exceed their room fits; malformed input is refused naming
what is wrong."""
import os
import tempfile
import unittest

import numpy as np
import scipy.sparse as sp
import sklearn.cluster
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.datasets import make_blobs
from sklearn.metrics import pairwise_distances_argmin_min
from sklearn.utils.sparsefuncs import mean_variance_axis

from estimator_support import ServedTest, TwoReplicasTest, fits_with_a_replica_killed, kmt
from harness import Server, wait_for

K = 5


def documents(n, d, k=K, per_row=12, seed=3, dtype=np.float64):
    """n rows of d features, each row `per_row` nonzeros mostly among its
    topic's columns (k topics of d // (2 k) columns each) and some anywhere,
    positive values: TF-IDF-like rows in k groups that touch, so Lloyd's
    takes several iterations."""
    rng = np.random.default_rng(seed)
    width = d // (2 * k)
    topics = rng.integers(0, k, size=n)
    indptr, indices, values = [0], [], []
    for i in range(n):
        own = topics[i] * width + rng.choice(width, size=per_row * 2 // 3, replace=False)
        anywhere = rng.choice(d, size=per_row - len(own), replace=False)
        columns = np.unique(np.concatenate([own, anywhere]))
        indices.extend(columns)
        values.extend(rng.uniform(0.1, 1.0, size=len(columns)))
        indptr.append(len(indices))
    return sp.csr_matrix((np.array(values, dtype=dtype), np.array(indices, dtype=np.int32),
                          np.array(indptr)), shape=(n, d))


def starts(X, k=K, seed=11):
    """k distinct rows of X, dense, as initial centers."""
    chosen = np.random.default_rng(seed).choice(X.shape[0], size=k, replace=False)
    return X[chosen].toarray()


def inertia(X, centers, weights=None):
    """The weighted squared distances of X's rows to their nearest centers."""
    _, distances = pairwise_distances_argmin_min(X, centers)
    return float(np.sum(distances ** 2 * (1 if weights is None else weights)))


class SparseFitTest(TwoReplicasTest):
    """kmt.KMeans on CSR X over two replicas against the dense path and
    scikit-learn."""

    def kmeans(self, **options):
        return kmt.KMeans(K, n_init=1, server=self.both, **options)

    def test_sparse_fit_equals_the_dense_fit_and_scikit_learns(self):
        weights = np.random.default_rng(5).uniform(0.5, 2.0, size=3000)
        for dtype, rtol in ((np.float64, 1e-6), (np.float32, 1e-4)):
            X = documents(3000, 400, dtype=dtype)
            init = starts(X)
            for weighted in (False, True):
                for tol in (0.0, 1e-4):
                    with self.subTest(dtype=np.dtype(dtype).name, weighted=weighted, tol=tol):
                        w = weights if weighted else None
                        got = self.kmeans(init=init, tol=tol).fit(X, sample_weight=w)
                        # Sent as sparse shards, though one request would carry X.
                        plan = got._plan(X, w, distances=False)
                        self.assertFalse(plan.one_request)
                        self.assertLess(X.shape[0], plan.rows)
                        dense = self.kmeans(init=init, tol=tol).fit(X.toarray(), sample_weight=w)
                        want = sklearn.cluster.KMeans(K, init=init, n_init=1, tol=tol,
                                                      algorithm="lloyd").fit(X, sample_weight=w)
                        self.assertGreater(want.n_iter_, 3)
                        self.assertEqual(got.cluster_centers_.dtype, dtype)
                        scale = np.abs(want.cluster_centers_).max()
                        for other in (dense, want):
                            assert_array_equal(got.labels_, other.labels_)
                            self.assertEqual(got.n_iter_, other.n_iter_)
                            assert_allclose(got.cluster_centers_, other.cluster_centers_,
                                            rtol=rtol, atol=rtol * scale)
                            assert_allclose(got.inertia_, other.inertia_, rtol=rtol)

    def test_csc_and_unsorted_or_duplicate_entries_fit_as_the_canonical_csr(self):
        X = documents(1500, 300)
        init = starts(X)
        want = self.kmeans(init=init).fit(X)
        # The same matrix with each row's entries reversed, and with its
        # first entry split in two halves of the same column.
        coo = X.tocoo()
        order = np.lexsort((-coo.col, coo.row))
        unsorted = sp.csr_matrix((coo.data[order], coo.col[order], X.indptr), shape=X.shape)
        self.assertFalse(unsorted.has_sorted_indices)
        data = np.insert(X.data, 0, X.data[0] / 2)
        data[1] = X.data[0] / 2
        indptr = X.indptr.copy()
        indptr[1:] += 1
        messy = sp.csr_matrix((data, np.insert(X.indices, 0, X.indices[0]), indptr),
                              shape=X.shape)
        self.assertFalse(messy.has_canonical_format)
        for name, given in (("csc", X.tocsc()), ("unsorted", unsorted), ("duplicates", messy),
                            ("coo", coo)):
            with self.subTest(given=name):
                got = self.kmeans(init=init).fit(given)
                assert_array_equal(got.labels_, want.labels_)
                assert_allclose(got.cluster_centers_, want.cluster_centers_, rtol=1e-12)

    def test_kmeans_plus_plus_kmeans_parallel_and_n_init_run_on_sparse_shards(self):
        X = documents(2000, 300)
        dense = X.toarray()
        for init in ("k-means++", "k-means||", "random"):
            for n_init in (1, 3):
                with self.subTest(init=init, n_init=n_init):
                    got = kmt.KMeans(K, init=init, n_init=n_init, random_state=4,
                                     server=self.both).fit(X)
                    self.assertEqual(got.cluster_centers_.shape, (K, 300))
                    labels, _ = pairwise_distances_argmin_min(X, got.cluster_centers_)
                    assert_array_equal(got.labels_, labels)
                    assert_allclose(got.inertia_, inertia(X, got.cluster_centers_), rtol=1e-6)
                    # The same seed chooses the same centers on the dense rows.
                    if init != "k-means||":
                        on_dense = kmt.KMeans(K, init=init, n_init=n_init, random_state=4,
                                              server=self.both, batch_size=500).fit(dense)
                        assert_array_equal(got.labels_, on_dense.labels_)
                        assert_allclose(got.cluster_centers_, on_dense.cluster_centers_,
                                        rtol=1e-6, atol=1e-9)

    def test_minibatch_fit_on_sparse_shards_equals_the_dense_fit(self):
        X = documents(3000, 300)
        weights = np.random.default_rng(8).uniform(0.5, 2.0, size=X.shape[0])
        # Given centers, or k-means++ on the sample (seeded on a sparse
        # shard) from several starts compared by their inertia.
        for weighted, init, n_init in ((False, starts(X), 1), (True, starts(X), 1),
                                       (False, "k-means++", 3), (True, "random", 2)):
            with self.subTest(weighted=weighted, init=init if isinstance(init, str) else "given"):
                w = weights if weighted else None
                options = dict(init=init, n_init=n_init, random_state=2, batch_size=256,
                               max_iter=4, server=self.both)
                got = kmt.MiniBatchKMeans(K, **options).fit(X, sample_weight=w)
                dense = kmt.MiniBatchKMeans(K, **options).fit(X.toarray(), sample_weight=w)
                self.assertEqual(got.n_steps_, dense.n_steps_)
                assert_array_equal(got.labels_, dense.labels_)
                assert_allclose(got.cluster_centers_, dense.cluster_centers_, rtol=1e-12)
                assert_allclose(got.inertia_, dense.inertia_, rtol=1e-12)

    def test_partial_fit_on_sparse_batches_equals_it_on_the_dense_ones(self):
        X = documents(1200, 300)
        weights = np.random.default_rng(4).uniform(0.5, 2.0, size=X.shape[0])
        for weighted in (False, True):
            with self.subTest(weighted=weighted):
                options = dict(init=starts(X), n_init=1, random_state=3, server=self.both)
                got = kmt.MiniBatchKMeans(K, **options)
                dense = kmt.MiniBatchKMeans(K, **options)
                # Batches of 200 rows, and one of fewer rows than centers.
                for first, end in ((0, 200), (200, 400), (400, 403), (403, 1200)):
                    w = weights[first:end] if weighted else None
                    got.partial_fit(X[first:end], sample_weight=w)
                    dense.partial_fit(X[first:end].toarray(), sample_weight=w)
                    assert_array_equal(got.labels_, dense.labels_)
                    assert_allclose(got.cluster_centers_, dense.cluster_centers_, rtol=1e-10,
                                    atol=1e-13)
                    assert_allclose(got.inertia_, dense.inertia_, rtol=1e-10)

    def test_predict_transform_and_score_send_sparse_x_as_its_nonzeros(self):
        X = documents(1000, 200)
        fitted = self.kmeans(init=starts(X)).fit(X)
        # A request carries the rows as points_csr, nothing dense.
        cl = kmt.Client(self.server.address)
        wire = cl.wire_request(X[:10], K, iterations=0, centers=fitted.cluster_centers_)
        self.assertTrue(wire.message.HasField("points_csr"))
        self.assertTrue(wire.message.points_csr.float64)
        self.assertEqual(sorted(field for field, _ in wire.arrays), ["centers_f64"])
        cl.close()
        assert_array_equal(fitted.predict(X), fitted.labels_)
        dense = X.toarray()
        assert_array_equal(fitted.predict(dense), fitted.labels_)
        # The distances from the scores |x|^2 + |c|^2 - 2<x, c>: to round-off
        # of the norms.
        scale = float(np.max(fitted.transform(dense)))
        assert_allclose(fitted.transform(X), fitted.transform(dense), rtol=1e-6,
                        atol=1e-6 * scale)
        assert_allclose(fitted.score(X), -fitted.inertia_, rtol=1e-6)
        # Fewer rows than centers, completed with the centers as rows.
        assert_array_equal(fitted.predict(X[:2]), fitted.labels_[:2])
        # Split over requests by their nonzeros, or by batch_size.
        small = self.kmeans(init=starts(X), batch_size=64).fit(X)
        assert_array_equal(small.predict(X), fitted.labels_)

    def test_fit_resident_takes_a_sparse_matrix_and_scikit_learns_tolerance(self):
        X = documents(2500, 300)
        init = starts(X)
        tol = 1e-3
        # The replicas' moments of the sparse rows give scikit-learn's
        # tolerance, as mean_variance_axis does here.
        got = kmt.fit_resident(self.both, X, K, centers=init, iterations=100, tol=tol,
                               chunk_bytes=16 << 10)
        absolute = float(np.mean(mean_variance_axis(X, axis=0)[1]) * tol)
        want = kmt.fit_resident(self.both, X, K, centers=init, iterations=100,
                                center_tol=absolute)
        self.assertEqual(got.iterations_run, want.iterations_run)
        assert_array_equal(got.labels, want.labels)
        assert_array_equal(got.centers, want.centers)
        self.assertEqual(got.shards, 2)
        self.assertEqual(got.centers.dtype, np.float64)
        reference = sklearn.cluster.KMeans(K, init=init, n_init=1, tol=tol,
                                           algorithm="lloyd").fit(X)
        self.assertEqual(got.iterations_run, reference.n_iter_)
        assert_array_equal(got.labels, reference.labels_)
        # Integer values run as a float32 job, as dense integers do.
        counts = sp.csr_matrix((np.ceil(X.data * 4).astype(np.int64), X.indices, X.indptr),
                               shape=X.shape)
        self.assertEqual(kmt.fit_resident(self.both, counts, K, centers=init,
                                          iterations=2).centers.dtype, np.float32)

    def test_malformed_sparse_input_is_refused_naming_it(self):
        X = documents(200, 200)
        for value, kind in ((np.nan, "NaN"), (np.inf, "infinity")):
            bad = X.copy()
            bad.data[7] = value
            row = int(np.searchsorted(bad.indptr, 7, side="right")) - 1
            with self.subTest(value=value):
                with self.assertRaisesRegex(ValueError, f"{kind}.* at row {row}, column "
                                                        f"{bad.indices[7]}"):
                    kmt.fit_resident(self.both, bad, K, centers=starts(X))
                with self.assertRaisesRegex(ValueError, f"Input X contains {kind}"):
                    self.kmeans(init=starts(X)).fit(bad)
        # A column past d (scipy's constructor does not look), refused by
        # the client where it reads the moments of scikit-learn's tol, else
        # by the replica: each names the point (row 50 of shard 1, from 100).
        bad = sp.csr_matrix((X.data, X.indices.copy(), X.indptr), shape=X.shape)
        bad.indices[X.indptr[150] + 1] = 200 + 5
        for tol, named in ((1e-4, "point 150 has a nonzero in column 205, outside"),
                           (0.0, "= 205 (row 50) is outside [0, cols = 200)")):
            with self.subTest(tol=tol):
                with self.assertRaises(kmt.ServiceError) as refused:
                    kmt.fit_resident(self.both, bad, K, centers=starts(X), tol=tol)
                self.assertEqual(refused.exception.code.name, "INVALID_ARGUMENT")
                self.assertIn(named, str(refused.exception))
        with self.assertRaisesRegex(ValueError, "sparse points take no offset"):
            kmt.fit_resident(self.both, X, K, centers=starts(X), offset=np.zeros(200))


class ScikitLearnSparseKMeansTestsTest(ServedTest):
    """The sparse checks of scikit-learn's test_k_means.py (test_kmeans_results,
    test_kmeans_relocated_clusters and test_predict_dense_sparse) as written
    there, with kmt's estimators for scikit-learn's."""

    def test_kmeans_results(self):
        for constructor in (np.array, sp.csr_matrix):
            for dtype in (np.float32, np.float64):
                with self.subTest(sparse=constructor is sp.csr_matrix, dtype=dtype):
                    X = constructor([[0, 0], [0.5, 0], [0.5, 1], [1, 1]], dtype=dtype)
                    init_centers = np.array([[0, 0], [1, 1]], dtype=dtype)
                    kmeans = kmt.KMeans(n_clusters=2, n_init=1, init=init_centers,
                                        server=self.server.address)
                    kmeans.fit(X, sample_weight=[3, 1, 1, 3])
                    assert_array_equal(kmeans.labels_, [0, 0, 1, 1])
                    assert_allclose(kmeans.inertia_, 0.375)
                    assert_allclose(kmeans.cluster_centers_,
                                    np.array([[0.125, 0], [0.875, 1]], dtype=dtype))
                    self.assertEqual(kmeans.n_iter_, 2)

    def test_kmeans_relocated_clusters(self):
        for constructor in (np.array, sp.csr_matrix):
            with self.subTest(sparse=constructor is sp.csr_matrix):
                X = constructor([[0, 0], [0.5, 0], [0.5, 1], [1, 1]])
                # The second center is too far from every point: empty at
                # the first iteration.
                init_centers = np.array([[0.5, 0.5], [3, 3]])
                kmeans = kmt.KMeans(n_clusters=2, n_init=1, init=init_centers,
                                    server=self.server.address).fit(X)
                assert_allclose(kmeans.inertia_, 0.25)
                self.assertEqual(kmeans.n_iter_, 3)
                # Either of the two relocations scikit-learn accepts.
                if kmeans.labels_[0] == 0:
                    assert_array_equal(kmeans.labels_, [0, 0, 1, 1])
                    assert_allclose(kmeans.cluster_centers_, [[0.25, 0], [0.75, 1]])
                else:
                    assert_array_equal(kmeans.labels_, [1, 1, 0, 0])
                    assert_allclose(kmeans.cluster_centers_, [[0.75, 1.0], [0.25, 0.0]])

    def test_predict_dense_sparse(self):
        centers = np.array([[0.0, 5.0, 0.0, 0.0, 0.0], [1.0, 1.0, 4.0, 0.0, 0.0],
                            [1.0, 0.0, 0.0, 5.0, 1.0]])
        X, _ = make_blobs(n_samples=100, centers=centers, cluster_std=1.0, random_state=42)
        X_csr = sp.csr_matrix(X)
        for estimator in (kmt.KMeans, kmt.MiniBatchKMeans):
            for init in ("random", "k-means++", centers.copy()):
                with self.subTest(estimator=estimator.__name__, init=init):
                    n_init = 10 if isinstance(init, str) else 1
                    km = estimator(n_clusters=3, init=init, n_init=n_init, random_state=0,
                                   server=self.server.address)
                    km.fit(X_csr)
                    assert_array_equal(km.predict(X), km.labels_)
                    km.fit(X)
                    assert_array_equal(km.predict(X_csr), km.labels_)


class ServedSparseTest(unittest.TestCase):
    def test_a_fitted_model_served_by_name_predicts_sparse_x_as_its_estimator(self):
        models = tempfile.mkdtemp(prefix="kmt-sparse-models-")
        server = Server(f"--model_dir={models}", "--model_poll_s=0.05")
        try:
            X = documents(2000, 200)
            fitted = kmt.KMeans(K, init=starts(X), n_init=1, server=server.address).fit(X)
            fitted.save_model(os.path.join(models, "documents", "1", "model.kmt"),
                              X=X.toarray())
            served = kmt.ServedModel("documents", server=server.address)
            wait_for(lambda: any(m.name == "documents" for m in kmt.Client(
                server.address).models()), what="the model to be served")
            Y = documents(500, 200, seed=9)
            assert_array_equal(served.predict(Y), fitted.predict(Y))
            assert_array_equal(served.predict(Y), fitted.predict(Y.toarray()))
            assert_allclose(served.transform(Y), fitted.transform(Y), rtol=1e-12)
            assert_allclose(served.score(Y), fitted.score(Y), rtol=1e-12)
        finally:
            assert server.stop() == 0


class SparseShardMovesTest(unittest.TestCase):
    def test_a_replica_killed_mid_job_or_during_kmeans_plus_plus_changes_nothing(self):
        """Sparse shards of a killed replica are read again from the matrix
        and loaded on the other, given back their seeding distances: the
        same bits as a run without the kill."""
        X = documents(3000, 300)
        for when in ("step 3 ", "k-means++: 4 of"):
            with self.subTest(killed_at=when):
                clean, killed = fits_with_a_replica_killed(
                    self, X, K, when, iterations=6, seed=4, streams_per_server=2, timeout=120,
                    chunk_bytes=8 << 10)
                self.assertEqual(killed.shard_moves, 2)  # b held two of the four shards
                assert_array_equal(killed.centers, clean.centers)
                assert_array_equal(killed.labels, clean.labels)
                self.assertEqual(killed.objectives, clean.objectives)


class WideSparseTest(ServedTest):
    """A replica with room for 32 MiB of shards that takes 2^17 features
    dense too: 4000 documents of 2^17 features (4 GB dense in float64) fit
    as their nonzeros."""
    SERVER_FLAGS = ("--model_dir=", f"--max_resident_bytes={32 << 20}", f"--max_d={1 << 17}")

    def test_a_matrix_too_large_dense_fits_as_its_nonzeros(self):
        d = 1 << 17
        X = documents(4000, d, per_row=30)
        init = starts(X)
        held = []

        def resident_bytes(*_):
            for line in self.server.metrics().splitlines():
                if line.startswith("kmt_resident_bytes"):
                    held.append(float(line.rsplit(" ", 1)[1]))
        got = kmt.fit_resident(self.server.address, X, K, centers=init, iterations=4,
                               streams_per_server=2, on_iteration=resident_bytes)
        want = sklearn.cluster.KMeans(K, init=init, n_init=1, max_iter=4, tol=0,
                                      algorithm="lloyd").fit(X)
        assert_array_equal(got.labels, want.labels_)
        assert_allclose(got.centers, want.cluster_centers_, rtol=1e-6, atol=1e-12)
        # The replica holds the nonzeros (12 bytes each) and per row a few
        # words (offset, label, bounds), and per shard a few d x k matrices
        # of double: megabytes where the rows would fill 4 GB dense.
        self.assertTrue(held)
        self.assertGreaterEqual(min(held), X.nnz * 12)
        self.assertLess(max(held), 2 * (X.nnz * 12 + X.shape[0] * 64) + 2 * 4 * K * d * 8)
        # The first 40 rows made dense (42 MB) are refused for lack of room.
        with self.assertRaises(kmt.ServiceError) as refused:
            kmt.fit_resident(self.server.address, X[:40].toarray(), K, centers=init,
                             iterations=1)
        self.assertEqual(refused.exception.code.name, "RESOURCE_EXHAUSTED")


if __name__ == "__main__":
    unittest.main()
