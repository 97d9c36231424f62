// The helpers the service's integration tests share (service_fixture.h).
#include "tests/integration/service_fixture.h"

#include <cstdlib>
#include <fstream>
#include <thread>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "learn/task_generator.h"
#include "tests/integration/server_process.h"

namespace kmt {

void WriteCsv(const std::string& path, const Matrix<float>& points) {
  std::ofstream out(path);
  for (Eigen::Index i = 0; i < points.cols(); ++i) {
    for (Eigen::Index l = 0; l < points.rows(); ++l) {
      out << (l ? "," : "") << absl::StrFormat("%.9g", points(l, i));
    }
    out << "\n";
  }
}

std::vector<std::vector<float>> ReadCsv(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::vector<float>> rows;
  std::string line;
  while (std::getline(in, line)) {
    std::vector<float> row;
    for (absl::string_view field : absl::StrSplit(line, ',')) {
      row.push_back(std::strtof(std::string(field).c_str(), nullptr));
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

Labels ReadLabels(const std::string& path) {
  std::ifstream in(path);
  Labels labels;
  for (int label; in >> label;) labels.push_back(label);
  return labels;
}

v1::ClusterRequest Request(const std::string& id, const std::string& model,
                           const Matrix<float>& points, int k, int iterations) {
  v1::ClusterRequest r;
  r.set_request_id(id);
  r.set_model(model);
  r.set_n(points.cols());
  r.set_d(static_cast<int>(points.rows()));
  r.mutable_points()->Add(points.data(), points.data() + points.size());
  r.set_k(k);
  r.set_iterations(iterations);
  r.set_seed(5);
  return r;
}

Exchange Stream(const std::string& address, const std::vector<v1::ClusterRequest>& requests,
                grpc::ClientContext* context, std::atomic<int>* received) {
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(-1);
  args.SetMaxReceiveMessageSize(-1);
  auto stub = v1::KMeansTransformer::NewStub(
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
  auto stream = stub->Cluster(context);
  std::thread writer([&] {
    for (const v1::ClusterRequest& r : requests) {
      if (!stream->Write(r)) break;
    }
    stream->WritesDone();
  });
  Exchange e;
  for (v1::ClusterResponse r; stream->Read(&r);) {
    e.responses.push_back(r);
    if (received) ++*received;
  }
  writer.join();
  e.status = stream->Finish();
  return e;
}

Exchange Stream(const std::string& address, const std::vector<v1::ClusterRequest>& requests) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  return Stream(address, requests, &context);
}

const Dataset& HundredThousand() {
  static const Dataset* data = [] {
    auto* d = new Dataset;
    d->points = GenerateTask<float>({.n = 100000, .d = 8, .k = 6, .scale = 0.08}, 12).points;
    d->csv = TempDir("data") + "/points.csv";
    WriteCsv(d->csv, d->points);
    return d;
  }();
  return *data;
}

std::string CliBinary() { return KMT_CLI_BINARY; }

bool SmallBatchAnswered(const std::string& address) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  const Exchange e = Stream(
      address, {Request("small", "lloyd-onehot", HundredThousand().points.leftCols(300), 3, 3)},
      &context);
  return e.status.ok() && e.responses.size() == 1 && !e.responses[0].has_error();
}

}  // namespace kmt
