#include "client/cluster_client.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace kmt {
namespace {

struct Entry {
  int64_t index = 0;  // position in the caller's request order
  int attempts = 0;   // sends so far
  v1::ClusterRequest request;
};

}  // namespace

absl::Status FromGrpc(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

Client::Client(const ClientOptions& options) : options_(options) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_message_bytes);
  args.SetMaxSendMessageSize(options.max_message_bytes);
  args.SetLoadBalancingPolicyName(options.load_balancing);
  // Large messages in few syscalls, as on the server (see server/main.cc).
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 16 << 20);
  args.SetInt(GRPC_ARG_TCP_READ_CHUNK_SIZE, 1 << 20);
  args.SetInt(GRPC_ARG_HTTP2_MAX_FRAME_SIZE, 4 << 20);
  channel_ = grpc::CreateCustomChannel(options.target, grpc::InsecureChannelCredentials(),
                                       args);
  stub_ = v1::KMeansTransformer::NewStub(channel_);
}

absl::StatusOr<std::vector<v1::ModelInfo>> Client::ListModels() {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::ListModelsResponse response;
  const grpc::Status status = stub_->ListModels(&context, {}, &response);
  if (!status.ok()) return FromGrpc(status);
  return std::vector<v1::ModelInfo>(response.models().begin(), response.models().end());
}

// What the streams of one Cluster call share, under `mu`.
struct Client::Shared {
  const RequestSource& source;
  const ResponseSink& sink;
  std::mutex mu;
  std::condition_variable changed;
  std::deque<Entry> retry;  // to send again, in request order
  std::map<int64_t, v1::ClusterResponse> done;  // answered, not yet delivered
  int64_t next_index = 0, next_delivery = 0, in_flight = 0;
  // Streams in a row that ended in an error without an answer. A channel
  // that cannot connect fails each stream before a batch is written, so the
  // batches' own attempts would never count up.
  int failed_streams = 0;
  bool source_exhausted = false;
  absl::Status failure;

  // All sent, all answered, or failed: nothing left for any stream.
  bool Over() const {
    return !failure.ok() || (source_exhausted && retry.empty() && in_flight == 0);
  }
  void Deliver(int64_t index, v1::ClusterResponse&& response) {
    done.emplace(index, std::move(response));
    for (auto it = done.find(next_delivery); it != done.end(); it = done.find(++next_delivery)) {
      sink(std::move(it->second));
      done.erase(it);
    }
  }
};

absl::Status Client::Cluster(const RequestSource& source, const ResponseSink& sink) {
  Shared shared{source, sink};
  std::vector<std::thread> workers;
  for (int s = 1; s < options_.streams; ++s) {
    workers.emplace_back([this, &shared] { StreamWorker(shared); });
  }
  StreamWorker(shared);
  for (std::thread& t : workers) t.join();
  return shared.failure;
}

