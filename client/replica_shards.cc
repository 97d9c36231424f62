#include "client/replica_shards.h"

#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <netdb.h>

#include <algorithm>
#include <cassert>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <variant>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/cluster_client.h"
#include "core/point_moments.h"
#include "proto/batch_error.h"
#include "proto/channel_tuning.h"
#include "proto/job_matrices.h"
#include "proto/kmeans_transformer.grpc.pb.h"
#include "proto/raw_payload.h"
#include "proto/shared_points.h"

namespace kmt {
namespace {

// Stream failures after which the shard goes to another replica: the
// replica is gone, restarting or draining (a drained replica ends its job
// streams UNAVAILABLE). Other codes are the job's own errors, and so is
// RESOURCE_EXHAUSTED: a replica without room for a shard, or one asking its
// clients to back off, is up and says so.
bool ReplicaFailed(absl::StatusCode code) {
  return code == absl::StatusCode::kUnavailable || code == absl::StatusCode::kCancelled ||
         code == absl::StatusCode::kAborted || code == absl::StatusCode::kUnknown ||
         code == absl::StatusCode::kInternal;
}

// One Job stream on the synchronous API. A step's requests are written to
// every shard's stream before any answer is read, so the replicas compute
// at once.
class JobStream {
 public:
  JobStream(v1::KMeansTransformer::Stub* stub, absl::Duration timeout) {
    if (timeout != absl::InfiniteDuration()) {
      context_.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    }
    stream_ = stub->Job(&context_);
  }
  // Ends the job on the replica (its shard is freed), unless it has ended:
  // the writes end and the replica's status is read, so that a job that
  // ended as its client intended ends OK there, not CANCELLED. A stream with
  // a request unanswered, or whose status does not come within 10 s, is
  // cancelled.
  ~JobStream() {
    if (!failure_.ok()) return;
    stream_->WritesDone();
    if (unanswered_ > 0) {
      context_.TryCancel();
      stream_->Finish();
      return;
    }
    std::mutex mu;
    std::condition_variable finished;
    bool done = false;
    std::thread deadline([&] {
      std::unique_lock<std::mutex> lock(mu);
      if (!finished.wait_for(lock, std::chrono::seconds(10), [&] { return done; })) {
        context_.TryCancel();
      }
    });
    stream_->Finish();
    {
      std::lock_guard<std::mutex> lock(mu);
      done = true;
    }
    finished.notify_one();
    deadline.join();
  }

  absl::Status Send(const v1::JobRequest& request) {
    if (!failure_.ok()) return failure_;
    if (!stream_->Write(request)) return Fail();
    ++unanswered_;
    return absl::OkStatus();
  }

  // The stream broke (as opposed to a step answering an error inside it).
  bool broken() const { return !failure_.ok(); }

  // The next step's response, its labels gathered from the responses that
  // follow it; a step's error arrives inside it, a broken stream as the
  // status.
  absl::StatusOr<v1::JobResponse> Receive() {
    if (!failure_.ok()) return failure_;
    v1::JobResponse response;
    if (!stream_->Read(&response)) return Fail();
    for (int64_t to_follow = response.labels_to_follow(); to_follow > 0;) {
      v1::JobResponse more;
      if (!stream_->Read(&more)) return Fail();
      const int64_t count =
          more.labels_size() + static_cast<int64_t>(more.labels_i32().size() / sizeof(int32_t));
      if (count == 0 || more.labels_to_follow() != to_follow - count) {
        return absl::InternalError(absl::StrCat("a job's labels arrived out of step: ", to_follow,
                                                " to follow, then ", count, " with ",
                                                more.labels_to_follow(), " to follow"));
      }
      response.mutable_labels()->Add(more.labels().begin(), more.labels().end());
      response.mutable_labels_i32()->append(more.labels_i32());
      to_follow = more.labels_to_follow();
    }
    response.clear_labels_to_follow();
    --unanswered_;
    return response;
  }

