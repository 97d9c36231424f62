#include "tests/support/sparse_documents.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <vector>

namespace kmt {

template <typename Scalar>
CsrMatrix<Scalar> TfIdfDocuments(const DocumentOptions& options, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<double> cumulative(options.d);
  double total = 0;
  for (int t = 0; t < options.d; ++t) {
    total += 1 / std::pow(t + 1.0, options.zipf);
    cumulative[t] = total;
  }
  std::uniform_real_distribution<double> uniform(0, total);
  std::uniform_int_distribution<int> length(std::max(1, options.terms / 2),
                                            std::max(1, options.terms * 3 / 2));
  // Each document's term counts, drawn until it has its number of distinct
  // terms (or, past 20 draws a term, as many as it got).
  std::vector<std::map<int32_t, int>> documents(options.n);
  std::vector<int> document_frequency(options.d, 0);
  for (auto& counts : documents) {
    const int target = std::min(length(rng), options.d);
    for (int draw = 0; static_cast<int>(counts.size()) < target && draw < 20 * target; ++draw) {
      const double u = uniform(rng);
      const int t = static_cast<int>(std::min<std::ptrdiff_t>(
          std::upper_bound(cumulative.begin(), cumulative.end(), u) - cumulative.begin(),
          options.d - 1));
      ++counts[t];
    }
    for (const auto& [t, count] : counts) ++document_frequency[t];
  }
  std::vector<int64_t> indptr{0};
  std::vector<int32_t> indices;
  std::vector<Scalar> values;
  for (const auto& counts : documents) {
    std::vector<double> row;
    double sq = 0;
    for (const auto& [t, count] : counts) {
      const double idf = std::log((1.0 + options.n) / (1.0 + document_frequency[t])) + 1;
      row.push_back((1 + std::log(count)) * idf);
      sq += row.back() * row.back();
    }
    size_t r = 0;
    for (const auto& [t, count] : counts) {
      indices.push_back(t);
      values.push_back(static_cast<Scalar>(row[r++] / std::sqrt(sq)));
    }
    indptr.push_back(static_cast<int64_t>(values.size()));
  }
  return *CsrMatrix<Scalar>::Create(options.n, options.d, std::move(indptr), std::move(indices),
                                    std::move(values));
}

template CsrMatrix<float> TfIdfDocuments<float>(const DocumentOptions&, uint64_t);
template CsrMatrix<double> TfIdfDocuments<double>(const DocumentOptions&, uint64_t);

}  // namespace kmt
