#include "client/resident_job.h"

#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <netdb.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/cluster_client.h"
#include "core/cluster_sums.h"
#include "core/init.h"
#include "core/seeding.h"
#include "core/validation.h"
#include "proto/batch_error.h"
#include "proto/channel_tuning.h"
#include "proto/kmeans_transformer.grpc.pb.h"
#include "proto/raw_payload.h"

namespace kmt {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Failures after which the shard goes to another replica: the replica is
// gone, restarting or shutting down. Other codes are the job's own errors.
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
      if (more.labels_size() == 0 || more.labels_to_follow() != to_follow - more.labels_size()) {
        return absl::InternalError(absl::StrCat("a job's labels arrived out of step: ", to_follow,
                                                " to follow, then ", more.labels_size(), " with ",
                                                more.labels_to_follow(), " to follow"));
      }
      response.mutable_labels()->Add(more.labels().begin(), more.labels().end());
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

struct Shard {
  int64_t first = 0, count = 0;
  int server = 0;
  std::unique_ptr<JobStream> stream;
  std::vector<float> seeded;            // centers taken into its seeding distances, to replay
  std::vector<std::string> groups;      // k-means‖'s groups of centers taken in, to replay
  std::optional<PointMoments> moments;  // of its points, read at its first load
};

class Job {
 public:
  Job(const ResidentJobOptions& options, int64_t n, int d, const PointSource& source)
      : options_(options), d_(d), source_(source) {
    for (const std::string& address : options.servers) {
      grpc::ChannelArguments args;
      args.SetMaxReceiveMessageSize(-1);
      args.SetMaxSendMessageSize(-1);
      ApplyChannelTuning(&args);
      stubs_.push_back(v1::KMeansTransformer::NewStub(options.security.Connect(address, args)));
      alive_.push_back(true);
    }
    // No shard without points: a small dataset gets fewer shards.
    const int64_t count =
        std::min<int64_t>(n, static_cast<int64_t>(stubs_.size()) * options.streams_per_server);
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

  // The mean variance of all points, merged in shard order (tol > 0 only:
  // the shards' moments are read then).
  double MeanVariance() const {
    PointMoments all;
    for (const Shard& shard : shards_) all.Add(*shard.moments);
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
      if (!ReplicaFailed(results[s].code())) return Named(s, results[s]);
      if (absl::Status moved = Move(s, results[s]); !moved.ok()) return moved;
    }
    return absl::OkStatus();
  }

  // One request per shard (none where `make` gives none), all at once; the
  // answers in shard order. A shard whose stream fails is moved and asked
  // again.
  using MakeRequest = std::function<std::optional<v1::JobRequest>(size_t shard)>;
  absl::StatusOr<std::vector<v1::JobResponse>> Round(const MakeRequest& make) {
    std::vector<v1::JobResponse> answers(shards_.size());
    std::vector<size_t> pending;
    std::vector<std::optional<v1::JobRequest>> requests(shards_.size());
    for (size_t s = 0; s < shards_.size(); ++s) {
      requests[s] = make(s);
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
          if (requests[s]->has_seed()) {
            const auto& add = requests[s]->seed().add_centers();
            shards_[s].seeded.insert(shards_[s].seeded.end(), add.begin(), add.end());
          }
          if (requests[s]->has_kmeans_parallel() &&
              !requests[s]->kmeans_parallel().add_centers_f32().empty()) {
            shards_[s].groups.push_back(requests[s]->kmeans_parallel().add_centers_f32());
          }
        }
      }
      std::vector<size_t> again;
      for (size_t s : pending) {
        if (failed[s].ok()) continue;
        if (!ReplicaFailed(failed[s].code())) return Named(s, failed[s]);
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
    return absl::Status(
        status.code(),
        absl::StrCat("shard ", s, " on ", options_.servers[shards_[s].server], ": ", message));
  }

