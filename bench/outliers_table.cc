// What the robust variants buy on data with planted outliers: Gaussian
// mixtures with a share of the points replaced by far outliers; for each
// model, the mean distance of the found centers to the true means (after the
// best matching of centers to means) and the k-means objective of the inliers
// per inlier. Every model starts from the same k-means++ centers. Prints a
// Markdown table.
//   build/bench/outliers_table [--seeds=5]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "core/assign.h"
#include "core/engine.h"
#include "core/init.h"
#include "core/random.h"

namespace kmt {
namespace {

constexpr int kN = 3000, kD = 8, kK = 6, kLayers = 20;
constexpr double kScale = 0.05;

struct Problem {
  Matrix<double> points;  // d x n
  Matrix<double> means;   // d x k, the true ones
  std::vector<bool> outlier;
};

// k blobs with means uniform in [0, 1]^d; a share of the points replaced by
// outliers uniform in a box 20 times wider around the data.
Problem Make(double share, uint64_t seed) {
  Rng rng(seed);
  Problem p;
  p.means.resize(kD, kK);
  for (Eigen::Index i = 0; i < p.means.size(); ++i) p.means.data()[i] = rng.Uniform();
  p.points.resize(kD, kN);
  p.outlier.assign(kN, false);
  for (int i = 0; i < kN; ++i) {
    if (rng.Uniform() < share) {
      p.outlier[i] = true;
      for (int l = 0; l < kD; ++l) p.points(l, i) = 20 * rng.Uniform() - 9.5;
    } else {
      const int j = i % kK;
      for (int l = 0; l < kD; ++l) p.points(l, i) = p.means(l, j) + kScale * rng.Normal();
    }
  }
  return p;
}

// Mean distance of the found centers to the true means under the best
// one-to-one matching (all k! orders; k is small).
double MatchedDistance(const Matrix<double>& found, const Matrix<double>& truth) {
  std::vector<int> order(kK);
  std::iota(order.begin(), order.end(), 0);
  double best = std::numeric_limits<double>::infinity();
  do {
    double total = 0;
    for (int j = 0; j < kK; ++j) total += (found.col(order[j]) - truth.col(j)).norm();
    best = std::min(best, total / kK);
  } while (std::next_permutation(order.begin(), order.end()));
  return best;
}

double InlierObjective(const Problem& p, const Matrix<double>& centers) {
  std::vector<Eigen::Index> inliers;
  for (int i = 0; i < kN; ++i) {
    if (!p.outlier[i]) inliers.push_back(i);
  }
  Matrix<double> x(kD, inliers.size());
  for (size_t t = 0; t < inliers.size(); ++t) x.col(t) = p.points.col(inliers[t]);
  return Objective(x, centers) / static_cast<double>(inliers.size());
}

// The fixed-quantile trimmed k-means the normmax variant is compared with:
// Lloyd's, but each cluster's farthest `share` of points left out of its
// mean. Not a served model: a baseline, written here with the engine's
// assignment.
Matrix<double> QuantileTrimmed(const Matrix<double>& points, Matrix<double> centers, double share) {
  for (int t = 0; t < kLayers; ++t) {
    Labels labels;
    Vector<double> sq_dist;
    AssignNearest(points, centers, &labels, &sq_dist);
    for (int j = 0; j < kK; ++j) {
      std::vector<std::pair<double, int>> members;
      for (int i = 0; i < kN; ++i) {
        if (labels[i] == j) members.emplace_back(sq_dist[i], i);
      }
      if (members.empty()) continue;
      std::sort(members.begin(), members.end());
      const size_t keep =
          std::max<size_t>(1, static_cast<size_t>(std::ceil((1 - share) * members.size())));
      Vector<double> sum = Vector<double>::Zero(kD);
      for (size_t m = 0; m < keep; ++m) sum += points.col(members[m].second);
      centers.col(j) = sum / static_cast<double>(keep);
    }
  }
  return centers;
}

struct Entry {
  const char* model;
  const char* label;
  BatchSpec<double> parameters;
};

int Main(int seeds) {
  const std::vector<ServedModel<double>> models = ExactModels<double>();
  const auto find = [&](const std::string& name) -> const ServedModel<double>* {
    for (const ServedModel<double>& m : models) {
      if (m.name() == name) return &m;
    }
    return nullptr;
  };
  const std::vector<Entry> entries = {
      {"lloyd-onehot", "Lloyd's", {}},
      {"soft-kmeans", "soft, beta = 100", {.parameters = {{"beta", 100}}}},
      {"trimmed-kmeans", "trimmed, tau = 1", {.parameters = {{"tau", 1}}}},
      {"robust-kmeans", "robust, beta = 20", {.parameters = {{"beta", 20}}}},
      {"kmedoids", "k-medoids, gamma = inf", {}},
  };
  std::printf(
      "n = %d, d = %d, k = %d, cluster scale %.2f, %d layers, %d seeds; outliers uniform "
      "in [-9.5, 10.5]^d; mean over seeds\n\n",
      kN, kD, kK, kScale, kLayers, seeds);
  std::printf("| outliers | model | distance to the true means | inlier objective per point |\n");
  std::printf("|---|---|---|---|\n");
  for (const double share : {0.0, 0.05, 0.2}) {
    for (const Entry& e : entries) {
      const ServedModel<double>* model = find(e.model);
      if (model == nullptr) continue;
      double distance = 0, objective = 0;
      for (int s = 1; s <= seeds; ++s) {
        const Problem p = Make(share, 1000 + s);
        BatchSpec<double> spec = e.parameters;
        spec.points = p.points;
        spec.k = kK;
        spec.layers = kLayers;
        spec.init = InitMethod::kRandomSubset;
        spec.seed = s;
        const absl::StatusOr<RunResult<double>> run =
            Cluster(*model, *Batch<double>::Validate(std::move(spec)));
        if (!run.ok()) {
          std::fprintf(stderr, "%s: %s\n", e.model, std::string(run.status().message()).c_str());
          return 1;
        }
        distance += MatchedDistance(run->centers, p.means) / seeds;
        objective += InlierObjective(p, run->centers) / seeds;
      }
      std::printf("| %.0f%% | %s | %.4f | %.5f |\n", 100 * share, e.label, distance, objective);
    }
    double distance = 0, objective = 0;
    for (int s = 1; s <= seeds; ++s) {
      const Problem p = Make(share, 1000 + s);
      const Matrix<double> init = *InitialCenters(p.points, kK, InitMethod::kRandomSubset, s);
      const Matrix<double> centers = QuantileTrimmed(p.points, init, 0.05);
      distance += MatchedDistance(centers, p.means) / seeds;
      objective += InlierObjective(p, centers) / seeds;
    }
    std::printf(
        "| %.0f%% | fixed-quantile trimmed (farthest 5%% of each cluster out) | %.4f | "
        "%.5f |\n",
        100 * share, distance, objective);
  }
  return 0;
}

}  // namespace
}  // namespace kmt

int main(int argc, char** argv) {
  int seeds = 5;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--seeds=", 8) == 0) seeds = std::max(1, std::atoi(argv[i] + 8));
  }
  return kmt::Main(seeds);
}
