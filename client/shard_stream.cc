#include "client/shard_stream.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cassert>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>
#include <type_traits>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "client/cluster_client.h"
#include "proto/batch_error.h"
#include "proto/channel_tuning.h"
#include "proto/job_matrices.h"
#include "proto/shared_points.h"

namespace kmt {
namespace {

// The payload that marks a status as a replica's failure (ReplicaGone).
constexpr char kReplicaGoneUrl[] = "type.kmt/replica-gone";

// The codes of a stream that broke because its replica died, restarted or
// is draining.
bool ReplicaFailed(absl::StatusCode code) {
  return code == absl::StatusCode::kUnavailable || code == absl::StatusCode::kCancelled ||
         code == absl::StatusCode::kAborted || code == absl::StatusCode::kUnknown ||
         code == absl::StatusCode::kInternal;
}

// A shared load's memory file holds this many chunks (of chunk_bytes each)
// at once: the client writes the next while the replica copies the others.
constexpr int kSharedSlots = 4;

}  // namespace

bool HasWeights(const PointWeights& weights) {
  return std::visit([](const auto& values) { return !values.empty(); }, weights);
}

bool IsFloat64(const ShardSource& source) {
  return std::holds_alternative<PointSource64>(source) ||
         std::holds_alternative<CsrSource<double>>(source);
}

bool IsSparse(const ShardSource& source) {
  return std::holds_alternative<CsrSource<float>>(source) ||
         std::holds_alternative<CsrSource<double>>(source);
}

bool ReplicaGone(const absl::Status& status) {
  return !status.ok() && status.GetPayload(kReplicaGoneUrl).has_value();
}

void KeepForReplay(const v1::JobRequest& request, std::vector<v1::JobRequest>* replays) {
  if (request.has_seed() && !IsEmpty(wire::AddCenters(request.seed()))) {
    CopyForms(wire::AddCenters(request.seed()),
              wire::AddCenters(replays->emplace_back().mutable_seed()));
  }
  if (request.has_kmeans_parallel() && !IsEmpty(wire::AddCenters(request.kmeans_parallel()))) {
    CopyForms(wire::AddCenters(request.kmeans_parallel()),
              wire::AddCenters(replays->emplace_back().mutable_kmeans_parallel()));
  }
}

std::unique_ptr<v1::KMeansTransformer::Stub> ReplicaStub(const std::string& address,
                                                         const ChannelSecurity& security) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  ApplyChannelTuning(&args);
  return v1::KMeansTransformer::NewStub(security.Connect(address, args));
}

ShardStream::ShardStream(v1::KMeansTransformer::Stub* stub, absl::Duration timeout) {
  if (timeout != absl::InfiniteDuration()) {
    context_.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  }
  stream_ = stub->Job(&context_);
}

