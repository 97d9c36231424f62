// Paper A's temperature sweep for soft k-means: the objective after T layers
// against beta, next to Lloyd's from the same start, on the fast path.
// Prints a Markdown table and, with --svg=FILE, writes the figure.
//   build/bench/soft_sweep [--svg=docs/soft-kmeans-sweep.svg]
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "core/engine.h"
#include "core/init.h"
#include "learn/task_generator.h"

namespace kmt {
namespace {

constexpr int kD = 32, kK = 10, kLayers = 10;
const std::vector<double> kBetas = {1, 3, 10, 30, 100, 300, 1000, 3000, 10000};
const std::vector<int> kSizes = {10000, 100000, 1000000};

const ServedModel<float>& Model(const std::string& name) {
  static const std::vector<ServedModel<float>> models = ExactModels<float>();
  for (const ServedModel<float>& m : models) {
    if (m.name() == name) return m;
  }
  std::abort();
}

double Objective(const std::string& model, const Matrix<float>& points, const Matrix<float>& init,
                 double beta) {
  BatchSpec<float> spec{.points = points,
                        .k = kK,
                        .layers = kLayers,
                        .given_centers = init,
                        .parameters = {{"beta", beta}}};
  return Cluster(Model(model), *Batch<float>::Validate(std::move(spec)))->objective;
}

// ratios[s][b]: soft k-means' objective over Lloyd's, size s, beta b.
void WriteSvg(const std::string& path, const std::vector<std::vector<double>>& ratios) {
  const double w = 560, h = 340, left = 70, right = 20, top = 20, bottom = 50;
  double lo = 1, hi = 1;
  for (const auto& row : ratios) {
    for (double r : row) lo = std::min(lo, r), hi = std::max(hi, r);
  }
  hi = hi + 0.05 * (hi - lo);
  const auto x = [&](double beta) { return left + (std::log10(beta) / 4.0) * (w - left - right); };
  const auto y = [&](double r) { return top + (hi - r) / (hi - lo) * (h - top - bottom); };
  std::ofstream out(path);
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << w << "\" height=\"" << h
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  out << "<line x1=\"" << left << "\" y1=\"" << y(1) << "\" x2=\"" << w - right << "\" y2=\""
      << y(1) << "\" stroke=\"#888\" stroke-dasharray=\"4 3\"/>\n"
      << "<text x=\"" << w - right - 90 << "\" y=\"" << y(1) - 5 << "\">Lloyd's = 1</text>\n";
  for (int e = 0; e <= 4; ++e) {
    const double beta = std::pow(10.0, e);
    out << "<text x=\"" << x(beta) - 12 << "\" y=\"" << h - bottom + 18 << "\">1e" << e
        << "</text>\n";
  }
  out << "<text x=\"" << (w - right + left) / 2 - 20 << "\" y=\"" << h - 10 << "\">beta</text>\n"
      << "<text x=\"12\" y=\"" << top + 10 << "\">objective after 10 layers / Lloyd's</text>\n";
  for (int t = 0; t <= 4; ++t) {
    const double r = lo + (hi - lo) * t / 4;
    out << "<text x=\"8\" y=\"" << y(r) + 4 << "\">" << std::to_string(r).substr(0, 5)
        << "</text>\n";
  }
  const char* colors[] = {"#1b9e77", "#d95f02", "#7570b3"};
  for (size_t s = 0; s < ratios.size(); ++s) {
    out << "<polyline fill=\"none\" stroke=\"" << colors[s] << "\" stroke-width=\"2\" points=\"";
    for (size_t b = 0; b < kBetas.size(); ++b) out << x(kBetas[b]) << "," << y(ratios[s][b]) << " ";
    out << "\"/>\n<text x=\"" << w - right - 110 << "\" y=\"" << top + 30 + 16 * s << "\" fill=\""
        << colors[s] << "\">n = " << kSizes[s] << "</text>\n";
  }
  out << "</svg>\n";
}

int Main(const std::string& svg) {
  std::printf(
      "d = %d, k = %d, %d layers from the same random-subset start, float; "
      "soft k-means' objective / Lloyd's\n\n| n |",
      kD, kK, kLayers);
  for (double beta : kBetas) std::printf(" beta %g |", beta);
  std::printf("\n|---|");
  for (size_t b = 0; b < kBetas.size(); ++b) std::printf("---|");
  std::printf("\n");
  std::vector<std::vector<double>> ratios;
  for (int n : kSizes) {
    const Matrix<float> points = GenerateTask<float>({.n = n, .d = kD, .k = kK}, 7).points;
    const Matrix<float> init = *InitialCenters(points, kK, InitMethod::kRandomSubset, 7);
    const double lloyd = Objective("lloyd-onehot", points, init, 0);
    std::vector<double> row;
    std::printf("| %d |", n);
    for (double beta : kBetas) {
      row.push_back(Objective("soft-kmeans", points, init, beta) / lloyd);
      std::printf(" %.4f |", row.back());
    }
    std::printf("\n");
    ratios.push_back(row);
  }
  if (!svg.empty()) WriteSvg(svg, ratios);
  return 0;
}

}  // namespace
}  // namespace kmt

int main(int argc, char** argv) {
  std::string svg;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--svg=", 6) == 0) svg = argv[i] + 6;
  }
  return kmt::Main(svg);
}