 private:
  absl::Status Fail() {
    const grpc::Status status = stream_->Finish();
    failure_ =
        status.ok() ? absl::UnavailableError("the job stream ended early") : FromGrpc(status);
    return failure_;
  }

  grpc::ClientContext context_;
  int64_t unanswered_ = 0;  // requests written whose response is not read
  std::unique_ptr<grpc::ClientReaderWriter<v1::JobRequest, v1::JobResponse>> stream_;
  absl::Status failure_;
};

// A shared load's memory file holds this many chunks (of chunk_bytes each)
// at once: the client writes the next while the replica copies the others.
constexpr int kSharedSlots = 4;

struct Shard {
  int64_t first = 0, count = 0;
  int server = 0;
  std::unique_ptr<JobStream> stream;
  // The centers taken into its seeding distances, k-means++'s and
  // k-means‖'s, as the steps that took them in (their add_centers alone), to
  // replay.
  std::vector<v1::JobRequest> replays;
  std::optional<PointMoments> moments;  // of its points, read at its first load
  int moves = 0;                        // times it was moved after a failure
};

}  // namespace

bool HasWeights(const PointWeights& weights) {
  return std::visit([](const auto& values) { return !values.empty(); }, weights);
}

class ReplicaShards::Impl {
 public:
  Impl(ReplicaShardOptions settings, int64_t n, int d, Source source)
      : options_(std::move(settings)),
        d_(d),
        float64_(std::holds_alternative<PointSource64>(source) ||
                 std::holds_alternative<CsrSource<double>>(source)),
        source_(std::move(source)) {
    for (const std::string& address : options_.servers) {
      grpc::ChannelArguments args;
      args.SetMaxReceiveMessageSize(-1);
      args.SetMaxSendMessageSize(-1);
      ApplyChannelTuning(&args);
      stubs_.push_back(v1::KMeansTransformer::NewStub(options_.security.Connect(address, args)));
      alive_.push_back(true);
    }
    // No shard without points: a small dataset gets fewer shards.
    const int64_t count =
        std::min<int64_t>(n, static_cast<int64_t>(stubs_.size()) * options_.streams_per_server);
    for (int64_t s = 0; s < count; ++s) {
      Shard shard;
      shard.first = n * s / count;
      shard.count = n * (s + 1) / count - shard.first;
      shard.server = static_cast<int>(s % stubs_.size());
      shards_.push_back(std::move(shard));
    }
  }

  const std::vector<Shard>& shards() const { return shards_; }
  int moves() const { return moves_; }

  // Every shard's job ended on its replica, then loaded afresh.
  absl::Status Restart() {
    for (Shard& shard : shards_) {
      shard.stream.reset();
      shard.replays.clear();
    }
    return LoadAll();
  }

  // The mean variance of all points, merged in shard order (the shards'
  // moments are read at their first load).
  double MeanVariance() const {
    PointMoments all;
    for (const Shard& shard : shards_) {
      if (shard.moments) all.Add(*shard.moments);
    }
    return all.MeanVariance();
  }

  // Loads every shard on its replica, all at once.
  absl::Status LoadAll() {
    std::vector<absl::Status> results(shards_.size());
    std::vector<std::thread> threads;
    for (size_t s = 0; s < shards_.size(); ++s) {
      threads.emplace_back([this, s, &results] { results[s] = Load(&shards_[s]); });
    }
    for (std::thread& t : threads) t.join();
    for (size_t s = 0; s < shards_.size(); ++s) {
      if (results[s].ok()) continue;
      if (!ReplicaGone(shards_[s], results[s])) return Named(s, results[s]);
      if (absl::Status moved = Move(s, results[s]); !moved.ok()) return moved;
    }
    return absl::OkStatus();
  }

