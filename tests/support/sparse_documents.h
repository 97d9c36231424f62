// Test problems in sparse form: TF-IDF vectors of random documents, as
// scikit-learn's TfidfVectorizer makes them (1 + log of the term count
// times the smoothed idf, rows scaled to unit norm), term frequencies
// Zipf-distributed over the vocabulary (term t drawn with weight
// 1 / (t + 1)^zipf).
#ifndef KMT_TESTS_SUPPORT_SPARSE_DOCUMENTS_H_
#define KMT_TESTS_SUPPORT_SPARSE_DOCUMENTS_H_

#include <cstdint>

#include "core/sparse.h"

namespace kmt {

struct DocumentOptions {
  int n = 1000;       ///< documents (rows); default 1000
  int d = 5000;       ///< vocabulary (columns); default 5000
  int terms = 50;     ///< mean distinct terms a document; default 50
  double zipf = 1.1;  ///< the term frequencies' exponent; default 1.1
};

template <typename Scalar>
CsrMatrix<Scalar> TfIdfDocuments(const DocumentOptions& options, uint64_t seed);

}  // namespace kmt

#endif  // KMT_TESTS_SUPPORT_SPARSE_DOCUMENTS_H_
