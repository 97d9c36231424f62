"""One iteration of scikit-learn's sparse Lloyd's on BM_SparseAssignment's shape.

scikit-learn's lloyd_iter_chunked_sparse (its center update included) on
TF-IDF documents drawn as tests/support/sparse_documents.h draws them: Zipf
term frequencies (exponent 1.1), 100,000 x 2^17, about 100 terms a row,
(1 + log count) x smoothed idf, unit rows, float32; the centers two
iterations from the first k rows, k = 20 and 256. The best of two runs, on
every core OpenMP gives it.

    python3 bench/sklearn_sparse_iteration.py
"""
import time

import numpy as np
import scipy.sparse as sp
from sklearn.cluster._k_means_lloyd import lloyd_iter_chunked_sparse
from sklearn.utils._openmp_helpers import _openmp_effective_n_threads


def documents(n=100000, d=1 << 17, terms=100, zipf=1.1, seed=21):
    rng = np.random.default_rng(seed)
    cdf = np.cumsum(1 / np.arange(1, d + 1) ** zipf)
    cdf /= cdf[-1]
    # Draws a row: duplicates collapse to about `terms` distinct ones.
    draws = (rng.integers(terms // 2, terms * 3 // 2 + 1, n) * 1.4).astype(int)
    rows = np.repeat(np.arange(n), draws)
    cols = np.minimum(np.searchsorted(cdf, rng.random(rows.size)), d - 1)
    x = sp.csr_matrix((np.ones(rows.size, np.float32), (rows, cols)), shape=(n, d))
    x.sum_duplicates()
    idf = np.log((1 + n) / (1 + np.bincount(x.indices, minlength=d))) + 1
    x.data = ((1 + np.log(x.data)) * idf[x.indices]).astype(np.float32)
    norms = np.sqrt(np.asarray(x.multiply(x).sum(axis=1)).ravel())
    return sp.csr_matrix(sp.diags(1 / norms) @ x, dtype=np.float32)


def main():
    x = documents()
    n = x.shape[0]
    threads = _openmp_effective_n_threads()
    print(f"nnz per row {x.nnz / n:.1f}, {threads} threads")
    for k in (20, 256):
        centers = x[:k].toarray()
        new = np.zeros_like(centers)
        weight_in_clusters = np.zeros(k, np.float32)
        labels = np.zeros(n, np.int32)
        shift = np.zeros(k, np.float32)
        weights = np.ones(n, np.float32)
        # The benchmark's centers: two iterations from the first k rows.
        for _ in range(2):
            lloyd_iter_chunked_sparse(
                x, weights, centers, new, weight_in_clusters, labels, shift, threads, True
            )
            centers, new = new, centers
        times = []
        for _ in range(2):
            start = time.perf_counter()
            lloyd_iter_chunked_sparse(
                x, weights, centers, new, weight_in_clusters, labels, shift, threads, True
            )
            times.append(time.perf_counter() - start)
        print(f"k = {k}: {min(times):.3f} s an iteration")


if __name__ == "__main__":
    main()