  // One request per shard (none where `make` gives none), all at once; the
  // answers in shard order. A shard whose stream fails is moved and asked
  // again.
  absl::StatusOr<std::vector<v1::JobResponse>> Round(
      const std::vector<std::optional<v1::JobRequest>>& requests) {
    if (requests.size() != shards_.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(requests.size(), " requests for ", shards_.size(), " shards"));
    }
    std::vector<v1::JobResponse> answers(shards_.size());
    std::vector<size_t> pending;
    for (size_t s = 0; s < shards_.size(); ++s) {
      if (requests[s]) pending.push_back(s);
    }
    while (!pending.empty()) {
      std::vector<absl::Status> failed(shards_.size());
      for (size_t s : pending) failed[s] = shards_[s].stream->Send(*requests[s]);
      for (size_t s : pending) {
        if (!failed[s].ok()) continue;
        absl::StatusOr<v1::JobResponse> r = shards_[s].stream->Receive();
        if (!r.ok()) {
          failed[s] = r.status();
        } else if (absl::Status error = FromBatchError(r->error()); !error.ok()) {
          return Named(s, error);
        } else {
          answers[s] = *std::move(r);
          KeepForReplay(*requests[s], &shards_[s]);
        }
      }
      std::vector<size_t> again;
      for (size_t s : pending) {
        if (failed[s].ok()) continue;
        if (!ReplicaGone(shards_[s], failed[s])) return Named(s, failed[s]);
        if (absl::Status moved = Move(s, failed[s]); !moved.ok()) return moved;
        again.push_back(s);
      }
      pending = std::move(again);
    }
    return answers;
  }

 private:
  // A shard's failure, named by its shard and replica; a point it names is
  // numbered in the dataset, not in the shard.
  absl::Status Named(size_t s, const absl::Status& status) const {
    std::string message = RenamePoint(
        status.message(), [&](int64_t i) { return absl::StrCat("point ", shards_[s].first + i); });
    if (message.empty()) message = std::string(status.message());
    if (status.code() == absl::StatusCode::kResourceExhausted &&
        absl::StrContains(message, "larger than max")) {
      // gRPC's own words for a step past the replica's message limit.
      absl::StrAppend(&message,
                      ": a step carries the k x d centers; start the replicas with a larger "
                      "--max_message_bytes");
    }
    return absl::Status(
        status.code(),
        absl::StrCat("shard ", s, " on ", options_.servers[shards_[s].server], ": ", message));
  }

  absl::Status Read(int64_t first, int64_t count, float* out) const {
    return std::get<PointSource>(source_)(first, count, out);
  }
  absl::Status Read(int64_t first, int64_t count, double* out) const {
    return std::get<PointSource64>(source_)(first, count, out);
  }
  // The weights in Scalar's precision (Load refused any other).
  template <typename Scalar>
  const std::vector<Scalar>& Weights() const {
    static const std::vector<Scalar> kNone;
    const std::vector<Scalar>* weights = WeightsIn<Scalar>(options_.weights);
    return weights != nullptr ? *weights : kNone;
  }

  // A seeding step that took centers in, kept to be replayed on the shard
  // if it moves: its add_centers alone, in the same groups, so that the
  // distances come back to the bit.
  static void KeepForReplay(const v1::JobRequest& request, Shard* shard) {
    if (request.has_seed() && !IsEmpty(wire::AddCenters(request.seed()))) {
      CopyForms(wire::AddCenters(request.seed()),
                wire::AddCenters(shard->replays.emplace_back().mutable_seed()));
    }
    if (request.has_kmeans_parallel() && !IsEmpty(wire::AddCenters(request.kmeans_parallel()))) {
      CopyForms(wire::AddCenters(request.kmeans_parallel()),
                wire::AddCenters(shard->replays.emplace_back().mutable_kmeans_parallel()));
    }
  }

  // A chunk's moments, of its points as the replica holds them: shifted by
  // points_offset in float32 where there is one.
  template <typename Scalar>
  void AddMoments(const Scalar* values, int64_t count, PointMoments* moments) const {
    if (options_.points_offset.empty() || !std::is_same_v<Scalar, float>) {
      moments->Add(values, count, d_);
      return;
    }
    Matrix<Scalar> shifted = Eigen::Map<const Matrix<Scalar>>(values, d_, count);
    shifted.colwise() -=
        Eigen::Map<const Vector<float>>(options_.points_offset.data(), d_).template cast<Scalar>();
    moments->Add(shifted.data(), count, d_);
  }

