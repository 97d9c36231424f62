#include "server/job_reactor.h"

#include <algorithm>
#include <chrono>

#include "proto/batch_error.h"
#include "proto/job_matrices.h"
#include "proto/raw_payload.h"
#include "server/grpc_status.h"

namespace kmt {

JobReactor::JobReactor(const JobEnvironment* environment, grpc::CallbackServerContext* context)
    : env_(environment), context_(context) {
  shard_.emplace(env_->memory, env_->limits);
  shard_->set_step_threads([pool = env_->pool] { return pool->IdleThreads(); });
  shard_->set_peer(context_->peer());
  ++*env_->open_streams;
  env_->metrics->JobStarted();
  order_.Release(ReactorOrder::kCreated);
  Read();
}

void JobReactor::Read() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (ended_) return;
    reading_ = true;
  }
  order_.Release(ReactorOrder::kRead);
  StartRead(&request_);
}

void JobReactor::Write() {
  order_.Release(ReactorOrder::kWrite);
  StartWrite(&response_);
}

void JobReactor::OnReadDone(bool ok) {
  ReactorOrder::Reaction reaction(&order_, ReactorOrder::kRead);
  {
    std::lock_guard<std::mutex> lock(mu_);
    reading_ = false;
    if (ended_) return;  // finished on cancellation: the request is dropped
  }
  if (!ok) return End(CallStatus(context_, arrived_));  // the client's writes are done
  if (*env_->draining) {
    return End(
        absl::UnavailableError("server is shutting down; load this shard on another replica"));
  }
  response_.Clear();
  switch (request_.step_case()) {
    case v1::JobRequest::kShard: {
      const v1::ShardChunk& chunk = request_.shard();
      const absl::Status status = shard_->Load(chunk, &response_);
      env_->metrics->SetResidentBytes(env_->memory->held(), env_->memory->cap());
      if (!status.ok()) return End(status);
      if (chunk.has_points_shared()) {
        env_->metrics->RecordPointsLoaded(true, chunk.points_shared().bytes());
      } else {
        env_->metrics->RecordPointsLoaded(false, WireBytes(wire::Points(chunk)));
      }
      Write();
      return;
    }
    case v1::JobRequest::kAssign:
    case v1::JobRequest::kSeed:
    case v1::JobRequest::kKmeansParallel:
    case v1::JobRequest::kCandidateWeights:
    case v1::JobRequest::kSampleSums:
    case v1::JobRequest::kMinibatchSteps:
    case v1::JobRequest::kLloydSteps:
      env_->pool->Submit([this] { Step(); });
      return;
    default:
      *response_.mutable_error() = ToBatchError(absl::InvalidArgumentError(
          "a job request needs one of shard, assign, seed, kmeans_parallel, candidate_weights, "
          "sample_sums, minibatch_steps or lloyd_steps"));
      Write();
  }
}

void JobReactor::Step() {
  const auto start = std::chrono::steady_clock::now();
  absl::Status status = CallStatus(context_, arrived_);
  // A step that throws (memory it could not allocate) fails INTERNAL, not
  // the process.
  if (status.ok()) {
    status = Handled([this] {
      switch (request_.step_case()) {
        case v1::JobRequest::kAssign:
          return shard_->Assign(request_.assign(), &response_);
        case v1::JobRequest::kSeed:
          return shard_->Seed(request_.seed(), &response_);
        case v1::JobRequest::kKmeansParallel:
          return shard_->KMeansParallel(request_.kmeans_parallel(), &response_);
        case v1::JobRequest::kSampleSums:
          return shard_->SampleSums(request_.sample_sums(), &response_);
        case v1::JobRequest::kMinibatchSteps:
          return shard_->MiniBatchSteps(request_.minibatch_steps(), &response_);
        case v1::JobRequest::kLloydSteps:
          return shard_->LloydSteps(
              request_.lloyd_steps(), [this] { return CallStatus(context_, arrived_); },
              &response_);
        default:
          return shard_->CandidateWeights(request_.candidate_weights(), &response_);
      }
    });
  }
  if (!status.ok()) {
    response_.Clear();
    *response_.mutable_error() = ToBatchError(status);
  }
  response_.set_compute_seconds(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  // Labels past the first response's share follow in responses of their own.
  labels_.assign(response_.labels().begin(), response_.labels().end());
  response_.clear_labels();
  labels_sent_ = 0;
  raw_labels_ = (request_.has_assign() && request_.assign().raw_labels()) ||
                (request_.has_lloyd_steps() && request_.lloyd_steps().start().raw_labels()) ||
                request_.has_sample_sums();
  if (!labels_.empty()) PutLabels();
  Write();
}

void JobReactor::OnWriteDone(bool ok) {
  ReactorOrder::Reaction reaction(&order_, ReactorOrder::kWrite);
  if (!ok) return End(CallStatus(context_, arrived_));  // the client is gone
  if (labels_sent_ < labels_.size()) {
    response_.Clear();
    PutLabels();
    Write();
    return;
  }
  labels_ = {};
  request_.Clear();
  Read();
}

void JobReactor::PutLabels() {
  const size_t count = std::min(labels_.size() - labels_sent_, size_t{kLabelsPerResponse});
  const absl::Span<const int32_t> chunk(labels_.data() + labels_sent_, count);
  if (raw_labels_) {
    EncodeInt32(chunk, response_.mutable_labels_i32());
  } else {
    response_.mutable_labels()->Add(chunk.begin(), chunk.end());
  }
  labels_sent_ += count;
  response_.set_labels_to_follow(static_cast<int64_t>(labels_.size() - labels_sent_));
}

void JobReactor::OnCancel() {
  ReactorOrder::Reaction reaction(&order_, ReactorOrder::kCreated);
  bool end;
  {
    std::lock_guard<std::mutex> lock(mu_);
    end = reading_;
  }
  if (end) End(CallStatus(context_, arrived_));
}

void JobReactor::End(const absl::Status& status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (ended_) return;
    ended_ = true;
  }
  env_->metrics->RecordJobEnd(static_cast<int>(status.code()));
  order_.Release(ReactorOrder::kDone);
  Finish(ToGrpcStatus(status));
}

void JobReactor::OnDone() {
  order_.Acquire(ReactorOrder::kDone);
  shard_.reset();  // the shard's bytes go back to the cap
  env_->metrics->SetResidentBytes(env_->memory->held(), env_->memory->cap());
  env_->metrics->JobEnded();
  --*env_->open_streams;
  delete this;
}

}  // namespace kmt