  // Opens a stream on the shard's replica and sends its points (and
  // weights) in chunks of raw float32, then reads the acknowledgements.
  absl::Status Load(Shard* shard) {
    shard->stream =
        std::make_unique<JobStream>(stubs_[shard->server].get(), options_.stream_timeout);
    const bool weighted = !options_.weights.empty();
    const int64_t chunk =
        std::max<int64_t>(1, options_.chunk_bytes / (4 * (int64_t{d_} + (weighted ? 1 : 0))));
    // The tolerance's variance, from the points as they are first read.
    std::optional<PointMoments> moments;
    if (options_.tol > 0 && !shard->moments) moments.emplace();
    int64_t chunks = 0;
    v1::JobRequest request;
    std::vector<float> values;
    for (int64_t done = 0; done < shard->count || chunks == 0; done += chunk, ++chunks) {
      const int64_t count = std::min(chunk, shard->count - done);
      values.clear();
      if (absl::Status s = source_(shard->first + done, count, &values); !s.ok()) return s;
      if (values.size() != static_cast<size_t>(count * d_)) {
        return absl::InvalidArgumentError(absl::StrCat("the point source gave ", values.size(),
                                                       " values for ", count, " points in d = ", d_,
                                                       " from point ", shard->first + done));
      }
      if (moments) moments->Add(values.data(), count, d_);
      v1::ShardChunk* c = request.mutable_shard();
      c->set_n(shard->count);
      c->set_d(d_);
      c->set_count_label_changes(options_.count_label_changes);
      EncodeFloat32(values, c->mutable_points_f32());
      if (weighted) {
        EncodeFloat32(absl::MakeConstSpan(options_.weights).subspan(shard->first + done, count),
                      c->mutable_weights_f32());
      }
      if (absl::Status s = shard->stream->Send(request); !s.ok()) return s;
    }
    for (int64_t c = 0; c < chunks; ++c) {
      absl::StatusOr<v1::JobResponse> r = shard->stream->Receive();
      if (!r.ok()) return r.status();
      if (absl::Status s = FromBatchError(r->error()); !s.ok()) return s;
      if (c + 1 == chunks && r->points_loaded() != shard->count) {
        return absl::InternalError(absl::StrCat("the replica holds ", r->points_loaded(), " of ",
                                                shard->count, " points"));
      }
    }
    // A shard moved during k-means++ or k-means‖ gets back the distances it
    // had: k-means‖'s in the same groups, so to the bit.
    std::vector<v1::JobRequest> replays;
    if (!shard->seeded.empty()) {
      replays.emplace_back().mutable_seed()->mutable_add_centers()->Assign(shard->seeded.begin(),
                                                                           shard->seeded.end());
    }
    for (const std::string& group : shard->groups) {
      replays.emplace_back().mutable_kmeans_parallel()->set_add_centers_f32(group);
    }
    for (const v1::JobRequest& replay : replays) {
      if (absl::Status s = shard->stream->Send(replay); !s.ok()) return s;
      absl::StatusOr<v1::JobResponse> r = shard->stream->Receive();
      if (!r.ok()) return r.status();
      if (absl::Status s = FromBatchError(r->error()); !s.ok()) return s;
    }
    if (moments) shard->moments = std::move(moments);
    return absl::OkStatus();
  }

  // After `why`, the shard's replica is taken as gone and the shard goes to
  // the live replica with the fewest shards.
  absl::Status Move(size_t s, const absl::Status& why) {
    Shard& shard = shards_[s];
    for (;;) {
      alive_[shard.server] = false;
      if (++moves_ > options_.max_moves) {
        return Named(s, absl::Status(why.code(), absl::StrCat("gave up after ", moves_ - 1,
                                                              " shard moves: ", why.message())));
      }
      std::vector<int> load(stubs_.size(), 0);
      for (const Shard& other : shards_) ++load[other.server];
      int best = -1;
      for (size_t r = 0; r < stubs_.size(); ++r) {
        if (alive_[r] && (best < 0 || load[r] < load[best])) best = static_cast<int>(r);
      }
      if (best < 0)
        return Named(s, absl::Status(why.code(), absl::StrCat("no replica left: ", why.message())));
      if (options_.log) {
        options_.log(absl::StrCat("shard ", s, ": ", options_.servers[shard.server], " failed (",
                                  why.ToString(), "); loading it on ", options_.servers[best],
                                  " and repeating the step"));
      }
      shard.server = best;
      const absl::Status loaded = Load(&shard);
      if (loaded.ok()) return loaded;
      if (!ReplicaFailed(loaded.code())) return Named(s, loaded);
    }
  }

