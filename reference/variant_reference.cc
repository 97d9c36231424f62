#include "reference/variant_reference.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <utility>

#include "core/random.h"

namespace kmt {
namespace {

using Members = std::vector<Eigen::Index>;

// Runs the iterations of a variant: labels against the current centers, then
// update(iteration, labels, &centers) moves the centers and returns how many
// kept theirs.
template <typename Scalar, typename Update>
std::vector<LloydIteration<Scalar>> Iterate(const Matrix<Scalar>& points,
                                            const Matrix<Scalar>& centers, int iterations,
                                            Update update) {
  std::vector<LloydIteration<Scalar>> history;
  Matrix<Scalar> current = centers;
  for (int t = 0; t < iterations; ++t) {
    LloydIteration<Scalar> it;
    it.labels = ReferenceLabels(points, current);
    it.empty_clusters = update(t, it.labels, &current);
    it.centers = current;
    it.objective = ReferenceObjective(points, current);
    history.push_back(std::move(it));
  }
  return history;
}

// For variants whose update is per cluster: update(iteration, j, members,
// &centers) writes center j from the cluster's points (in increasing index)
// and returns false when it kept the center; an empty cluster keeps its
// center without a call. Both count as empty.
template <typename Scalar, typename ClusterUpdate>
std::vector<LloydIteration<Scalar>> IteratePerCluster(const Matrix<Scalar>& points,
                                                      const Matrix<Scalar>& centers, int iterations,
                                                      ClusterUpdate update) {
  return Iterate(points, centers, iterations,
                 [&](int t, const Labels& labels, Matrix<Scalar>* current) {
                   std::vector<Members> clusters(current->cols());
                   for (Eigen::Index i = 0; i < points.cols(); ++i) {
                     clusters[labels[i]].push_back(i);
                   }
                   int kept = 0;
                   for (Eigen::Index j = 0; j < current->cols(); ++j) {
                     if (clusters[j].empty() || !update(t, j, clusters[j], current)) ++kept;
                   }
                   return kept;
                 });
}

// sum_p weights[p] x_{members[p]}, accumulated in double in the given order.
template <typename Scalar>
Vector<double> WeightedSum(const Matrix<Scalar>& points, const Members& members,
                           const std::vector<double>& weights) {
  Vector<double> sum = Vector<double>::Zero(points.rows());
  for (size_t p = 0; p < members.size(); ++p) {
    for (Eigen::Index l = 0; l < points.rows(); ++l) {
      sum(l) += weights[p] * static_cast<double>(points(l, members[p]));
    }
  }
  return sum;
}

// Positions 0..scores.size()-1 sorted by score descending, ties: lower
// position first (members are in increasing point index, so lower index).
std::vector<size_t> DescendingOrder(const std::vector<double>& scores) {
  std::vector<size_t> order(scores.size());
  for (size_t p = 0; p < order.size(); ++p) order[p] = p;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return scores[a] > scores[b]; });
  return order;
}

// -scale ||x_i - c_j||^2 for the cluster's points, the distance in Scalar.
template <typename Scalar>
std::vector<double> ScaledScores(const Matrix<Scalar>& points, const Members& members,
                                 const Matrix<Scalar>& centers, Eigen::Index j, double scale) {
  std::vector<double> scores(members.size());
  for (size_t p = 0; p < members.size(); ++p) {
    scores[p] =
        -scale * static_cast<double>(ReferenceSquaredDistance(points, members[p], centers, j));
  }
  return scores;
}

// Each column scaled to unit norm, the norm taken in double.
template <typename Scalar>
Matrix<Scalar> UnitColumns(const Matrix<Scalar>& m) {
  Matrix<Scalar> unit(m.rows(), m.cols());
  for (Eigen::Index j = 0; j < m.cols(); ++j) {
    double squared = 0;
    for (Eigen::Index l = 0; l < m.rows(); ++l) {
      squared += static_cast<double>(m(l, j)) * static_cast<double>(m(l, j));
    }
    assert(squared > 0 && "spherical k-means needs nonzero points and centers");
    const double norm = std::sqrt(squared);
    for (Eigen::Index l = 0; l < m.rows(); ++l) {
      unit(l, j) = static_cast<Scalar>(static_cast<double>(m(l, j)) / norm);
    }
  }
  return unit;
}

}  // namespace

template <typename Scalar>
std::vector<LloydIteration<Scalar>> ReferenceSoftKMeans(const Matrix<Scalar>& points,
                                                        const Matrix<Scalar>& centers, double beta,
                                                        int iterations) {
  const Eigen::Index n = points.cols();
  Members everyone(n);
  for (Eigen::Index i = 0; i < n; ++i) everyone[i] = i;
  return Iterate(points, centers, iterations, [&](int, const Labels&, Matrix<Scalar>* current) {
    const Eigen::Index k = current->cols();
    // responsibility[j][i]: point i's softmax weight on center j.
    std::vector<std::vector<double>> responsibility(k, std::vector<double>(n));
    std::vector<double> z(k);
    for (Eigen::Index i = 0; i < n; ++i) {
      for (Eigen::Index j = 0; j < k; ++j) {
        z[j] = -beta * static_cast<double>(ReferenceSquaredDistance(points, i, *current, j));
      }
      const double max = *std::max_element(z.begin(), z.end());
      double total = 0;
      for (Eigen::Index j = 0; j < k; ++j) {
        z[j] = std::exp(z[j] - max);
        total += z[j];
      }
      for (Eigen::Index j = 0; j < k; ++j) responsibility[j][i] = z[j] / total;
    }
    int kept = 0;
    for (Eigen::Index j = 0; j < k; ++j) {
      double mass = 0;
      for (double r : responsibility[j]) mass += r;
      if (mass == 0) {
        ++kept;
        continue;
      }
      current->col(j) =
          (WeightedSum(points, everyone, responsibility[j]) / mass).template cast<Scalar>();
    }
    return kept;
  });
}

