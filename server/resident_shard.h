// One resident job's shard: its points (d x n, filled chunk by chunk) and
// their weights if it has them, held against the server's resident cap from
// the first chunk until the shard is destroyed with its stream, and the
// steps computed on it by the core's fast path (core/assign.h), sharded
// k-means++ and k-means‖ (core/seeding.h), and a mini-batch's sums on rows
// of it or mini-batch k-means' steps on it all (core/minibatch.h),
// weighted when the points are.
// A shard whose first chunk carries float64 points is held and computed in
// double, the core's same functions at Scalar = double; its steps take and
// give their points as float64 only.
// A shard whose first chunk carries points_csr is sparse: it holds its
// points as one CsrMatrix (core/sparse.h), each chunk decoded by
// CsrFromProto (CsrMatrix::Create's checks) and appended, and every step
// runs the core's sparse twin of the dense one (AssignNearestSparse with
// product distances, the seeding and farthest points over CSR); the points
// a step returns come back dense. Its assign steps keep no bounds: each
// one scores every center, O(nnz k). Its assign and sample-sums steps may
// answer their cluster sums as compressed sparse rows (sparse_sums,
// core/sparse_sums.h), about the clusters' nonzeros rather than k*d
// doubles.
#ifndef KMT_SERVER_RESIDENT_SHARD_H_
#define KMT_SERVER_RESIDENT_SHARD_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "core/bounds.h"
#include "core/cluster_sums.h"
#include "core/init.h"
#include "core/seeding.h"
#include "core/types.h"
#include "proto/kmeans_transformer.pb.h"
#include "server/limits.h"
#include "server/resident_memory.h"

namespace kmt {

class ResidentShard {
 public:
  ResidentShard(ResidentMemory* memory, const Limits& limits);
  ~ResidentShard();
  ResidentShard(const ResidentShard&) = delete;
  ResidentShard& operator=(const ResidentShard&) = delete;

  // The bytes a shard of n points in d dimensions holds: the points and,
  // per point, the state of a step (label, distance, k-means++'s running
  // sums), the weight if `weighted`, and the last assign step's label if
  // it counts label changes; coordinates, distances and weights in 8 bytes
  // if `float64`, else 4. 0 if that overflows.
  static int64_t Bytes(int64_t n, int64_t d, bool weighted = false,
                       bool count_label_changes = false, bool float64 = false);
  // The same for a sparse shard of `nnz` nonzeros in all: each nonzero's
  // column (4 bytes) and value, n + 1 row offsets (8 bytes each) and the
  // same per-point state.
  static int64_t SparseBytes(int64_t n, int64_t nnz, bool weighted = false,
                             bool count_label_changes = false, bool float64 = false);

  // Takes a chunk of the shard. The first one decides whether the shard is
  // float64 (its points come as points_f64 or points_csr.values_f64),
  // sparse (points_csr), weighted and counts label changes, and reserves
  // its Bytes (SparseBytes of points_csr.shard_nnz) or fails with
  // RESOURCE_EXHAUSTED before any point is kept. Every later chunk is of
  // the same kind; a sparse one's rows may not take the shard past
  // shard_nnz nonzeros, and the complete shard has exactly shard_nnz. An
  // error here ends the job.
  absl::Status Load(const v1::ShardChunk& chunk, v1::JobResponse* out);
  // Steps on the complete shard; an error is the step's own (the shard stays).
  absl::Status Assign(const v1::AssignStep& step, v1::JobResponse* out);
  absl::Status Seed(const v1::SeedStep& step, v1::JobResponse* out);
  absl::Status KMeansParallel(const v1::KMeansParallelStep& step, v1::JobResponse* out);
  absl::Status CandidateWeights(const v1::CandidateWeightsStep& step, v1::JobResponse* out);
  absl::Status SampleSums(const v1::SampleSumsStep& step, v1::JobResponse* out);
  absl::Status MiniBatchSteps(const v1::MiniBatchStepsStep& step, v1::JobResponse* out);
  // Lloyd's iterations where the shard is (core/lloyd_steps.h), `check`
  // asked before each assignment (the call's deadline and cancellation).
  absl::Status LloydSteps(const v1::LloydStepsStep& step, const StopCheck& check,
                          v1::JobResponse* out);

  // A candidate-weights step takes at most this many candidates per cluster
  // the server allows (max_k): k-means‖'s 1 + rounds * oversampling * k.
  static constexpr int kCandidatesPerCluster = 16;

