#include "client/cluster_client.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"

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

absl::Status Client::Cluster(const RequestSource& source, const ResponseSink& sink) {
  std::deque<Entry> retry;          // to send again, in request order
  std::map<int64_t, v1::ClusterResponse> done;  // answered, not yet delivered
  int64_t next_index = 0, next_delivery = 0;
  bool source_exhausted = false;
  const auto deliver = [&](int64_t index, v1::ClusterResponse&& response) {
    done.emplace(index, std::move(response));
    for (auto it = done.find(next_delivery); it != done.end();
         it = done.find(++next_delivery)) {
      sink(std::move(it->second));
      done.erase(it);
    }
  };

  for (int stream_number = 0;; ++stream_number) {
    if (retry.empty() && source_exhausted) return absl::OkStatus();
    if (stream_number > 0 && !retry.empty()) {
      // Back off before a new stream, more after each failed attempt.
      const int attempts = retry.front().attempts;
      std::this_thread::sleep_for(std::chrono::milliseconds(
          std::min(2000, 50 << std::min(attempts, 6))));
    }
    grpc::ClientContext context;
    if (options_.stream_timeout != absl::InfiniteDuration()) {
      context.set_deadline(absl::ToChronoTime(absl::Now() + options_.stream_timeout));
    }
    auto stream = stub_->Cluster(&context);

    // The writer sends retries first, then new requests, keeping at most
    // `window` unanswered; it stops early once a batch came back UNAVAILABLE,
    // so that the rest go to a fresh stream.
    std::mutex mu;
    std::condition_variable changed;
    std::deque<Entry> sent;  // on this stream, unanswered, in order
    bool stop_sending = false;
    std::thread writer([&] {
      for (;;) {
        Entry entry;
        {
          std::unique_lock<std::mutex> lock(mu);
          changed.wait(lock, [&] {
            return stop_sending || sent.size() < static_cast<size_t>(options_.window);
          });
          if (stop_sending) break;
          if (!retry.empty()) {
            entry = std::move(retry.front());
            retry.pop_front();
          } else if (!source_exhausted) {
            entry.index = next_index;
            if (!source(&entry.request)) {
              source_exhausted = true;
              break;
            }
            ++next_index;
          } else {
            break;
          }
          ++entry.attempts;
          sent.push_back(entry);
        }
        if (!stream->Write(sent.back().request)) break;
      }
      stream->WritesDone();
    });

    v1::ClusterResponse response;
    while (stream->Read(&response)) {
      std::unique_lock<std::mutex> lock(mu);
      if (sent.empty()) break;  // more responses than requests: not our server
      Entry entry = std::move(sent.front());
      sent.pop_front();
      if (response.error().code() == static_cast<int>(grpc::StatusCode::UNAVAILABLE) &&
          entry.attempts < options_.max_attempts) {
        stop_sending = true;
        ++resent_;
        retry.push_back(std::move(entry));
      } else {
        deliver(entry.index, std::move(response));
      }
      lock.unlock();
      changed.notify_all();
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      stop_sending = true;
    }
    changed.notify_all();
    writer.join();
    const grpc::Status status = stream->Finish();

    // What this stream left unanswered goes back in front of the retries.
    const bool retriable = status.ok() || status.error_code() == grpc::StatusCode::UNAVAILABLE;
    for (auto it = sent.rbegin(); it != sent.rend(); ++it) {
      if (!retriable || it->attempts >= options_.max_attempts) {
        return absl::Status(
            status.ok() ? absl::StatusCode::kUnavailable
                        : static_cast<absl::StatusCode>(status.error_code()),
            absl::StrCat("batch '", it->request.request_id(), "' unanswered after ",
                         it->attempts, " attempts: ",
                         status.ok() ? "stream ended early" : status.error_message()));
      }
      ++resent_;
      retry.push_front(std::move(*it));
    }
    std::sort(retry.begin(), retry.end(),
              [](const Entry& a, const Entry& b) { return a.index < b.index; });
    if (!status.ok() && !retriable) return FromGrpc(status);
  }
}

}  // namespace kmt
