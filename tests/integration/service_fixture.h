// What the service's integration tests share: requests written as a client
// writes them, raw streams to a server, a 100,000-point dataset on disk as
// the CLI reads it, and the small batch that shows a worker is free.
#ifndef KMT_TESTS_INTEGRATION_SERVICE_FIXTURE_H_
#define KMT_TESTS_INTEGRATION_SERVICE_FIXTURE_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
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

// The kmt CLI the tests run.
std::string CliBinary();

// With one worker, a small batch is answered only once the worker is free.
bool SmallBatchAnswered(const std::string& address);

}  // namespace kmt

#endif  // KMT_TESTS_INTEGRATION_SERVICE_FIXTURE_H_