template <typename Scalar>
std::vector<LloydIteration<Scalar>> ReferenceTrimmedKMeans(const Matrix<Scalar>& points,
                                                           const Matrix<Scalar>& centers,
                                                           double tau, int iterations) {
  return IteratePerCluster(
      points, centers, iterations,
      [&](int, Eigen::Index j, const Members& members, Matrix<Scalar>* current) {
        const std::vector<double> scores = ScaledScores(points, members, *current, j, 1.0);
        const std::vector<size_t> order = DescendingOrder(scores);
        // mean(s_1..s_r) - tau / r, written (sum - tau) / r: one rounding, so
        // values equal in exact arithmetic tie here too.
        double prefix = 0, best = -std::numeric_limits<double>::infinity();
        size_t best_r = 0;
        for (size_t r = 1; r <= order.size(); ++r) {
          prefix += scores[order[r - 1]];
          const double value = (prefix - tau) / static_cast<double>(r);
          if (value > best) {
            best = value;
            best_r = r;
          }
        }
        // The kept points summed in increasing index, as Lloyd's sums them.
        std::vector<double> keep(members.size(), 0.0);
        for (size_t r = 0; r < best_r; ++r) keep[order[r]] = 1.0;
        current->col(j) = (WeightedSum(points, members, keep) / static_cast<double>(best_r))
                              .template cast<Scalar>();
        return true;
      });
}

template <typename Scalar>
std::vector<LloydIteration<Scalar>> ReferenceRobustKMeans(const Matrix<Scalar>& points,
                                                          const Matrix<Scalar>& centers,
                                                          double beta, int iterations) {
  return IteratePerCluster(
      points, centers, iterations,
      [&](int, Eigen::Index j, const Members& members, Matrix<Scalar>* current) {
        std::vector<double> w = ScaledScores(points, members, *current, j, beta);
        const std::vector<size_t> order = DescendingOrder(w);
        // The projection ignores a common shift: scores relative to the best
        // keep the sums small whatever beta is.
        const double top = w[order[0]];
        for (double& z : w) z -= top;
        // Sparsemax: the support is the longest prefix of the sorted scores
        // whose r-th score exceeds (their sum - 1) / r, and that value is t.
        double prefix = 0, threshold = 0;
        for (size_t r = 1; r <= order.size(); ++r) {
          prefix += w[order[r - 1]];
          const double t = (prefix - 1) / static_cast<double>(r);
          if (w[order[r - 1]] <= t) break;
          threshold = t;
        }
        for (double& z : w) z = std::max(z - threshold, 0.0);
        current->col(j) = WeightedSum(points, members, w).template cast<Scalar>();
        return true;
      });
}

template <typename Scalar>
std::vector<LloydIteration<Scalar>> ReferenceKMedoids(const Matrix<Scalar>& points,
                                                      const Matrix<Scalar>& centers, double gamma,
                                                      uint64_t seed, int iterations) {
  return IteratePerCluster(
      points, centers, iterations,
      [&](int t, Eigen::Index j, const Members& members, Matrix<Scalar>* current) {
        const Vector<double> mean =
            WeightedSum(points, members, std::vector<double>(members.size(), 1.0)) /
            static_cast<double>(members.size());
        Eigen::Index choice = members[0];
        double best = -std::numeric_limits<double>::infinity();
        for (Eigen::Index i : members) {
          double distance = 0;
          for (Eigen::Index l = 0; l < points.rows(); ++l) {
            const double diff = static_cast<double>(points(l, i)) - mean(l);
            distance += diff * diff;
          }
          const double score =
              gamma == 0 ? -distance : -gamma * distance + CounterGumbel(seed, t, j, i);
          if (score > best) {
            best = score;
            choice = i;
          }
        }
        current->col(j) = points.col(choice);
        return true;
      });
}

template <typename Scalar>
std::vector<LloydIteration<Scalar>> ReferenceSphericalKMeans(const Matrix<Scalar>& points,
                                                             const Matrix<Scalar>& centers,
                                                             int iterations) {
  const Matrix<Scalar> unit = UnitColumns(points);
  return IteratePerCluster(
      unit, UnitColumns(centers), iterations,
      [&](int, Eigen::Index j, const Members& members, Matrix<Scalar>* current) {
        const Vector<double> sum =
            WeightedSum(unit, members, std::vector<double>(members.size(), 1.0));
        const double norm = sum.norm();
        if (norm == 0) return false;
        current->col(j) = (sum / norm).template cast<Scalar>();
        return true;
      });
}

#define KMT_INSTANTIATE(S)                                                                         \
  template std::vector<LloydIteration<S>> ReferenceSoftKMeans<S>(const Matrix<S>&,                 \
                                                                 const Matrix<S>&, double, int);   \
  template std::vector<LloydIteration<S>> ReferenceTrimmedKMeans<S>(                               \
      const Matrix<S>&, const Matrix<S>&, double, int);                                            \
  template std::vector<LloydIteration<S>> ReferenceRobustKMeans<S>(const Matrix<S>&,               \
                                                                   const Matrix<S>&, double, int); \
  template std::vector<LloydIteration<S>> ReferenceKMedoids<S>(const Matrix<S>&, const Matrix<S>&, \
                                                               double, uint64_t, int);             \
  template std::vector<LloydIteration<S>> ReferenceSphericalKMeans<S>(const Matrix<S>&,            \
                                                                      const Matrix<S>&, int);
KMT_INSTANTIATE(float)
KMT_INSTANTIATE(double)
#undef KMT_INSTANTIATE

}  // namespace kmt
