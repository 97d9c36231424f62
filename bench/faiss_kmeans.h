// FAISS's k-means, the benchmarks' peer: a flat L2 index (every point at
// every iteration, no subsampling) from given initial centers, for a fixed
// number of iterations (it has no convergence test). Only where FAISS is
// installed (KMT_HAVE_FAISS, bench/CMakeLists.txt).
#ifndef KMT_BENCH_FAISS_KMEANS_H_
#define KMT_BENCH_FAISS_KMEANS_H_

#include <faiss/Clustering.h>
#include <faiss/IndexFlat.h>

#include "core/types.h"

namespace kmt {

// points: d x n, init: d x k; returns the objective FAISS reports after its
// last iteration.
inline double FaissKMeans(const Matrix<float>& points, const Matrix<float>& init, int iterations) {
  const int d = static_cast<int>(points.rows()), k = static_cast<int>(init.cols());
  faiss::ClusteringParameters cp;
  cp.niter = iterations;
  cp.max_points_per_centroid = static_cast<int>(points.cols());
  faiss::Clustering clustering(d, k, cp);
  clustering.centroids.assign(init.data(), init.data() + init.size());
  faiss::IndexFlatL2 index(d);
  clustering.train(points.cols(), points.data(), index);
  return clustering.iteration_stats.back().obj;
}

}  // namespace kmt

#endif  // KMT_BENCH_FAISS_KMEANS_H_