  const ResidentJobOptions& options_;
  const int d_;
  const PointSource& source_;
  std::vector<std::unique_ptr<v1::KMeansTransformer::Stub>> stubs_;
  std::vector<bool> alive_;
  std::vector<Shard> shards_;
  int moves_ = 0;
};

// k-means++ with `trials` candidates per center over the job's shards
// (core/seeding.h), weighted (w D^2) if the shards are, one Round per
// seeding round; progress is logged after 1, 2, 4, 8, ... centers.
absl::StatusOr<Matrix<float>> Seed(Job& job, int d, int k, uint64_t seed, int trials, bool weighted,
                                   const std::function<void(const std::string&)>& log) {
  std::vector<int64_t> sizes;
  for (const Shard& shard : job.shards()) sizes.push_back(shard.count);
  int chosen = 1;
  const StopCheck progress = [&] {
    if (log && (chosen & (chosen - 1)) == 0) {
      log(absl::StrCat("k-means++: ", chosen, " of ", k, " centers chosen"));
    }
    ++chosen;
    return absl::OkStatus();
  };
  // A shard with nothing to do is not asked, except in a weighted job's
  // first round, which asks every shard for its sum of weights.
  bool ask_every_shard = weighted;
  return ShardedKMeansPlusPlus<float>(
      sizes, d, k, seed, trials,
      [&](const std::vector<SeedRequest<float>>& requests)
          -> absl::StatusOr<std::vector<SeedAnswer<float>>> {
        const bool ask_all = ask_every_shard;
        ask_every_shard = false;
        absl::StatusOr<std::vector<v1::JobResponse>> answers =
            job.Round([&](size_t s) -> std::optional<v1::JobRequest> {
              const SeedRequest<float>& r = requests[s];
              if (!ask_all && r.add.size() == 0 && r.indices.empty() && r.targets.empty() &&
                  r.candidates.size() == 0) {
                return std::nullopt;
              }
              v1::JobRequest request;
              v1::SeedStep* step = request.mutable_seed();
              step->mutable_add_centers()->Assign(r.add.data(), r.add.data() + r.add.size());
              step->mutable_point_indices()->Assign(r.indices.begin(), r.indices.end());
              step->mutable_draw_targets()->Assign(r.targets.begin(), r.targets.end());
              step->mutable_candidates()->Assign(r.candidates.data(),
                                                 r.candidates.data() + r.candidates.size());
              return request;
            });
        if (!answers.ok()) return answers.status();
        std::vector<SeedAnswer<float>> out(requests.size());
        for (size_t s = 0; s < requests.size(); ++s) {
          const v1::JobResponse& a = (*answers)[s];
          out[s].potential = a.potential();
          out[s].points =
              Eigen::Map<const Matrix<float>>(a.points().data(), d, a.points_size() / d);
          out[s].candidate_potentials.assign(a.candidate_potentials().begin(),
                                             a.candidate_potentials().end());
        }
        return out;
      },
      progress, weighted);
}

// k-means‖ over the job's shards. The first center is k-means++'s (seed
// steps); then each round takes the previous round's points into the
// shards' distances (one step, which answers their potentials) and samples
// about l = oversampling * k points by them (a second step, given the
// summed potential), for `rounds` rounds or more while there are fewer than
// k candidates and a point lies away from them. A last step takes the last
// round's points in and answers the weight of the points nearest each
// candidate, and greedy k-means++ weighted by those weights chooses the k
// centers among them, here.
absl::StatusOr<Matrix<float>> SeedKMeansParallel(Job& job, int d, int k,
                                                 const ResidentJobOptions& options, bool weighted,
                                                 ResidentJobResult* result) {
  if (options.kmeans_parallel_rounds < 1 || !std::isfinite(options.kmeans_parallel_oversampling) ||
      options.kmeans_parallel_oversampling <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "k-means|| with ", options.kmeans_parallel_rounds, " rounds and oversampling ",
        options.kmeans_parallel_oversampling, ": needs at least 1 round and oversampling > 0"));
  }
  absl::StatusOr<Matrix<float>> first = Seed(job, d, 1, options.seed, 1, weighted, nullptr);
  if (!first.ok()) return first.status();
  Matrix<float> candidates = *first, fresh = *first;
  const double oversampling = options.kmeans_parallel_oversampling * k;
  // Beyond `rounds`, a round that finds too few candidates is run again, but
  // not forever: only a dataset of fewer than k distinct points (of positive
  // weight) stops with fewer.
  const int most_rounds = options.kmeans_parallel_rounds + 64;
  const auto take_in = [&]() -> absl::StatusOr<double> {
    v1::JobRequest request;
    EncodeFloat32(absl::MakeConstSpan(fresh.data(), fresh.size()),
                  request.mutable_kmeans_parallel()->mutable_add_centers_f32());
    absl::StatusOr<std::vector<v1::JobResponse>> answers =
        job.Round([&](size_t) -> std::optional<v1::JobRequest> { return request; });
    if (!answers.ok()) return answers.status();
    double potential = 0;
    for (const v1::JobResponse& a : *answers) potential += a.potential();
    return potential;
  };
  absl::StatusOr<double> potential = take_in();
  if (!potential.ok()) return potential.status();
  int round = 0;
  while (*potential > 0) {
    ++round;
    absl::StatusOr<std::vector<v1::JobResponse>> answers =
        job.Round([&](size_t s) -> std::optional<v1::JobRequest> {
          v1::JobRequest request;
          v1::KMeansParallelStep* step = request.mutable_kmeans_parallel();
          step->set_oversampling(oversampling);
          step->set_potential(*potential);
          step->set_seed(options.seed);
          step->set_round(round);
          step->set_first_point(job.shards()[s].first);
          return request;
        });
    if (!answers.ok()) return answers.status();
    int64_t taken = 0;
    for (const v1::JobResponse& a : *answers) {
      if (a.sampled_points_size() != a.sampled_indices_size() * d) {
        return absl::InternalError(absl::StrCat("a k-means|| step answered ",
                                                a.sampled_points_size(), " values for ",
                                                a.sampled_indices_size(), " points in d = ", d));
      }
      taken += a.sampled_indices_size();
    }
    fresh.resize(d, taken);
    float* at = fresh.data();
    for (const v1::JobResponse& a : *answers) {
      at = std::copy(a.sampled_points().begin(), a.sampled_points().end(), at);
    }
    candidates.conservativeResize(d, candidates.cols() + taken);
    candidates.rightCols(taken) = fresh;
    if (options.log) {
      options.log(absl::StrCat("k-means||: round ", round, " sampled ", taken, " points (",
                               candidates.cols(), " candidates) at potential ", *potential));
    }
    if ((round >= options.kmeans_parallel_rounds && candidates.cols() >= k) ||
        round >= most_rounds) {
      break;
    }
    if (taken > 0) potential = take_in();
    if (!potential.ok()) return potential.status();
  }
  result->init_rounds = round;
  result->init_candidates = candidates.cols();

  // The last round's points taken in, the shards weigh every candidate.
  v1::JobRequest request;
  v1::KMeansParallelStep* last = request.mutable_kmeans_parallel();
  if (*potential > 0) {
    EncodeFloat32(absl::MakeConstSpan(fresh.data(), fresh.size()), last->mutable_add_centers_f32());
  }
  last->set_return_weights(true);
  absl::StatusOr<std::vector<v1::JobResponse>> answers =
      job.Round([&](size_t) -> std::optional<v1::JobRequest> { return request; });
  if (!answers.ok()) return answers.status();
  // In double, so that counts beyond 2^24 stay exact.
  Vector<double> weights = Vector<double>::Zero(candidates.cols());
  for (const v1::JobResponse& a : *answers) {
    if (a.candidate_weights_size() != candidates.cols()) {
      return absl::InternalError(absl::StrCat("a k-means|| step answered ",
                                              a.candidate_weights_size(), " weights for ",
                                              candidates.cols(), " candidates"));
    }
    weights += Eigen::Map<const Vector<double>>(a.candidate_weights().data(), candidates.cols());
  }
  const Eigen::Index positive = (weights.array() > 0).count();
  if (positive >= k) {
    absl::StatusOr<Matrix<double>> centers = ChooseInitialCenters<double>(
        candidates.cast<double>(), k, InitMethod::kKMeansPlusPlus, options.seed, {}, &weights);
    if (!centers.ok()) return centers.status();
    return centers->cast<float>();
  }
  // Fewer than k distinct points: each is a center, the first repeated.
  Matrix<float> centers(d, k);
  Eigen::Index j = 0;
  for (Eigen::Index c = 0; c < candidates.cols(); ++c) {
    if (weights[c] > 0) centers.col(j++) = candidates.col(c);
  }
  for (; j < k; ++j) centers.col(j) = centers.col(0);
  if (options.log) {
    options.log(absl::StrCat("k-means||: only ", positive, " distinct points for k = ", k,
                             "; the first is repeated"));
  }
  return centers;
}

