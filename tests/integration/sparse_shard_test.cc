// Sparse resident shards on a real kmt-server on a loopback port: TF-IDF
// documents loaded by the client's ReplicaShards as points_csr chunks over
// Job streams, an assign step answered with the dense path's labels and
// the core's sums, and a malformed chunk ending its job with its named
// error while the server goes on.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "client/replica_shards.h"
#include "client/resident_job.h"
#include "core/assign.h"
#include "core/cluster_sums.h"
#include "core/sparse.h"
#include "proto/csr_payload.h"
#include "proto/kmeans_transformer.grpc.pb.h"
#include "proto/raw_payload.h"
#include "tests/integration/one_server_test.h"
#include "tests/support/sparse_documents.h"

namespace kmt {
namespace {

class SparseShardTest : public OneServerTest {};

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

// The documents as the driver reads a CSR matrix: rows by offsets, each
// chunk's offsets from 0.
template <typename Scalar>
CsrSource<Scalar> SourceOf(const CsrMatrix<Scalar>& docs) {
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
  return source;
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
  CsrSource<Scalar> source = SourceOf(docs);
  if (weighted) options.weights = std::vector<Scalar>(weights.data(), weights.data() + n);
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

// A sparse job in one shard runs its Lloyd's iterations where the shard is
// (one LloydStepsStep): the centers, labels, objectives, label changes,
// counts, iterations and why they stopped are those of the same job asked
// step by step, to the bit, weighted or not, with empty clusters relocated
// (duplicate starting centers leave clusters empty), with a tolerance that
// stops it, and with the objectives of the first and last steps alone.
template <typename Scalar>
void ExpectStepsInPlaceAsStepByStep(const std::string& address) {
  const int n = 3000, d = 2000, k = 8;
  const CsrMatrix<Scalar> docs = Documents<Scalar>(n, d, /*empty=*/0);
  std::vector<Scalar> weights(n);
  for (int i = 0; i < n; ++i) weights[i] = Scalar(1) + (i % 4);
  // Documents 2000 to 2005, then two repeats: their clusters start empty.
  const std::vector<int64_t> first_rows = {2000, 2001, 2002, 2003, 2004, 2005, 2000, 2001};
  const Matrix<Scalar> start = docs.Rows(first_rows.data(), k).ToDense();
  struct Case {
    const char* name;
    bool weighted;
    double tol;
    bool iteration_objectives;
  };
  for (const Case& c :
       {Case{"plain", false, 0, true}, Case{"weighted", true, 0, true},
        Case{"tolerance", false, 1, true}, Case{"first and last objectives", true, 0, false}}) {
    SCOPED_TRACE(c.name);
    const auto run = [&](bool in_place) {
      ReplicaShardOptions replicas;
      replicas.servers = {address};
      replicas.chunk_bytes = 64 << 10;
      if (c.weighted) replicas.weights = std::vector<Scalar>(weights.begin(), weights.end());
      ResidentJobOptions options;
      options.k = k;
      options.iterations = 15;
      options.empty_clusters = EmptyClusterPolicy::kRelocateFarthest;
      options.iteration_objectives = c.iteration_objectives;
      options.steps_in_place = in_place;
      options.starts = {start};
      return RunResidentJobOnReplicas(replicas, options, c.tol, n, d, SourceOf(docs));
    };
    const absl::StatusOr<ResidentJobResult> steps = run(false), in_place = run(true);
    ASSERT_TRUE(steps.ok()) << steps.status();
    ASSERT_TRUE(in_place.ok()) << in_place.status();
    EXPECT_FALSE(steps->steps_in_place);
    EXPECT_TRUE(in_place->steps_in_place);
    // In the job's precision: a float64 job's in double.
    EXPECT_EQ(in_place->centers, steps->centers);
    EXPECT_EQ(in_place->labels, steps->labels);
    EXPECT_EQ(in_place->counts, steps->counts);
    EXPECT_EQ(in_place->objective, steps->objective);
    EXPECT_EQ(in_place->initial_objective, steps->initial_objective);
    ASSERT_EQ(in_place->objectives.size(), steps->objectives.size());
    for (size_t t = 0; t < steps->objectives.size(); ++t) {
      // NaN where not computed, on both sides.
      EXPECT_TRUE(in_place->objectives[t] == steps->objectives[t] ||
                  (std::isnan(in_place->objectives[t]) && std::isnan(steps->objectives[t])))
          << t;
    }
    EXPECT_EQ(in_place->labels_changed, steps->labels_changed);
    EXPECT_EQ(in_place->iterations_run, steps->iterations_run);
    EXPECT_EQ(in_place->convergence, steps->convergence);
    EXPECT_EQ(in_place->relocations, steps->relocations);
    EXPECT_EQ(in_place->empty_cluster_events, steps->empty_cluster_events);
    EXPECT_GT(steps->relocations, 0);  // the repeated centers' clusters were empty
    if (c.tol > 0) {
      EXPECT_EQ(steps->convergence, Convergence::kTolerance);
    }
    if (!c.iteration_objectives) {
      EXPECT_TRUE(std::isnan(steps->objectives.front()));
    }
  }
}

TEST_F(SparseShardTest, LloydStepsWhereTheShardIsAreTheStepsAskedOneByOne) {
  ASSERT_NE(server_, nullptr);
  ExpectStepsInPlaceAsStepByStep<float>(server_->address());
}

TEST_F(SparseShardTest, Float64LloydStepsWhereTheShardIsAreTheStepsAskedOneByOne) {
  ASSERT_NE(server_, nullptr);
  ExpectStepsInPlaceAsStepByStep<double>(server_->address());
}

// A lloyd_steps step with a negative iteration count or a NaN tolerance is
// the step's error, named; the shard stays and takes the next step.
TEST_F(SparseShardTest, ALloydStepsStepWithBadRulesIsRefusedByName) {
  ASSERT_NE(server_, nullptr);
  auto stub = v1::KMeansTransformer::NewStub(
      grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  auto stream = stub->Job(&context);
  v1::JobRequest load;
  v1::ShardChunk* shard = load.mutable_shard();
  shard->set_n(2);
  shard->set_d(3);
  EncodeInt64(std::vector<int64_t>{0, 1, 2}, shard->mutable_points_csr()->mutable_indptr_i64());
  EncodeInt32(std::vector<int>{0, 2}, shard->mutable_points_csr()->mutable_indices_i32());
  EncodeFloat32(std::vector<float>{1, 2}, shard->mutable_points_csr()->mutable_values_f32());
  shard->mutable_points_csr()->set_shard_nnz(2);
  v1::JobResponse response;
  ASSERT_TRUE(stream->Write(load));
  ASSERT_TRUE(stream->Read(&response));
  const auto ask = [&](int iterations, double tol) {
    v1::JobRequest request;
    v1::LloydStepsStep* steps = request.mutable_lloyd_steps();
    steps->mutable_start()->set_k(1);
    EncodeFloat32(std::vector<float>{0, 0, 0}, steps->mutable_start()->mutable_centers_f32());
    steps->set_iterations(iterations);
    steps->set_center_tol(tol);
    steps->mutable_start()->set_return_labels(true);
    EXPECT_TRUE(stream->Write(request));
    v1::JobResponse answer;
    EXPECT_TRUE(stream->Read(&answer));
    return answer;
  };
  const std::string negative = ask(-1, 0).error().message();
  EXPECT_NE(negative.find("iterations = -1"), std::string::npos) << negative;
  const std::string nan = ask(3, std::nan("")).error().message();
  EXPECT_NE(nan.find("center_tol is NaN"), std::string::npos) << nan;
  // Points (1, 0, 0) and (0, 0, 2) from the origin: the first update takes
  // the center to their mean, the second leaves it there (shift 0).
  const v1::JobResponse good = ask(3, 0);
  EXPECT_FALSE(good.has_error()) << good.error().message();
  EXPECT_EQ(good.lloyd().iterations_run(), 2);
  EXPECT_EQ(good.lloyd().convergence(), v1::CONVERGENCE_TOLERANCE);
  EXPECT_EQ(good.lloyd().initial_objective(), 5);
  EXPECT_EQ(good.objective(), 2.5);  // 0.25 + 1 from the mean (0.5, 0, 1), each
  EXPECT_EQ(good.labels_size(), 2);
  stream->WritesDone();
  while (stream->Read(&response)) {
  }
  EXPECT_TRUE(stream->Finish().ok());
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
