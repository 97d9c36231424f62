#include "client/replica_shards.h"

#include <arpa/inet.h>
#include <netdb.h>

#include <algorithm>
#include <thread>
#include <utility>
#include <variant>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/point_moments.h"
#include "proto/batch_error.h"
#include "proto/kmeans_transformer.grpc.pb.h"

namespace kmt {
namespace {

struct Shard {
  int64_t first = 0, count = 0;
  int server = 0;
  std::unique_ptr<ShardStream> stream;
  // The centers taken into its seeding distances, k-means++'s and
  // k-means‖'s, as the steps that took them in (their add_centers alone), to
  // replay.
  std::vector<v1::JobRequest> replays;
  std::optional<PointMoments> moments;  // of its points, read at its first load
  int moves = 0;                        // times it was moved after a failure
};

// A failure as the job's messages quote it: code and message, without the
// payload that marks a replica's failure (ReplicaGone).
std::string Described(const absl::Status& status) {
  return status.ToString(absl::StatusToStringMode::kWithNoExtraData);
}

}  // namespace

class ReplicaShards::Impl {
 public:
  Impl(ReplicaShardOptions settings, int64_t n, int d, ShardSource source)
      : load_{.d = d,
              .weights = std::move(settings.weights),
              .count_label_changes = settings.count_label_changes,
              .points_type = settings.points_type,
              .points_offset = settings.points_offset,
              .chunk_bytes = settings.chunk_bytes,
              .shared_points = settings.shared_points,
              .stream_timeout = settings.stream_timeout,
              .log = settings.log},
        options_(std::move(settings)),
        source_(std::move(source)) {
    for (const std::string& address : options_.servers) {
      stubs_.push_back(ReplicaStub(address, options_.security));
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
      if (!ReplicaGone(results[s])) return Named(s, results[s]);
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
          KeepForReplay(*requests[s], &shards_[s].replays);
        }
      }
      std::vector<size_t> again;
      for (size_t s : pending) {
        if (failed[s].ok()) continue;
        if (!ReplicaGone(failed[s])) return Named(s, failed[s]);
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

  // Loads the shard on its replica (ShardStream::Load); its moments are
  // read at its first load.
  absl::Status Load(Shard* shard) {
    shard->stream.reset();
    const bool moments = options_.moments && !shard->moments;
    PointMoments read;
    absl::StatusOr<std::unique_ptr<ShardStream>> stream = ShardStream::Load(
        stubs_[shard->server].get(), options_.servers[shard->server], source_, load_,
        {.first = shard->first,
         .count = shard->count,
         .replays = &shard->replays,
         .moments = moments ? &read : nullptr});
    if (!stream.ok()) return stream.status();
    shard->stream = *std::move(stream);
    if (moments) shard->moments = read;
    return absl::OkStatus();
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
                                                   " moves of this shard: ", Described(why))));
      }
      ++moves_;
      std::vector<int> load(stubs_.size(), 0);
      for (const Shard& other : shards_) ++load[other.server];
      int best = -1;
      for (size_t r = 0; r < stubs_.size(); ++r) {
        if (alive_[r] && (best < 0 || load[r] < load[best])) best = static_cast<int>(r);
      }
      if (best < 0) {
        return Named(s, absl::UnavailableError(absl::StrCat("no replica left: ", Described(why))));
      }
      if (options_.log) {
        options_.log(absl::StrCat("shard ", s, ": ", options_.servers[shard.server], " failed (",
                                  Described(why), "); loading it on ", options_.servers[best],
                                  " and repeating the step"));
      }
      shard.server = best;
      absl::Status loaded = Load(&shard);
      if (loaded.ok()) return loaded;
      if (!ReplicaGone(loaded)) return Named(s, loaded);
      why = std::move(loaded);
    }
  }

  // How each shard is loaded, from the options (the weights moved here).
  const ShardLoadOptions load_;
  const ReplicaShardOptions options_;  // their weights empty
  const ShardSource source_;
  std::vector<std::unique_ptr<v1::KMeansTransformer::Stub>> stubs_;
  std::vector<bool> alive_;
  std::vector<Shard> shards_;
  int moves_ = 0;
};

ReplicaShards::ReplicaShards(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ReplicaShards::~ReplicaShards() = default;

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

absl::StatusOr<std::unique_ptr<ReplicaShards>> ReplicaShards::Load(ReplicaShardOptions options,
                                                                   int64_t n, int d,
                                                                   ShardSource source) {
  if (options.servers.empty()) return absl::InvalidArgumentError("no server addresses");
  if (options.streams_per_server < 1 || n < 1 || d < 1) {
    return absl::InvalidArgumentError(absl::StrCat("streams per server ",
                                                   options.streams_per_server, ", n = ", n,
                                                   ", d = ", d, ": each must be at least 1"));
  }
  const bool float64 = IsFloat64(source);
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