// One shard's answer to an assign step as cluster sums, checked against k
// and d: the weights are the counts on an unweighted shard.
absl::StatusOr<ClusterSums> SumsOf(const v1::JobResponse& a, int d, int k, bool weighted) {
  if (a.center_counts_size() != k || a.center_sums_size() != int64_t{k} * d ||
      a.center_weights_size() != (weighted ? k : 0)) {
    return absl::InternalError(absl::StrCat("an assign step answered ", a.center_counts_size(),
                                            " counts, ", a.center_sums_size(), " sums and ",
                                            a.center_weights_size(), " weights for k = ", k,
                                            ", d = ", d, weighted ? " on weighted points" : ""));
  }
  ClusterSums sums(d, k);
  sums.counts.assign(a.center_counts().begin(), a.center_counts().end());
  sums.sums = Eigen::Map<const Matrix<double>>(a.center_sums().data(), d, k);
  if (weighted) {
    sums.weights.assign(a.center_weights().begin(), a.center_weights().end());
  } else {
    sums.weights.assign(sums.counts.begin(), sums.counts.end());
  }
  return sums;
}

}  // namespace

absl::StatusOr<ResidentJobResult> RunResidentJob(const ResidentJobOptions& options, int64_t n,
                                                 int d, const PointSource& source,
                                                 const std::optional<Matrix<float>>& initial) {
  if (options.servers.empty()) return absl::InvalidArgumentError("no server addresses");
  if (options.streams_per_server < 1 || options.iterations < 0 || !(options.tol >= 0) ||
      !std::isfinite(options.tol)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "streams per server ", options.streams_per_server, ", iterations ", options.iterations,
        ", tol ", options.tol, ": none may be negative, tol must be finite"));
  }
  if (options.k < 1 || n < options.k) {
    return absl::InvalidArgumentError(
        absl::StrCat("k = ", options.k, " needs 1 <= k <= n = ", n, " points"));
  }
  const int k = options.k;
  const bool weighted = !options.weights.empty();
  if (weighted) {
    const Vector<float> weights =
        Eigen::Map<const Vector<float>>(options.weights.data(), options.weights.size());
    if (absl::Status s = ValidateWeights(weights, n); !s.ok()) return s;
    const Eigen::Index positive = (weights.array() > 0).count();
    if (!initial && positive < k) {
      return absl::InvalidArgumentError(
          absl::StrCat("only ", positive, " points have a positive weight, fewer than k = ", k));
    }
  }
  ResidentJobResult result;
  Job job(options, n, d, source);
  auto start = Clock::now();
  if (absl::Status s = job.LoadAll(); !s.ok()) return s;
  result.load_seconds = Since(start);
  const double shift_tolerance = options.tol > 0 ? options.tol * job.MeanVariance() : 0;

  start = Clock::now();
  Matrix<float> centers;
  if (initial) {
    centers = *initial;
  } else {
    absl::StatusOr<Matrix<float>> seeded =
        options.seeding == ResidentSeeding::kKMeansParallel
            ? SeedKMeansParallel(job, d, k, options, weighted, &result)
            : Seed(job, d, k, options.seed,
                   options.seeding == ResidentSeeding::kPlainKMeansPlusPlus
                       ? 1
                       : GreedySeedingCandidates(k),
                   weighted, options.log);
    if (!seeded.ok()) return seeded.status();
    centers = *std::move(seeded);
  }
  result.init_seconds = Since(start);

  // Step t assigns under the centers after t iterations; the last one
  // (after `iterations`, or once converged) also gives the labels.
  for (int t = 0;; ++t) {
    const bool last = t == options.iterations;
    start = Clock::now();
    v1::JobRequest request;
    v1::AssignStep* step = request.mutable_assign();
    step->set_k(k);
    EncodeFloat32(absl::MakeConstSpan(centers.data(), centers.size()), step->mutable_centers_f32());
    step->set_return_labels(last && options.labels);
    absl::StatusOr<std::vector<v1::JobResponse>> answers =
        job.Round([&](size_t) -> std::optional<v1::JobRequest> { return request; });
    if (!answers.ok()) return answers.status();
    // Summed in shard order, so a repeated step gives the same bits.
    ClusterSums sums(d, k);
    double objective = 0;
    bool compared = true;
    int64_t changed = 0;
    for (const v1::JobResponse& a : *answers) {
      absl::StatusOr<ClusterSums> shard = SumsOf(a, d, k, weighted);
      if (!shard.ok()) return shard.status();
      sums.Add(*shard);
      objective += a.objective();
      compared &= a.labels_compared();
      changed += a.labels_changed();
    }
    if (t == 0) result.initial_objective = objective;
    if (t > 0) {
      result.objectives.push_back(objective);
      result.labels_changed.push_back(compared ? changed : -1);
    }
    if (options.log) {
      // The labels step is numbered for the iterations before it.
      options.log(absl::StrCat(
          "step ", last ? result.iterations_run : t, " objective ", objective,
          t > 0 && compared ? absl::StrCat(", labels changed ", changed) : std::string()));
    }
    if (last) {
      result.objective = objective;
      if (options.labels) {
        result.labels.reserve(n);
        for (const v1::JobResponse& a : *answers) {
          result.labels.insert(result.labels.end(), a.labels().begin(), a.labels().end());
        }
      }
      result.labels_seconds = Since(start);
      break;
    }
    Matrix<float> next = centers;
    result.empty_cluster_events += ApplyMeans(sums, &next);
    const double shift = (next - centers).cast<double>().squaredNorm();
    centers = std::move(next);
    result.iterations_run = t + 1;
    result.iteration_seconds.push_back(Since(start));
    // Scikit-learn's order: an unchanged assignment first, then the shift.
    if (t > 0 && compared && changed == 0) {
      result.convergence = Convergence::kLabelsUnchanged;
    } else if (shift <= shift_tolerance) {
      result.convergence = Convergence::kTolerance;
    }
    if (result.convergence != Convergence::kNone) t = options.iterations - 1;  // the labels step
  }
  result.centers = std::move(centers);
  result.shards = static_cast<int>(job.shards().size());
  result.shard_moves = job.moves();
  return result;
}

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
