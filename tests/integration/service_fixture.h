// What the service's integration tests share: requests written as a client
// writes them, raw streams to a server, a 100,000-point dataset on disk as
// the CLI reads it, the CLI's output files read back, and the small batch
// that shows a worker is free.
#ifndef KMT_TESTS_INTEGRATION_SERVICE_FIXTURE_H_
#define KMT_TESTS_INTEGRATION_SERVICE_FIXTURE_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/types.h"
#include "proto/kmeans_transformer.grpc.pb.h"

namespace kmt {

// Points as CSV, one point a line, every value written to read back as
// itself.
void WriteCsv(const std::string& path, const Matrix<float>& points);

// A request for `model` on these points, seed 5.
v1::ClusterRequest Request(const std::string& id, const std::string& model,
                           const Matrix<float>& points, int k, int iterations);

struct Exchange {
  std::vector<v1::ClusterResponse> responses;
  grpc::Status status;
};

// Sends every request on one stream and reads until the stream ends,
// counting responses in `received` as they arrive.
Exchange Stream(const std::string& address, const std::vector<v1::ClusterRequest>& requests,
                grpc::ClientContext* context, std::atomic<int>* received = nullptr);
// The same with a 120 s deadline.
Exchange Stream(const std::string& address, const std::vector<v1::ClusterRequest>& requests);

// 100,000 points in d = 8 from a 6-component mixture, and the CSV file
// holding them.
struct Dataset {
  Matrix<float> points;
  std::string csv;
};
const Dataset& HundredThousand();

// The files the CLI writes, read back: CSV rows of numbers, labels one per
// line, and the values after a version 1.0 .npy header.
std::vector<std::vector<float>> ReadCsv(const std::string& path);
Labels ReadLabels(const std::string& path);
template <typename T>
std::vector<T> ReadNpy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < 10) return {};
  const size_t offset =
      10 + static_cast<unsigned char>(bytes[8]) + 256 * static_cast<unsigned char>(bytes[9]);
  std::vector<T> values((bytes.size() - offset) / sizeof(T));
  std::memcpy(values.data(), bytes.data() + offset, values.size() * sizeof(T));
  return values;
}

// The kmt CLI the tests run.
std::string CliBinary();

// With one worker, a small batch is answered only once the worker is free.
bool SmallBatchAnswered(const std::string& address);

}  // namespace kmt

#endif  // KMT_TESTS_INTEGRATION_SERVICE_FIXTURE_H_