void Client::StreamWorker(Shared& shared) {
  for (bool first = true;; first = false) {
    {
      // Wait for work: a batch to retry, more input, or the end.
      std::unique_lock<std::mutex> lock(shared.mu);
      shared.changed.wait(lock, [&] {
        return shared.Over() || !shared.retry.empty() || !shared.source_exhausted;
      });
      if (shared.Over()) return;
      if (!first && (!shared.retry.empty() || shared.failed_streams > 0)) {
        // Back off before a new stream, more after each failed attempt.
        const int attempts = std::max(
            shared.failed_streams, shared.retry.empty() ? 0 : shared.retry.front().attempts);
        lock.unlock();
        std::this_thread::sleep_for(
            std::chrono::milliseconds(std::min(2000, 50 << std::min(attempts, 6))));
      }
    }
    grpc::ClientContext context;
    if (options_.stream_timeout != absl::InfiniteDuration()) {
      context.set_deadline(absl::ToChronoTime(absl::Now() + options_.stream_timeout));
    }
    auto stream = stub_->Cluster(&context);

    // The writer sends retries first, then new requests, keeping at most
    // `window` unanswered on this stream; it stops early once a batch came
    // back UNAVAILABLE, so that the rest go to a fresh stream.
    std::deque<Entry> sent;  // on this stream, unanswered, in order
    bool stop_sending = false;
    std::thread writer([&] {
      for (int written = 0; written < options_.batches_per_stream; ++written) {
        const v1::ClusterRequest* request;
        {
          std::unique_lock<std::mutex> lock(shared.mu);
          shared.changed.wait(lock, [&] {
            return stop_sending || !shared.failure.ok() ||
                   sent.size() < static_cast<size_t>(options_.window);
          });
          if (stop_sending || !shared.failure.ok()) break;
          Entry entry;
          if (!shared.retry.empty()) {
            entry = std::move(shared.retry.front());
            shared.retry.pop_front();
          } else if (!shared.source_exhausted) {
            entry.index = shared.next_index;
            if (!shared.source(&entry.request)) {
              shared.source_exhausted = true;
              shared.changed.notify_all();
              break;
            }
            ++shared.next_index;
          } else {
            break;
          }
          ++entry.attempts;
          ++shared.in_flight;
          sent.push_back(std::move(entry));
          // Stays put while others are added (a deque), and is serialised
          // by Write before its answer can arrive and retire it.
          request = &sent.back().request;
        }
        if (!stream->Write(*request)) break;
      }
      stream->WritesDone();
    });

    v1::ClusterResponse response;
    bool answered = false;
    while (stream->Read(&response)) {
      std::unique_lock<std::mutex> lock(shared.mu);
      if (sent.empty()) break;  // more responses than requests: not our server
      answered = true;
      shared.failed_streams = 0;
      Entry entry = std::move(sent.front());
      sent.pop_front();
      --shared.in_flight;
      if (response.error().code() == static_cast<int>(grpc::StatusCode::UNAVAILABLE) &&
          entry.attempts < options_.max_attempts) {
        stop_sending = true;
        ++resent_;
        shared.retry.push_back(std::move(entry));
      } else {
        shared.Deliver(entry.index, std::move(response));
      }
      shared.changed.notify_all();
    }
    {
      std::lock_guard<std::mutex> lock(shared.mu);
      stop_sending = true;
    }
    shared.changed.notify_all();
    writer.join();
    const grpc::Status status = stream->Finish();

    // What this stream left unanswered goes back to the retries.
    std::lock_guard<std::mutex> lock(shared.mu);
    const bool retriable = status.ok() || status.error_code() == grpc::StatusCode::UNAVAILABLE;
    for (Entry& entry : sent) {
      --shared.in_flight;
      if ((!retriable || entry.attempts >= options_.max_attempts) && shared.failure.ok()) {
        shared.failure = absl::Status(
            status.ok() ? absl::StatusCode::kUnavailable
                        : static_cast<absl::StatusCode>(status.error_code()),
            absl::StrCat("batch '", entry.request.request_id(), "' unanswered after ",
                         entry.attempts, " attempts: ",
                         status.ok() ? "stream ended early" : status.error_message()));
      }
      ++resent_;
      shared.retry.push_back(std::move(entry));
    }
    if (!retriable && shared.failure.ok()) shared.failure = FromGrpc(status);
    if (!status.ok() && !answered && ++shared.failed_streams >= options_.max_attempts &&
        shared.failure.ok()) {
      shared.failure = absl::Status(
          static_cast<absl::StatusCode>(status.error_code()),
          absl::StrCat(shared.failed_streams, " streams in a row failed without an answer: ",
                       status.error_message()));
    }
    std::sort(shared.retry.begin(), shared.retry.end(),
              [](const Entry& a, const Entry& b) { return a.index < b.index; });
    shared.changed.notify_all();
  }
}

}  // namespace kmt
