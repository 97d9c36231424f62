#include "core/assign.h"

#include <algorithm>
#include <limits>

#include "core/distances.h"

namespace kmt {
namespace {

// Points per matrix-product block: the block's distances (points x k) stay
// within about 256 KiB so they are scanned while still in the core's cache.
Eigen::Index BlockSize(Eigen::Index k, size_t scalar_bytes) {
  const Eigen::Index budget = (256 * 1024) / static_cast<Eigen::Index>(scalar_bytes);
  return std::clamp<Eigen::Index>(budget / std::max<Eigen::Index>(k, 1), 64, 4096) &
         ~Eigen::Index{15};
}

}  // namespace

template <typename Scalar>
void AssignNearest(const Matrix<Scalar>& points, const Matrix<Scalar>& centers, Labels* labels,
                   Vector<Scalar>* sq_dist) {
  const Eigen::Index d = points.rows(), n = points.cols(), k = centers.cols();
  labels->assign(n, 0);
  if (sq_dist != nullptr) sq_dist->resize(n);
  if (n == 0 || k == 0) return;

  const Vector<Scalar> center_sq = SquaredNorms<Scalar>(centers);
  const Scalar center_sq_max = center_sq.maxCoeff();
  const Eigen::Index block = BlockSize(k, sizeof(Scalar));
  const Eigen::Index blocks = (n + block - 1) / block;
  int* out = labels->data();

#pragma omp parallel if (n * k * d > (1 << 18))
  {
    Matrix<Scalar> dist(block, k);
    Vector<Scalar> best(block), second(block);
    std::vector<int> arg(block);
#pragma omp for schedule(static)
    for (Eigen::Index b = 0; b < blocks; ++b) {
      const Eigen::Index first = b * block;
      const Eigen::Index rows = std::min(block, n - first);
      const auto x = points.middleCols(first, rows);
      const Vector<Scalar> x_sq = SquaredNorms<Scalar>(x);
      // The kernel's product, then its last step fused into the argmin scan
      // (the products stay in `dist`).
      auto cross = dist.topRows(rows);
      cross.noalias() = x.transpose() * centers;
      Scalar* best_p = best.data();
      Scalar* second_p = second.data();
      int* arg_p = arg.data();
      std::fill_n(best_p, rows, std::numeric_limits<Scalar>::infinity());
      std::fill_n(second_p, rows, std::numeric_limits<Scalar>::infinity());
      std::fill_n(arg_p, rows, 0);
      for (Eigen::Index j = 0; j < k; ++j) {
        const Scalar* col = dist.col(j).data();
        const Scalar* x_sq_p = x_sq.data();
        const Scalar cj = center_sq[j];
        const int jj = static_cast<int>(j);
        for (Eigen::Index i = 0; i < rows; ++i) {
          const Scalar v = FinishSquaredDistance(col[i], x_sq_p[i], cj);
          const Scalar b0 = best_p[i];
          second_p[i] = std::min(second_p[i], std::max(b0, v));
          arg_p[i] = v < b0 ? jj : arg_p[i];
          best_p[i] = std::min(b0, v);
        }
      }
      for (Eigen::Index i = 0; i < rows; ++i) {
        const Scalar* xi = points.col(first + i).data();
        const Scalar slack = 2 * SquaredDistanceRoundOff(d, x_sq[i], center_sq_max);
        int label = arg_p[i];
        if (second_p[i] - best_p[i] <= slack) {
          Scalar exact = std::numeric_limits<Scalar>::infinity();
          for (Eigen::Index j = 0; j < k; ++j) {
            if (FinishSquaredDistance(dist(i, j), x_sq[i], center_sq[j]) > best_p[i] + slack) {
              continue;
            }
            const Scalar s = DirectSquaredDistance(xi, centers.col(j).data(), d);
            if (s < exact) {
              exact = s;
              label = static_cast<int>(j);
            }
          }
        }
        out[first + i] = label;
        if (sq_dist != nullptr) {
          (*sq_dist)[first + i] = (x.col(i) - centers.col(label)).squaredNorm();
        }
      }
    }
  }
}

template <typename Scalar>
double Objective(const Matrix<Scalar>& points, const Matrix<Scalar>& centers) {
  Labels labels;
  Vector<Scalar> sq_dist;
  AssignNearest(points, centers, &labels, &sq_dist);
  return sq_dist.template cast<double>().sum();
}

#define KMT_INSTANTIATE(S)                                                                 \
  template void AssignNearest<S>(const Matrix<S>&, const Matrix<S>&, Labels*, Vector<S>*); \
  template double Objective<S>(const Matrix<S>&, const Matrix<S>&);
KMT_INSTANTIATE(float)
KMT_INSTANTIATE(double)
#undef KMT_INSTANTIATE

}  // namespace kmt