  // Where a mini-batch loop's steps (MiniBatchSteps), a pass over every row
  // (SampleSums with all_rows) and a sparse shard's assign steps learn the
  // OpenMP threads they may use, asked before each step: a server's shard
  // gets its worker pool's idle threads (WorkerPool::IdleThreads), so that a
  // job's only shard computes on the cores nothing else is using. Unset: the
  // calling thread's. The answers do not depend on it.
  void set_step_threads(std::function<int()> threads) { step_threads_ = std::move(threads); }
  // Says who the client is, as gRPC names its peer: chunks may name shared
  // points (ShardChunk.points_shared) only where Limits::shared_points allows
  // them and the peer is on this machine (IsLocalPeer); else such a chunk is
  // FAILED_PRECONDITION, and the client sends its points over the wire.
  void set_peer(std::string peer) { peer_ = std::move(peer); }

  bool complete() const { return reserved_ > 0 && received_ == n_; }
  // Whether the shard holds float64 points (decided by its first chunk).
  bool float64() const { return f64_ != nullptr; }
  // Whether the shard holds its points as compressed sparse rows.
  bool sparse() const { return sparse_; }

 private:
  // The points, weights and steps' state in one precision.
  template <typename Scalar>
  struct State;

  absl::Status CheckComplete() const;
  // The threads the next step may use (set_step_threads).
  int StepThreads() const;
  // OK where a chunk may name shared points (set_peer), else why not.
  absl::Status SharedPointsAllowed() const;
  // A step's status `step` where it failed, else FiniteStep
  // (resident_shard.cc) for its answer: OK, or the error that names why a
  // number in it is not finite.
  absl::Status StepIsFinite(absl::Status step, const v1::JobResponse& out) const;
  // The same for a seeding step, checked once a center is in its distances.
  absl::Status SeedingStepIsFinite(absl::Status step, const v1::JobResponse& out) const;
  template <typename Scalar>
  absl::Status LoadInto(State<Scalar>& state, const v1::ShardChunk& chunk);
  // An assign step's centers, checked: k, the precision, the values.
  template <typename Scalar>
  absl::StatusOr<Matrix<Scalar>> StepCentersOf(const v1::AssignStep& step) const;
  // The assignment of every point under `centers` into `labels` and `sums`
  // (the objective, if asked, returned; else its value is not one);
  // `settled`: the points the bounds kept, where they ran.
  template <typename Scalar>
  double AssignAll(State<Scalar>& state, const Matrix<Scalar>& centers, bool objective,
                   Labels* labels, ClusterSums* sums, int64_t* settled);
  template <typename Scalar>
  absl::Status AssignIn(State<Scalar>& state, const v1::AssignStep& step, v1::JobResponse* out);
  template <typename Scalar>
  absl::Status LloydStepsIn(State<Scalar>& state, const v1::LloydStepsStep& step,
                            const StopCheck& check, v1::JobResponse* out);
  template <typename Scalar>
  absl::Status SeedIn(State<Scalar>& state, const v1::SeedStep& step, v1::JobResponse* out);
  template <typename Scalar>
  absl::Status KMeansParallelIn(State<Scalar>& state, const v1::KMeansParallelStep& step,
                                v1::JobResponse* out);
  template <typename Scalar>
  absl::Status CandidateWeightsIn(State<Scalar>& state, const v1::CandidateWeightsStep& step,
                                  v1::JobResponse* out);
  template <typename Scalar>
  absl::Status SampleSumsIn(State<Scalar>& state, const v1::SampleSumsStep& step,
                            v1::JobResponse* out);
  template <typename Scalar>
  absl::Status MiniBatchStepsIn(State<Scalar>& state, const v1::MiniBatchStepsStep& step,
                                v1::JobResponse* out);

  ResidentMemory* const memory_;
  const Limits limits_;
  int64_t reserved_ = 0;
  int64_t received_ = 0;
  int64_t n_ = 0;
  int64_t d_ = 0;
  bool weighted_ = false;
  bool count_label_changes_ = false;
  bool sparse_ = false;
  int64_t shard_nnz_ = 0;  // a sparse shard's nonzeros, as its first chunk said
  Labels last_labels_;     // the last assign step's, if counting label changes
  std::function<int()> step_threads_;
  std::string peer_;  // the client, as gRPC names it; empty: unknown
  // One of them, from the first chunk on.
  std::unique_ptr<State<float>> f32_;
  std::unique_ptr<State<double>> f64_;
};

}  // namespace kmt

#endif  // KMT_SERVER_RESIDENT_SHARD_H_