  // The chunk of the shard's points [done, done + count) in `request`: the
  // shard's size, d, the label counting and the chunk's weights; the points
  // are the caller's to add.
  template <typename Scalar>
  v1::ShardChunk* Chunk(const Shard& shard, int64_t done, int64_t count,
                        v1::JobRequest* request) const {
    v1::ShardChunk* c = request->mutable_shard();
    c->set_n(shard.count);
    c->set_d(d_);
    c->set_count_label_changes(options_.count_label_changes);
    const std::vector<Scalar>& weights = Weights<Scalar>();
    if (!weights.empty()) {
      WriteValues(absl::MakeConstSpan(weights).subspan(shard.first + done, count),
                  wire::Weights(c));
    }
    return c;
  }

  // Sends the shard's points (and weights) in chunks of raw float32 (or
  // points_type) or float64, as the source reads them; returns how many
  // chunks.
  //
  // Through `shared`, if given: each chunk written into one of its slots
  // and named (points_shared), a slot written again once its chunk is
  // acknowledged. Returns how many chunks' acknowledgements are still to be
  // read.
  template <typename Scalar>
  absl::StatusOr<int64_t> SendPoints(Shard* shard, std::optional<PointMoments>* moments,
                                     SharedPointsFile* shared) {
    assert(options_.points_offset.empty() || options_.points_type != RawType::kFloat32);
    const bool weighted = !Weights<Scalar>().empty();
    const int64_t chunk =
        shared != nullptr
            ? shared->slot_bytes() / (int64_t{sizeof(Scalar)} * d_)
            : std::max<int64_t>(1, options_.chunk_bytes / (int64_t{sizeof(Scalar)} *
                                                           (int64_t{d_} + (weighted ? 1 : 0))));
    int64_t chunks = 0, acknowledged = 0;
    v1::JobRequest request;
    std::vector<Scalar> values;
    for (int64_t done = 0; done < shard->count || chunks == 0; done += chunk, ++chunks) {
      const int64_t count = std::min(chunk, shard->count - done);
      if (shared != nullptr && chunks >= shared->slots()) {
        // The slot's last chunk is the replica's before it is written again.
        if (absl::Status s = Acknowledged(shard); !s.ok()) return s;
        ++acknowledged;
      }
      // Read into the chunk's slot of the memory file, or a buffer.
      const int slot = shared != nullptr ? static_cast<int>(chunks % shared->slots()) : 0;
      if (shared == nullptr) values.resize(static_cast<size_t>(count * d_));
      Scalar* const read =
          shared != nullptr ? reinterpret_cast<Scalar*>(shared->slot(slot)) : values.data();
      if (absl::Status s = Read(shard->first + done, count, read); !s.ok()) return s;
      if (*moments) AddMoments(read, count, &**moments);
      v1::ShardChunk* c = Chunk<Scalar>(*shard, done, count, &request);
      if (shared != nullptr) {
        if (absl::Status s =
                shared->Name(slot, count * d_ * int64_t{sizeof(Scalar)},
                             std::is_same_v<Scalar, double>, c->mutable_points_shared());
            !s.ok()) {
          return s;
        }
      } else if constexpr (std::is_same_v<Scalar, float>) {
        WriteValues<float>(values, wire::Points(c), options_.points_type);
        c->mutable_points_offset()->Assign(options_.points_offset.begin(),
                                           options_.points_offset.end());
      } else {
        WriteValues<double>(values, wire::Points(c));
      }
      if (absl::Status s = shard->stream->Send(request); !s.ok()) return s;
    }
    return chunks - acknowledged;
  }

  // Reads a chunk's acknowledgement: its error, if it has one.
  static absl::Status Acknowledged(Shard* shard) {
    absl::StatusOr<v1::JobResponse> r = shard->stream->Receive();
    if (!r.ok()) return r.status();
    return FromBatchError(r->error());
  }

