// Sparse resident shards on a real kmt-server on a loopback port: TF-IDF
// documents loaded by the client's ReplicaShards as points_csr chunks over
// Job streams, an assign step answered with the dense path's labels and
// the core's sums, and a malformed chunk ending its job with its named
// error while the server goes on.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "client/replica_shards.h"
#include "core/assign.h"
#include "core/cluster_sums.h"
#include "core/sparse.h"
#include "proto/csr_payload.h"
#include "proto/kmeans_transformer.grpc.pb.h"
#include "proto/raw_payload.h"
#include "tests/integration/server_process.h"
#include "tests/support/sparse_documents.h"

namespace kmt {
namespace {

class SparseShardTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = ServerProcess::Start({"--model_dir="}).release(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  static ServerProcess* server_;
};
ServerProcess* SparseShardTest::server_ = nullptr;

// TF-IDF documents whose first `empty` rows have no terms.
template <typename Scalar>
CsrMatrix<Scalar> Documents(int n, int d, int empty) {
  const CsrMatrix<Scalar> docs = TfIdfDocuments<Scalar>({.n = n, .d = d, .terms = 30}, 11);
  const int64_t skip = docs.indptr()[empty];
  std::vector<int64_t> indptr(n + 1, 0);
  for (int i = empty; i <= n; ++i) indptr[i] = docs.indptr()[i] - skip;
  return *CsrMatrix<Scalar>::Create(
      n, d, std::move(indptr),
      std::vector<int32_t>(docs.indices().begin() + skip, docs.indices().end()),
      std::vector<Scalar>(docs.values().begin() + skip, docs.values().end()));
}

// Two shards on one replica, loaded in chunks of at most 16 KB, answer an
// assign step as the core does on all the points made dense: the labels
// exactly, the counts and weights summed over the shards, the sums and
// objective within their summation's round-off; each shard's sums as rows
// (sparse_sums) are its center_sums. With `empty` rows first, unweighted:
// a float64 shard whose chunks have no values is float64 too.
template <typename Scalar>
void ExpectSparseShardsAssignAsTheCore(const std::string& address, bool weighted, int empty) {
  const int n = 3000, d = 2000, k = 8;
  const CsrMatrix<Scalar> docs = Documents<Scalar>(n, d, empty);
  const Matrix<Scalar> dense = docs.ToDense();
  Vector<Scalar> weights = Vector<Scalar>::Ones(n);
  for (int i = 0; weighted && i < n; ++i) weights[i] = Scalar(1) + (i % 4);
  ReplicaShardOptions options;
  options.servers = {address};
  options.streams_per_server = 2;
  options.chunk_bytes = 16 << 10;
  CsrSource<Scalar> source;
  source.indptr = docs.indptr();
  source.rows = [&docs](int64_t first, int64_t count, CsrRows<Scalar>* out) {
    const int64_t begin = docs.indptr()[first], end = docs.indptr()[first + count];
    for (int64_t i = first; i <= first + count; ++i)
      out->indptr.push_back(docs.indptr()[i] - begin);
    out->indices.assign(docs.indices().begin() + begin, docs.indices().begin() + end);
    out->values.assign(docs.values().begin() + begin, docs.values().begin() + end);
    return absl::OkStatus();
  };
  if (weighted && std::is_same_v<Scalar, double>) {
    options.weights_f64.assign(weights.data(), weights.data() + n);
  } else if (weighted) {
    options.weights.assign(weights.data(), weights.data() + n);
  }
  absl::StatusOr<std::unique_ptr<ReplicaShards>> shards =
      ReplicaShards::Load(options, n, d, std::move(source));
  ASSERT_TRUE(shards.ok()) << shards.status();
  ASSERT_EQ((*shards)->Sizes().size(), 2u);

  const std::vector<int64_t> first_rows = {2000, 2005, 2010, 2015, 2020, 2025, 2030, 2035};
  const Matrix<Scalar> centers = docs.Rows(first_rows.data(), k).ToDense();
  v1::JobRequest request;
  v1::AssignStep* assign = request.mutable_assign();
  assign->set_k(k);
  if constexpr (std::is_same_v<Scalar, double>) {
    EncodeFloat64(absl::MakeConstSpan(centers.data(), centers.size()),
                  assign->mutable_centers_f64());
  } else {
    EncodeFloat32(absl::MakeConstSpan(centers.data(), centers.size()),
                  assign->mutable_centers_f32());
  }
  assign->set_return_labels(true);
  absl::StatusOr<std::vector<v1::JobResponse>> answers = (*shards)->Round({request, request});
  ASSERT_TRUE(answers.ok()) << answers.status();

  Labels want;
  ClusterSums sums(d, k);
  const double objective = AssignNearest(dense, centers, &want, nullptr, &sums, &weights);
  Labels labels;
  std::vector<int64_t> counts(k, 0);
  std::vector<double> cluster_weights(k, 0);
  Matrix<double> cluster_sums = Matrix<double>::Zero(d, k);
  double total = 0;
  for (const v1::JobResponse& answer : *answers) {
    labels.insert(labels.end(), answer.labels().begin(), answer.labels().end());
    ASSERT_EQ(answer.center_counts_size(), k);
    for (int j = 0; j < k; ++j) {
      counts[j] += answer.center_counts(j);
      cluster_weights[j] += weighted ? answer.center_weights(j) : answer.center_counts(j);
    }
    cluster_sums += Eigen::Map<const Matrix<double>>(answer.center_sums().data(), d, k);
    EXPECT_EQ(answer.points_settled_by_bounds(), 0);
    total += answer.objective();
  }
  EXPECT_EQ(labels, want);
  EXPECT_EQ(counts, sums.counts);
  EXPECT_EQ(cluster_weights, sums.weights);
  EXPECT_LE((cluster_sums - sums.sums).cwiseAbs().maxCoeff(),
            1e-9 * sums.sums.cwiseAbs().maxCoeff());
  EXPECT_NEAR(total, objective, (std::is_same_v<Scalar, double> ? 1e-12 : 1e-5) * objective);

  // The same step with the sums as rows: each shard's rows are its
  // center_sums to the bit.
  assign->set_return_labels(false);
  assign->set_sparse_sums(true);
  absl::StatusOr<std::vector<v1::JobResponse>> rows = (*shards)->Round({request, request});
  ASSERT_TRUE(rows.ok()) << rows.status();
  for (size_t s = 0; s < rows->size(); ++s) {
    SCOPED_TRACE(s);
    const v1::JobResponse& answer = (*rows)[s];
    EXPECT_EQ(answer.center_sums_size(), 0);
    EXPECT_EQ(std::vector<int64_t>(answer.center_counts().begin(), answer.center_counts().end()),
              std::vector<int64_t>((*answers)[s].center_counts().begin(),
                                   (*answers)[s].center_counts().end()));
    const absl::StatusOr<CsrMatrix<double>> shard_sums =
        CsrFromProto<double>(answer.center_sums_csr(), d);
    ASSERT_TRUE(shard_sums.ok()) << shard_sums.status();
    EXPECT_EQ(shard_sums->ToDense(),
              Eigen::Map<const Matrix<double>>((*answers)[s].center_sums().data(), d, k));
  }
}

TEST_F(SparseShardTest, SparseChunksOverJobStreamsAssignAsTheCoreOnTheDensePoints) {
  ASSERT_NE(server_, nullptr);
  ExpectSparseShardsAssignAsTheCore<float>(server_->address(), /*weighted=*/true, /*empty=*/0);
}

TEST_F(SparseShardTest, Float64SparseChunksAssignAsTheCoreInDouble) {
  ASSERT_NE(server_, nullptr);
  ExpectSparseShardsAssignAsTheCore<double>(server_->address(), /*weighted=*/true, /*empty=*/0);
}

// The first shard's 1,500 rows are all empty: its chunks carry no values,
// and their float64 flag makes it a float64 shard, which takes the step's
// centers_f64.
TEST_F(SparseShardTest, AFloat64ShardOfEmptyRowsIsFloat64) {
  ASSERT_NE(server_, nullptr);
  ExpectSparseShardsAssignAsTheCore<double>(server_->address(), /*weighted=*/false,
                                            /*empty=*/1500);
}

// A chunk whose second row's columns decrease ends the job: the stream's
// status is INVALID_ARGUMENT, naming the column, its row in the chunk and
// where the chunk's rows are in the shard.
TEST_F(SparseShardTest, AMalformedChunkEndsItsJobWithItsNamedError) {
  ASSERT_NE(server_, nullptr);
  auto stub = v1::KMeansTransformer::NewStub(
      grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  const auto chunk = [](std::vector<int64_t> indptr, std::vector<int> indices,
                        std::vector<float> values) {
    v1::JobRequest request;
    v1::ShardChunk* shard = request.mutable_shard();
    shard->set_n(4);
    shard->set_d(3);
    EncodeInt64(indptr, shard->mutable_points_csr()->mutable_indptr_i64());
    EncodeInt32(indices, shard->mutable_points_csr()->mutable_indices_i32());
    EncodeFloat32(values, shard->mutable_points_csr()->mutable_values_f32());
    shard->mutable_points_csr()->set_shard_nnz(5);
    return request;
  };
  grpc::ClientContext context;
  auto stream = stub->Job(&context);
  ASSERT_TRUE(stream->Write(chunk({0, 1, 2}, {0, 2}, {1, 2})));
  v1::JobResponse response;
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_EQ(response.points_loaded(), 2);
  ASSERT_TRUE(stream->Write(chunk({0, 1, 3}, {1, 2, 0}, {3, 4, 5})));
  stream->WritesDone();
  while (stream->Read(&response)) {
  }
  const grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(),
            "the chunk from shard row 2 (its row r is shard row 2 + r): points_csr: indices[2] = "
            "0 (row 1) is below indices[1] = 2: columns must increase within a row (scipy: "
            "sort_indices())");

  // The server goes on: the same shard, its chunks good, is assigned.
  grpc::ClientContext again;
  auto good = stub->Job(&again);
  ASSERT_TRUE(good->Write(chunk({0, 1, 2}, {0, 2}, {1, 2})));
  ASSERT_TRUE(good->Write(chunk({0, 1, 3}, {1, 0, 2}, {3, 4, 5})));
  v1::JobRequest step;
  step.mutable_assign()->set_k(1);
  EncodeFloat32(std::vector<float>{0, 0, 0}, step.mutable_assign()->mutable_centers_f32());
  ASSERT_TRUE(good->Write(step));
  good->WritesDone();
  std::vector<v1::JobResponse> responses;
  while (good->Read(&response)) responses.push_back(response);
  EXPECT_TRUE(good->Finish().ok());
  ASSERT_EQ(responses.size(), 3u);
  EXPECT_EQ(responses[1].points_loaded(), 4);
  ASSERT_EQ(responses[2].center_counts_size(), 1);
  EXPECT_EQ(responses[2].center_counts(0), 4);
  EXPECT_EQ(
      std::vector<double>(responses[2].center_sums().begin(), responses[2].center_sums().end()),
      (std::vector<double>{1 + 4, 3, 2 + 5}));
  EXPECT_EQ(responses[2].objective(), 1 + 4 + 9 + 16 + 25);
}

}  // namespace
}  // namespace kmt