ShardStream::~ShardStream() {
  if (!failure_.ok()) return;
  EndWrites();
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

void ShardStream::EndWrites() {
  if (writes_done_ || !failure_.ok()) return;
  writes_done_ = true;
  stream_->WritesDone();
}

absl::Status ShardStream::Send(const v1::JobRequest& request) {
  if (!failure_.ok()) return failure_;
  if (writes_done_) return absl::FailedPreconditionError("the shard's stream was ended");
  if (!stream_->Write(request)) return Fail();
  ++unanswered_;
  return absl::OkStatus();
}

absl::StatusOr<v1::JobResponse> ShardStream::Receive() {
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

absl::Status ShardStream::Fail() {
  const grpc::Status status = stream_->Finish();
  failure_ = status.ok() ? absl::UnavailableError("the job stream ended early") : FromGrpc(status);
  if (ReplicaFailed(failure_.code())) failure_.SetPayload(kReplicaGoneUrl, absl::Cord());
  return failure_;
}

// One load of one shard: the chunks, their acknowledgements, the replays.
class ShardLoader {
 public:
  ShardLoader(const ShardSource& source, const ShardLoadOptions& options, const ShardPlace& place)
      : source_(source), options_(options), place_(place) {}

  // Through a memory file to a replica on this machine that takes one,
  // else over the wire.
  absl::StatusOr<std::unique_ptr<ShardStream>> Load(v1::KMeansTransformer::Stub* stub,
                                                    const std::string& address) {
    if (options_.shared_points && !IsSparse(source_) && options_.points_type == RawType::kFloat32 &&
        IsLocalTarget(address)) {
      absl::StatusOr<std::unique_ptr<ShardStream>> shared = LoadOnce(stub, /*shared=*/true);
      if (shared.status().code() != absl::StatusCode::kFailedPrecondition) return shared;
      if (options_.log) {
        options_.log(
            absl::StrCat("points over the wire to ", address, ": ", shared.status().message()));
      }
    }
    return LoadOnce(stub, /*shared=*/false);
  }

 private:
  // Opens a stream and sends the points (and weights) in chunks, through a
  // memory file if `shared` or else as raw float32 (points_type) or
  // float64, then reads the acknowledgements and sends the replays.
  absl::StatusOr<std::unique_ptr<ShardStream>> LoadOnce(v1::KMeansTransformer::Stub* stub,
                                                        bool shared) {
    std::unique_ptr<ShardStream> stream(new ShardStream(stub, options_.stream_timeout));
    stream_ = stream.get();
    std::optional<PointMoments> moments;
    if (place_.moments != nullptr) moments.emplace();
    // A shared load's memory file, of up to kSharedSlots chunks of whole
    // rows, about chunk_bytes each, from the process's pool.
    std::optional<SharedPointsLease> file;
    if (shared) {
      const int64_t row = int64_t{options_.d} * (IsFloat64(source_) ? 8 : 4);
      const int64_t rows = std::min(place_.count, std::max<int64_t>(1, options_.chunk_bytes / row));
      absl::StatusOr<SharedPointsLease> made = TakeSharedPointsFile(
          rows * row,
          static_cast<int>(std::min<int64_t>(kSharedSlots, (place_.count + rows - 1) / rows)));
      if (!made.ok()) return made.status();
      file.emplace(*std::move(made));
    }
    SharedPointsFile* through = file ? &**file : nullptr;
    absl::StatusOr<int64_t> chunks;
    if (const auto* csr = std::get_if<CsrSource<float>>(&source_)) {
      chunks = SendSparse(*csr, &moments);
    } else if (const auto* csr64 = std::get_if<CsrSource<double>>(&source_)) {
      chunks = SendSparse(*csr64, &moments);
    } else if (const auto* points = std::get_if<PointSource>(&source_)) {
      chunks = SendPoints(*points, &moments, through);
    } else {
      chunks = SendPoints(std::get<PointSource64>(source_), &moments, through);
    }
    if (!chunks.ok()) return chunks.status();
    for (int64_t c = 0; c < *chunks; ++c) {
      absl::StatusOr<v1::JobResponse> r = stream->Receive();
      if (!r.ok()) return r.status();
      if (absl::Status s = FromBatchError(r->error()); !s.ok()) return s;
      if (c + 1 == *chunks && r->points_loaded() != place_.count) {
        // A server that predates points_shared takes its chunks as empty.
        const std::string held =
            absl::StrCat("the replica holds ", r->points_loaded(), " of ", place_.count, " points");
        return shared ? absl::FailedPreconditionError(
                            absl::StrCat(held,
                                         " sent as shared points: a server that "
                                         "predates them"))
                      : absl::InternalError(held);
      }
    }
    // A shard moved during k-means++ or k-means‖ gets back the distances it
    // had: k-means‖'s in the same groups, so to the bit.
    if (place_.replays != nullptr) {
      for (const v1::JobRequest& replay : *place_.replays) {
        if (absl::Status s = stream->Send(replay); !s.ok()) return s;
        absl::StatusOr<v1::JobResponse> r = stream->Receive();
        if (!r.ok()) return r.status();
        if (absl::Status s = FromBatchError(r->error()); !s.ok()) return s;
      }
    }
    if (moments) *place_.moments = *std::move(moments);
    return stream;
  }

  // The weights in Scalar's precision (the caller refused any other).
  template <typename Scalar>
  absl::Span<const Scalar> Weights() const {
    const std::vector<Scalar>* weights = WeightsIn<Scalar>(options_.weights);
    return weights != nullptr ? absl::MakeConstSpan(*weights) : absl::Span<const Scalar>();
  }

  // A chunk's moments, of its points as the replica holds them: shifted by
  // points_offset in float32 where there is one.
  template <typename Scalar>
  void AddMoments(const Scalar* values, int64_t count, PointMoments* moments) const {
    const int d = options_.d;
    if (options_.points_offset.empty() || !std::is_same_v<Scalar, float>) {
      moments->Add(values, count, d);
      return;
    }
    Matrix<Scalar> shifted = Eigen::Map<const Matrix<Scalar>>(values, d, count);
    shifted.colwise() -=
        Eigen::Map<const Vector<float>>(options_.points_offset.data(), d).template cast<Scalar>();
    moments->Add(shifted.data(), count, d);
  }

  // The chunk of the shard's points [done, done + count) in `request`: the
  // shard's size, d, the label counting and the chunk's weights; the points
  // are the caller's to add.
  template <typename Scalar>
  v1::ShardChunk* Chunk(int64_t done, int64_t count, v1::JobRequest* request) const {
    v1::ShardChunk* c = request->mutable_shard();
    c->set_n(place_.count);
    c->set_d(options_.d);
    c->set_count_label_changes(options_.count_label_changes);
    const absl::Span<const Scalar> weights = Weights<Scalar>();
    if (!weights.empty())
      WriteValues(weights.subspan(place_.first + done, count), wire::Weights(c));
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
  absl::StatusOr<int64_t> SendPoints(
      const std::function<absl::Status(int64_t, int64_t, Scalar*)>& read,
      std::optional<PointMoments>* moments, SharedPointsFile* shared) {
    assert(options_.points_offset.empty() || options_.points_type != RawType::kFloat32);
    const int64_t d = options_.d;
    const bool weighted = !Weights<Scalar>().empty();
    const int64_t chunk =
        shared != nullptr ? shared->slot_bytes() / (int64_t{sizeof(Scalar)} * d)
                          : std::max<int64_t>(1, options_.chunk_bytes /
                                                     (int64_t{sizeof(Scalar)} * (d + weighted)));
    int64_t chunks = 0, acknowledged = 0;
    v1::JobRequest request;
    std::vector<Scalar> values;
    for (int64_t done = 0; done < place_.count || chunks == 0; done += chunk, ++chunks) {
      const int64_t count = std::min(chunk, place_.count - done);
      if (shared != nullptr && chunks >= shared->slots()) {
        // The slot's last chunk is the replica's before it is written again.
        if (absl::Status s = Acknowledged(); !s.ok()) return s;
        ++acknowledged;
      }
      // Read into the chunk's slot of the memory file, or a buffer.
      const int slot = shared != nullptr ? static_cast<int>(chunks % shared->slots()) : 0;
      if (shared == nullptr) values.resize(static_cast<size_t>(count * d));
      Scalar* const out =
          shared != nullptr ? reinterpret_cast<Scalar*>(shared->slot(slot)) : values.data();
      if (absl::Status s = read(place_.first + done, count, out); !s.ok()) return s;
      if (*moments) AddMoments(out, count, &**moments);
      v1::ShardChunk* c = Chunk<Scalar>(done, count, &request);
      if (shared != nullptr) {
        if (absl::Status s =
                shared->Name(slot, count * d * int64_t{sizeof(Scalar)},
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
      if (absl::Status s = SendChunk(request); !s.ok()) return s;
    }
    return chunks - acknowledged;
  }

  // Sends a chunk, counted.
  absl::Status SendChunk(const v1::JobRequest& request) {
    const int64_t bytes = static_cast<int64_t>(request.shard().ByteSizeLong());
    ++stream_->chunks_;
    stream_->chunk_bytes_sent_ += bytes;
    stream_->largest_chunk_bytes_ = std::max(stream_->largest_chunk_bytes_, bytes);
    return stream_->Send(request);
  }

  // Reads a chunk's acknowledgement: its error, if it has one.
  absl::Status Acknowledged() {
    absl::StatusOr<v1::JobResponse> r = stream_->Receive();
    if (!r.ok()) return r.status();
    return FromBatchError(r->error());
  }

  // Sends the shard's sparse points (and weights) in chunks of as many rows
  // as chunk_bytes holds of their offsets, columns, values (and weights), at
  // least one, as the source reads them; returns how many chunks.
  template <typename Scalar>
  absl::StatusOr<int64_t> SendSparse(const CsrSource<Scalar>& source,
                                     std::optional<PointMoments>* moments) {
    const int d = options_.d;
    const std::vector<int64_t>& indptr = source.indptr;
    const int64_t row_bytes =
        int64_t{sizeof(int64_t)} + (Weights<Scalar>().empty() ? 0 : int64_t{sizeof(Scalar)});
    const int64_t nonzero_bytes = int64_t{sizeof(int32_t)} + int64_t{sizeof(Scalar)};
    const int64_t end = place_.first + place_.count;
    int64_t chunks = 0;
    CsrRows<Scalar> rows;
    for (int64_t first = place_.first; first < end; ++chunks) {
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
        // the point is the shard's, as a replica would name it.
        for (size_t p = 0; p < rows.indices.size(); ++p) {
          if (rows.indices[p] < 0 || rows.indices[p] >= d) {
            const int64_t row =
                std::upper_bound(rows.indptr.begin(), rows.indptr.end(), static_cast<int64_t>(p)) -
                rows.indptr.begin() - 1;
            return absl::InvalidArgumentError(
                absl::StrCat("point ", first - place_.first + row, " has a nonzero in column ",
                             rows.indices[p], ", outside [0, d = ", d, ")"));
          }
        }
        (*moments)->AddSparse(rows.indptr.data(), rows.indices.data(), rows.values.data(), count,
                              d);
      }
      v1::JobRequest request;
      v1::CsrPoints* csr =
          Chunk<Scalar>(first - place_.first, count, &request)->mutable_points_csr();
      EncodeInt64(rows.indptr, csr->mutable_indptr_i64());
      EncodeInt32(rows.indices, csr->mutable_indices_i32());
      WriteValues(absl::MakeConstSpan(rows.values), wire::Values(csr));
      csr->set_shard_nnz(indptr[end] - indptr[place_.first]);
      // Rows that are all empty carry no float64 values to make the shard
      // float64.
      csr->set_float64(std::is_same_v<Scalar, double>);
      if (absl::Status s = SendChunk(request); !s.ok()) return s;
      first = last;
    }
    return chunks;
  }

  const ShardSource& source_;
  const ShardLoadOptions& options_;
  const ShardPlace& place_;
  ShardStream* stream_ = nullptr;  // the stream of the load under way
};

absl::StatusOr<std::unique_ptr<ShardStream>> ShardStream::Load(v1::KMeansTransformer::Stub* stub,
                                                               const std::string& address,
                                                               const ShardSource& source,
                                                               const ShardLoadOptions& options,
                                                               const ShardPlace& place) {
  if (place.count < 1 || options.d < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a shard of ", place.count, " points in d = ", options.d, ": each must be at least 1"));
  }
  return ShardLoader(source, options, place).Load(stub, address);
}

}  // namespace kmt