  // Sends the shard's sparse points (and weights) in chunks of as many rows
  // as chunk_bytes holds of their offsets, columns, values (and weights), at
  // least one, as the source reads them; returns how many chunks.
  template <typename Scalar>
  absl::StatusOr<int64_t> SendSparse(const CsrSource<Scalar>& source, Shard* shard,
                                     std::optional<PointMoments>* moments) {
    const std::vector<int64_t>& indptr = source.indptr;
    const int64_t row_bytes =
        int64_t{sizeof(int64_t)} + (Weights<Scalar>().empty() ? 0 : int64_t{sizeof(Scalar)});
    const int64_t nonzero_bytes = int64_t{sizeof(int32_t)} + int64_t{sizeof(Scalar)};
    const int64_t end = shard->first + shard->count;
    int64_t chunks = 0;
    CsrRows<Scalar> rows;
    for (int64_t first = shard->first; first < end; ++chunks) {
      int64_t last = first + 1;
      while (last < end &&
             (last + 1 - first) * row_bytes + (indptr[last + 1] - indptr[first]) * nonzero_bytes <=
                 options_.chunk_bytes) {
        ++last;
      }
      const int64_t count = last - first;
      rows.indptr.clear();
      rows.indices.clear();
      rows.values.clear();
      if (absl::Status s = source.rows(first, count, &rows); !s.ok()) return s;
      // The rows must be those indptr sized the chunks and the shard by.
      bool agree = rows.indptr.size() == static_cast<size_t>(count + 1) && rows.indptr[0] == 0;
      for (int64_t i = 1; agree && i <= count; ++i) {
        agree = rows.indptr[i] == indptr[first + i] - indptr[first];
      }
      if (!agree || rows.indices.size() != static_cast<size_t>(rows.indptr.back()) ||
          rows.values.size() != rows.indices.size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the sparse point source gave ", rows.indptr.size(), " offsets, ", rows.indices.size(),
            " columns and ", rows.values.size(), " values for points ", first, " to ", last,
            ", whose ", indptr[last] - indptr[first], " nonzeros its indptr puts at ",
            indptr[first], " to ", indptr[last]));
      }
      if (*moments) {
        // The moments index by column here, before the replica checks them;
        // the point is the shard's, as a replica would name it (Named).
        for (size_t p = 0; p < rows.indices.size(); ++p) {
          if (rows.indices[p] < 0 || rows.indices[p] >= d_) {
            const int64_t row =
                std::upper_bound(rows.indptr.begin(), rows.indptr.end(), static_cast<int64_t>(p)) -
                rows.indptr.begin() - 1;
            return absl::InvalidArgumentError(
                absl::StrCat("point ", first - shard->first + row, " has a nonzero in column ",
                             rows.indices[p], ", outside [0, d = ", d_, ")"));
          }
        }
        (*moments)->AddSparse(rows.indptr.data(), rows.indices.data(), rows.values.data(), count,
                              d_);
      }
      v1::JobRequest request;
      v1::CsrPoints* csr =
          Chunk<Scalar>(*shard, first - shard->first, count, &request)->mutable_points_csr();
      EncodeInt64(rows.indptr, csr->mutable_indptr_i64());
      EncodeInt32(rows.indices, csr->mutable_indices_i32());
      WriteValues(absl::MakeConstSpan(rows.values), wire::Values(csr));
      csr->set_shard_nnz(indptr[end] - indptr[shard->first]);
      // Rows that are all empty carry no float64 values to make the shard
      // float64.
      csr->set_float64(std::is_same_v<Scalar, double>);
      if (absl::Status s = shard->stream->Send(request); !s.ok()) return s;
      first = last;
    }
    return chunks;
  }

  // Loads the shard on its replica. A replica on this machine takes dense
  // points sent as they are through a memory file (proto/shared_points.h);
  // one that refuses them, or cannot read the file (another container's),
  // gets them over the wire on a new stream.
  absl::Status Load(Shard* shard) {
    const bool dense = std::holds_alternative<PointSource>(source_) ||
                       std::holds_alternative<PointSource64>(source_);
    if (options_.shared_points && dense && options_.points_type == RawType::kFloat32 &&
        IsLocalTarget(options_.servers[shard->server])) {
      const absl::Status shared = LoadOnce(shard, /*shared=*/true);
      if (shared.code() != absl::StatusCode::kFailedPrecondition) return shared;
      if (options_.log) {
        options_.log(absl::StrCat("points over the wire to ", options_.servers[shard->server], ": ",
                                  shared.message()));
      }
    }
    return LoadOnce(shard, /*shared=*/false);
  }

  // Opens a stream on the shard's replica and sends its points (and
  // weights) in chunks, through the memory file if `shared` or else as raw
  // float32 (float64), then reads the acknowledgements.
  absl::Status LoadOnce(Shard* shard, bool shared) {
    shard->stream =
        std::make_unique<JobStream>(stubs_[shard->server].get(), options_.stream_timeout);
    // The tolerance's variance, from the points as they are first read.
    std::optional<PointMoments> moments;
    if (options_.moments && !shard->moments) moments.emplace();
    // A shared load's memory file, of up to kSharedSlots chunks of whole
    // rows, about chunk_bytes each, from the process's pool.
    std::optional<SharedPointsLease> file;
    if (shared) {
      const int64_t row = int64_t{d_} * (float64_ ? 8 : 4);
      const int64_t rows = std::min(shard->count, std::max<int64_t>(1, options_.chunk_bytes / row));
      absl::StatusOr<SharedPointsLease> made = TakeSharedPointsFile(
          rows * row, static_cast<int>(std::min<int64_t>(
                          kSharedSlots, (shard->count + rows - 1) / std::max<int64_t>(rows, 1))));
      if (!made.ok()) return made.status();
      file.emplace(*std::move(made));
    }
    SharedPointsFile* through = file ? &**file : nullptr;
    absl::StatusOr<int64_t> chunks;
    if (const auto* csr = std::get_if<CsrSource<float>>(&source_)) {
      chunks = SendSparse(*csr, shard, &moments);
    } else if (const auto* csr64 = std::get_if<CsrSource<double>>(&source_)) {
      chunks = SendSparse(*csr64, shard, &moments);
    } else {
      chunks = float64_ ? SendPoints<double>(shard, &moments, through)
                        : SendPoints<float>(shard, &moments, through);
    }
    if (!chunks.ok()) return chunks.status();
    for (int64_t c = 0; c < *chunks; ++c) {
      absl::StatusOr<v1::JobResponse> r = shard->stream->Receive();
      if (!r.ok()) return r.status();
      if (absl::Status s = FromBatchError(r->error()); !s.ok()) return s;
      if (c + 1 == *chunks && r->points_loaded() != shard->count) {
        // A server that predates points_shared takes its chunks as empty.
        const std::string held =
            absl::StrCat("the replica holds ", r->points_loaded(), " of ", shard->count, " points");
        return shared ? absl::FailedPreconditionError(
                            absl::StrCat(held,
                                         " sent as shared points: a server that "
                                         "predates them"))
                      : absl::InternalError(held);
      }
    }
    // A shard moved during k-means++ or k-means‖ gets back the distances it
    // had: k-means‖'s in the same groups, so to the bit.
    for (const v1::JobRequest& replay : shard->replays) {
      if (absl::Status s = shard->stream->Send(replay); !s.ok()) return s;
      absl::StatusOr<v1::JobResponse> r = shard->stream->Receive();
      if (!r.ok()) return r.status();
      if (absl::Status s = FromBatchError(r->error()); !s.ok()) return s;
    }
    if (moments) shard->moments = std::move(moments);
    return absl::OkStatus();
  }

  // Whether `status`, a failure of the shard's load or step, says its
  // replica is gone: its stream broke with one of ReplicaFailed's codes. A
  // failure to read the points (the source's) or an error the replica
  // answered is the job's.
  static bool ReplicaGone(const Shard& shard, const absl::Status& status) {
    return shard.stream != nullptr && shard.stream->broken() && ReplicaFailed(status.code());
  }

  // After `why`, the shard's replica is taken as gone and the shard goes to
  // the live replica with the fewest shards. A replica that fails the load
  // in turn is taken as gone for its own failure, which becomes `why`: the
  // job's error, if no replica is left, names the last replica tried and
  // what it did.
  absl::Status Move(size_t s, absl::Status why) {
    Shard& shard = shards_[s];
    for (;;) {
      alive_[shard.server] = false;
      // Out of moves or of replicas, the job fails UNAVAILABLE whatever
      // code the last replica's stream ended with: a stream opened on a
      // replica as its drain begins ends CANCELLED (gRPC's, with no word of
      // its own), which would read as the caller's cancellation. That
      // failure is kept in the message, code and all.
      if (++shard.moves > options_.max_moves) {
        return Named(
            s, absl::UnavailableError(absl::StrCat("gave up after ", shard.moves - 1,
                                                   " moves of this shard: ", why.ToString())));
      }
      ++moves_;
      std::vector<int> load(stubs_.size(), 0);
      for (const Shard& other : shards_) ++load[other.server];
      int best = -1;
      for (size_t r = 0; r < stubs_.size(); ++r) {
        if (alive_[r] && (best < 0 || load[r] < load[best])) best = static_cast<int>(r);
      }
      if (best < 0) {
        return Named(s, absl::UnavailableError(absl::StrCat("no replica left: ", why.ToString())));
      }
      if (options_.log) {
        options_.log(absl::StrCat("shard ", s, ": ", options_.servers[shard.server], " failed (",
                                  why.ToString(), "); loading it on ", options_.servers[best],
                                  " and repeating the step"));
      }
      shard.server = best;
      absl::Status loaded = Load(&shard);
      if (loaded.ok()) return loaded;
      if (!ReplicaGone(shard, loaded)) return Named(s, loaded);
      why = std::move(loaded);
    }
  }

  const ReplicaShardOptions options_;
  const int d_;
  const bool float64_;  // the points are read and loaded as float64
  const Source source_;
  std::vector<std::unique_ptr<v1::KMeansTransformer::Stub>> stubs_;
  std::vector<bool> alive_;
  std::vector<Shard> shards_;
  int moves_ = 0;
};

ReplicaShards::ReplicaShards(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ReplicaShards::~ReplicaShards() = default;

absl::StatusOr<std::unique_ptr<ReplicaShards>> ReplicaShards::Load(ReplicaShardOptions options,
                                                                   int64_t n, int d,
                                                                   PointSource source) {
  return LoadEither(std::move(options), n, d, std::move(source));
}

absl::StatusOr<std::unique_ptr<ReplicaShards>> ReplicaShards::Load(ReplicaShardOptions options,
                                                                   int64_t n, int d,
                                                                   PointSource64 source) {
  return LoadEither(std::move(options), n, d, std::move(source));
}

absl::StatusOr<std::unique_ptr<ReplicaShards>> ReplicaShards::Load(ReplicaShardOptions options,
                                                                   int64_t n, int d,
                                                                   CsrSource<float> source) {
  return LoadEither(std::move(options), n, d, std::move(source));
}

absl::StatusOr<std::unique_ptr<ReplicaShards>> ReplicaShards::Load(ReplicaShardOptions options,
                                                                   int64_t n, int d,
                                                                   CsrSource<double> source) {
  return LoadEither(std::move(options), n, d, std::move(source));
}

namespace {

// A sparse source's offsets checked against n: n + 1 of them, from 0, never
// decreasing (the source's rows are checked against them as they are read).
absl::Status CheckIndptr(const std::vector<int64_t>& indptr, int64_t n) {
  if (indptr.size() != static_cast<size_t>(n + 1) || indptr[0] != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("indptr has ", indptr.size(), " offsets starting at ",
                     indptr.empty() ? 0 : indptr[0], ", expected n + 1 = ", n + 1, " from 0"));
  }
  for (int64_t i = 0; i < n; ++i) {
    if (indptr[i + 1] < indptr[i]) {
      return absl::InvalidArgumentError(
          absl::StrCat("indptr decreases at row ", i, ": ", indptr[i], " then ", indptr[i + 1]));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ReplicaShards>> ReplicaShards::LoadEither(
    ReplicaShardOptions options, int64_t n, int d, Source source) {
  if (options.servers.empty()) return absl::InvalidArgumentError("no server addresses");
  if (options.streams_per_server < 1 || n < 1 || d < 1) {
    return absl::InvalidArgumentError(absl::StrCat("streams per server ",
                                                   options.streams_per_server, ", n = ", n,
                                                   ", d = ", d, ": each must be at least 1"));
  }
  const bool float64 = std::holds_alternative<PointSource64>(source) ||
                       std::holds_alternative<CsrSource<double>>(source);
  if (HasWeights(options.weights) &&
      std::holds_alternative<std::vector<double>>(options.weights) != float64) {
    return absl::InvalidArgumentError(
        float64 ? "float64 points take float64 weights, not float32 ones"
                : "float32 points take float32 weights, not float64 ones");
  }
  const std::vector<int64_t>* indptr = nullptr;
  if (const auto* csr = std::get_if<CsrSource<float>>(&source)) indptr = &csr->indptr;
  if (const auto* csr = std::get_if<CsrSource<double>>(&source)) indptr = &csr->indptr;
  if (indptr != nullptr) {
    if (!options.points_offset.empty() || options.points_type != RawType::kFloat32) {
      return absl::InvalidArgumentError(
          "sparse points travel as their float32 or float64 nonzeros, without a points_offset "
          "(shifting would fill their rows) or a narrow points_type");
    }
    if (absl::Status s = CheckIndptr(*indptr, n); !s.ok()) return s;
  }
  auto impl = std::make_unique<Impl>(std::move(options), n, d, std::move(source));
  if (absl::Status s = impl->LoadAll(); !s.ok()) return s;
  return std::unique_ptr<ReplicaShards>(new ReplicaShards(std::move(impl)));
}

std::vector<int64_t> ReplicaShards::Sizes() const {
  std::vector<int64_t> sizes;
  for (const Shard& shard : impl_->shards()) sizes.push_back(shard.count);
  return sizes;
}

absl::StatusOr<std::vector<v1::JobResponse>> ReplicaShards::Round(
    const std::vector<std::optional<v1::JobRequest>>& requests) {
  return impl_->Round(requests);
}

absl::Status ReplicaShards::Restart() { return impl_->Restart(); }
int ReplicaShards::moves() const { return impl_->moves(); }
double ReplicaShards::MeanVariance() const { return impl_->MeanVariance(); }

absl::StatusOr<std::vector<std::string>> ReplicaAddresses(const std::string& target) {
  if (absl::StartsWith(target, "ipv4:") || absl::StartsWith(target, "ipv6:")) {
    return std::vector<std::string>(absl::StrSplit(target.substr(5), ',', absl::SkipEmpty()));
  }
  if (!absl::StartsWith(target, "dns:///")) return std::vector<std::string>{target};
  const std::string name = target.substr(7);
  const size_t colon = name.rfind(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("'", target, "' has no port"));
  }
  const std::string host = name.substr(0, colon), port = name.substr(colon + 1);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int e = getaddrinfo(host.c_str(), port.c_str(), &hints, &found); e != 0) {
    return absl::UnavailableError(absl::StrCat("cannot resolve ", host, ": ", gai_strerror(e)));
  }
  std::vector<std::string> addresses;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    char ip[INET6_ADDRSTRLEN] = {};
    const void* raw =
        a->ai_family == AF_INET
            ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr)
            : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr);
    if (inet_ntop(a->ai_family, raw, ip, sizeof(ip)) == nullptr) continue;
    const std::string address =
        a->ai_family == AF_INET ? absl::StrCat(ip, ":", port) : absl::StrCat("[", ip, "]:", port);
    if (std::find(addresses.begin(), addresses.end(), address) == addresses.end()) {
      addresses.push_back(address);
    }
  }
  freeaddrinfo(found);
  return addresses;
}

}  // namespace kmt
