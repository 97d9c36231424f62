#include "client/cluster_client.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "proto/batch_error.h"
#include "proto/channel_tuning.h"
#include "proto/reactor_order.h"

namespace kmt {
namespace {

struct Entry {
  int64_t index = 0;  // position in the caller's request order
  int attempts = 0;   // sends so far
  int pushbacks = 0;  // sends the server pushed back so far
  v1::ClusterRequest request;
};

// The pause a batch's refusal asks for before it is sent again, if it asks
// for one (RESOURCE_EXHAUSTED with a retry pushback of 0 or more) and the
// batch has pushbacks left.
std::optional<absl::Duration> Pushback(const v1::ClusterResponse& response, int pushbacks,
                                       const ClientOptions& options) {
  const absl::Status status = FromBatchError(response.error());
  const std::optional<int64_t> ms = RetryPushbackMs(status);
  if (!absl::IsResourceExhausted(status) || !ms || *ms < 0 || pushbacks >= options.max_pushbacks) {
    return std::nullopt;
  }
  return absl::Milliseconds(*ms);
}

// Whether a stream that ended so leaves its unanswered batches to be sent
// again: it ended early (OK), lost its server (UNAVAILABLE), or the server
// cancelled it (CANCELLED: a stream opened on a replica as its drain
// begins ends so, with no word of the server's own).
bool Resendable(const grpc::Status& status) {
  return status.ok() || status.error_code() == grpc::StatusCode::UNAVAILABLE ||
         status.error_code() == grpc::StatusCode::CANCELLED;
}

// The failure of a batch that a stream ending in `status` left unanswered
// after its last attempt.
absl::Status Unanswered(const v1::ClusterRequest& request, int attempts,
                        const grpc::Status& status) {
  return absl::Status(
      status.ok() ? absl::StatusCode::kUnavailable
                  : static_cast<absl::StatusCode>(status.error_code()),
      absl::StrCat("batch '", request.request_id(), "' unanswered after ", attempts,
                   " attempts: ", status.ok() ? "stream ended early" : status.error_message()));
}

// The pause before a batch's next send, longer after each failure.
void BackOff(int attempts) {
  std::this_thread::sleep_for(
      std::chrono::milliseconds(std::min(2000, 50 << std::min(attempts, 6))));
}

}  // namespace

absl::Status FromGrpc(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

Client::Client(const ClientOptions& options) : options_(options) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_message_bytes);
  args.SetMaxSendMessageSize(options.max_message_bytes);
  args.SetLoadBalancingPolicyName(options.load_balancing);
  ApplyChannelTuning(&args);
  channel_ = options.security.Connect(options.target, args);
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
  std::condition_variable changed;              // a stream ended, or the call is over
  std::deque<std::unique_ptr<Entry>> retry;     // to send again, in request order
  std::map<int64_t, v1::ClusterResponse> done;  // answered, not yet in order
  std::deque<v1::ClusterResponse> ready;        // in order, for the calling thread's sink
  // Answered and not yet through the sink (in `done`, in `ready` or being
  // handed over): a stream sends a new request only while its unanswered
  // batches and these are fewer than `window`.
  int64_t unsunk = 0;
  bool sinking = false;          // the sink runs: `source` waits
  std::vector<Stream*> starved;  // with a batch to send once the sink has run
  int64_t next_index = 0, next_delivery = 0, in_flight = 0;
  int active_streams = 0;
  // Streams whose call is over, for the calling thread to delete: a
  // stream's context must go before the channel, which the caller may
  // destroy as soon as Cluster returns.
  std::vector<Client::Stream*> ended;
  bool source_exhausted = false;
  // Streams in a row that ended in an error without an answer. A channel
  // that cannot connect fails each stream before a batch is written, so the
  // batches' own attempts would never count up.
  int failed_streams = 0;
  // When the batches the server pushed back may go out again.
  std::optional<absl::Time> resume_at;
  absl::Status failure;

  // All sent, all answered, or failed: nothing left for any stream.
  bool Over() const {
    return !failure.ok() || (source_exhausted && retry.empty() && in_flight == 0);
  }
  // A new stream would have something to send.
  bool Work() const { return failure.ok() && (!retry.empty() || !source_exhausted); }
  // The next batch to send, a retry first; null when there is none.
  std::unique_ptr<Entry> Next() {
    if (!retry.empty()) {
      std::unique_ptr<Entry> entry = std::move(retry.front());
      retry.pop_front();
      return entry;
    }
    if (source_exhausted) return nullptr;
    auto entry = std::make_unique<Entry>();
    entry->index = next_index;
    if (!source(&entry->request)) {
      // No wake-up: the calling stream is active, so the caller's thread has
      // nothing to do until a stream ends.
      source_exhausted = true;
      return nullptr;
    }
    ++next_index;
    return entry;
  }
  void Deliver(int64_t index, v1::ClusterResponse&& response) {
    ++unsunk;
    done.emplace(index, std::move(response));
    for (auto it = done.find(next_delivery); it != done.end(); it = done.find(++next_delivery)) {
      ready.push_back(std::move(it->second));
      done.erase(it);
    }
    if (!ready.empty()) changed.notify_all();
  }
};

// One Cluster stream on gRPC's callback API: it writes retries first, then
// new requests, keeping at most `window` unanswered, ends its writes after
// `batches_per_stream` (or once a batch came back UNAVAILABLE, so that the
// rest go to a fresh stream), and on its end hands what is unanswered back to
// the retries. gRPC runs the reactions; they never block.
class Client::Stream final
    : public grpc::ClientBidiReactor<v1::ClusterRequest, v1::ClusterResponse> {
 public:
  Stream(Client* client, Shared* shared) : client_(client), shared_(shared) {
    const ClientOptions& options = client_->options_;
    if (options.stream_timeout != absl::InfiniteDuration()) {
      context_.set_deadline(absl::ToChronoTime(absl::Now() + options.stream_timeout));
    }
    client_->stub_->async()->Cluster(&context_, this);
    order_.Release(ReactorOrder::kRead);
    StartRead(&response_);
    std::unique_lock<std::mutex> lock(shared_->mu);
    Advance(lock);
    order_.Release(ReactorOrder::kDone);
    StartCall();
  }

  void OnWriteDone(bool ok) override {
    ReactorOrder::Reaction reaction(&order_, ReactorOrder::kWrite);
    std::unique_lock<std::mutex> lock(shared_->mu);
    writing_ = false;
    retired_.reset();
    if (!ok) stop_sending_ = true;  // the stream is broken; OnDone follows
    Advance(lock);
  }

  void OnReadDone(bool ok) override {
    ReactorOrder::Reaction reaction(&order_, ReactorOrder::kRead);
    if (!ok) return;  // the server finished; OnDone follows
    std::unique_lock<std::mutex> lock(shared_->mu);
    if (sent_.empty()) {  // more responses than requests: not our server
      cancelled_ = true;
      lock.unlock();
      context_.TryCancel();
      return;
    }
    std::unique_ptr<Entry> entry = std::move(sent_.front());
    sent_.pop_front();
    --shared_->in_flight;
    answered_ = true;
    shared_->failed_streams = 0;
    if (absl::IsUnavailable(FromBatchError(response_.error())) &&
        entry->attempts < client_->options_.max_attempts) {
      // The server is draining: the batch goes out again, on a fresh stream
      // once this one has ended.
      stop_sending_ = true;
      ++client_->resent_;
      requeue_.push_back(std::move(entry));
    } else if (const std::optional<absl::Duration> pause =
                   Pushback(response_, entry->pushbacks, client_->options_)) {
      // The server's budget is full: this batch, and the ones after it,
      // go out on a fresh stream once the pause has passed.
      stop_sending_ = true;
      ++entry->pushbacks;
      ++client_->resent_;
      const absl::Time resume = absl::Now() + *pause;
      shared_->resume_at = std::max(shared_->resume_at.value_or(resume), resume);
      requeue_.push_back(std::move(entry));
    } else {
      shared_->Deliver(entry->index, std::move(response_));
      // gRPC may read the message it is writing until OnWriteDone, and a
      // fast answer can come first: only the batch written last can be it.
      if (writing_) retired_ = std::move(entry);
    }
    response_.Clear();
    Advance(lock);  // releases the lock
    order_.Release(ReactorOrder::kRead);
    StartRead(&response_);
  }

  void OnDone(const grpc::Status& status) override {
    order_.Acquire(ReactorOrder::kDone);
    std::unique_lock<std::mutex> lock(shared_->mu);
    Shared& shared = *shared_;
    const ClientOptions& options = client_->options_;
    const bool retriable = !cancelled_ && Resendable(status);
    for (std::unique_ptr<Entry>& entry : sent_) {
      --shared.in_flight;
      if ((!retriable || entry->attempts >= options.max_attempts) && shared.failure.ok()) {
        shared.failure = Unanswered(entry->request, entry->attempts, status);
      }
      ++client_->resent_;
      requeue_.push_back(std::move(entry));
    }
    for (std::unique_ptr<Entry>& entry : requeue_) shared.retry.push_back(std::move(entry));
    std::sort(shared.retry.begin(), shared.retry.end(),
              [](const auto& a, const auto& b) { return a->index < b->index; });
    if (!retriable && shared.failure.ok()) shared.failure = FromGrpc(status);
    if (!status.ok() && !answered_ && ++shared.failed_streams >= options.max_attempts &&
        shared.failure.ok()) {
      shared.failure = absl::Status(
          static_cast<absl::StatusCode>(status.error_code()),
          absl::StrCat(shared.failed_streams,
                       " streams in a row failed without an answer: ", status.error_message()));
    }
    --shared.active_streams;
    shared.ended.push_back(this);  // not touched after the lock is released
    shared.changed.notify_all();
  }

 private:
  // Starts the next write if the window, the stream's quota and the work
  // allow; ends the writes once nothing more will be written here. Called
  // with the lock held; releases it.
  void Advance(std::unique_lock<std::mutex>& lock) {
    const ClientOptions& options = client_->options_;
    const v1::ClusterRequest* write = nullptr;
    bool writes_done = false;
    if (!writing_ && !writes_done_) {
      const bool may_send =
          !stop_sending_ && shared_->failure.ok() && written_ < options.batches_per_stream;
      // A new request waits while the sink runs (the two are never called
      // at once) and while the answers the sink has not taken fill the
      // window with the stream's unanswered batches; a retry does not (the
      // answers after it wait for it).
      const bool window_open = sent_.size() < static_cast<size_t>(options.window);
      const bool wait_for_sink =
          shared_->retry.empty() &&
          (shared_->sinking ||
           static_cast<int64_t>(sent_.size()) + shared_->unsunk >= options.window);
      if (may_send && window_open && !wait_for_sink) {
        if (std::unique_ptr<Entry> entry = shared_->Next()) {
          ++entry->attempts;
          ++shared_->in_flight;
          ++written_;
          write = &entry->request;
          sent_.push_back(std::move(entry));
          writing_ = true;
        }
      }
      if (!write) {
        if (!may_send || !shared_->Work()) {
          writes_done = writes_done_ = true;
        } else if (window_open && wait_for_sink && !starved_ && sent_.empty()) {
          // Held until the calling thread sends on for it (Unstarve), once
          // the sink has run. Only with nothing in flight: a held stream
          // does not end, and the batches in flight on a broken one go out
          // again only once it has; the answers the sink waits for may be
          // those very batches. With batches in flight, their answers (or
          // the stream's end) bring the stream back here.
          starved_ = true;
          AddHold();
          shared_->starved.push_back(this);
        }
      }
    }
    // A starved stream that will write no more lets go of its hold itself.
    bool release = false;
    if (starved_ && writes_done_) {
      starved_ = false;
      release = true;
      std::vector<Stream*>& starved = shared_->starved;
      starved.erase(std::remove(starved.begin(), starved.end(), this), starved.end());
    }
    lock.unlock();
    if (write) {
      order_.Release(ReactorOrder::kWrite);
      StartWrite(write);
    }
    if (writes_done) StartWritesDone();
    if (release) RemoveHold();
  }

 public:
  // From the calling thread, after the sink took answers: a starved stream
  // sends on, and its hold ends.
  void Unstarve() {
    std::unique_lock<std::mutex> lock(shared_->mu);
    if (!starved_) return;  // it let go of its hold itself
    starved_ = false;
    Advance(lock);
    RemoveHold();
  }

 private:
  Client* const client_;
  Shared* const shared_;
  grpc::ClientContext context_;
  v1::ClusterResponse response_;  // the read in progress
  ReactorOrder order_;
  // Under shared_->mu:
  std::deque<std::unique_ptr<Entry>> sent_;      // on this stream, unanswered, in order
  std::unique_ptr<Entry> retired_;               // answered, perhaps still being written
  std::vector<std::unique_ptr<Entry>> requeue_;  // answered UNAVAILABLE, to send again
  int written_ = 0;
  bool writing_ = false, writes_done_ = false, stop_sending_ = false, answered_ = false;
  bool starved_ = false;    // held, in shared_->starved
  bool cancelled_ = false;  // by this client: its end is not resent
};

absl::Status Client::Cluster(const RequestSource& source, const ResponseSink& sink) {
  Shared shared{source, sink};
  std::unique_lock<std::mutex> lock(shared.mu);
  // The starved streams send on (or end their writes), the lock released
  // meanwhile.
  const auto unstarve = [&shared, &lock] {
    std::vector<Stream*> starved;
    starved.swap(shared.starved);
    lock.unlock();
    for (Stream* stream : starved) stream->Unstarve();
    lock.lock();
  };
  for (bool first = true;; first = false) {
    // Until the call is over, hand the answers to the sink and keep
    // `streams` streams open while there is something to send.
    shared.changed.wait(lock, [&] {
      return !shared.ready.empty() || !shared.ended.empty() ||
             (!shared.failure.ok() && !shared.starved.empty()) ||
             (shared.Over() && shared.active_streams == 0) ||
             (shared.Work() && shared.active_streams < options_.streams);
    });
    if (!shared.failure.ok() && !shared.starved.empty()) {
      unstarve();  // a failed call sends no more: they end their writes
      continue;
    }
    if (!shared.ready.empty()) {
      // The sink here, without the lock: it may take its time. Then the
      // streams that waited for it send on.
      std::deque<v1::ClusterResponse> ready;
      ready.swap(shared.ready);
      for (v1::ClusterResponse& response : ready) {
        shared.sinking = true;
        lock.unlock();
        sink(std::move(response));
        lock.lock();
        shared.sinking = false;
        --shared.unsunk;
        unstarve();
      }
      continue;
    }
    for (Stream* stream : shared.ended) delete stream;
    shared.ended.clear();
    if (shared.Over() && shared.active_streams == 0) break;
    if (!shared.Work() || shared.active_streams >= options_.streams) continue;
    if (!first && (!shared.retry.empty() || shared.failed_streams > 0)) {
      // Back off before a stream that re-sends, more after each failure; or
      // as long as the server asked, the pushback replacing the backoff.
      const int attempts = std::max(shared.failed_streams,
                                    shared.retry.empty() ? 0 : shared.retry.front()->attempts);
      const std::optional<absl::Time> resume = shared.resume_at;
      shared.resume_at.reset();
      lock.unlock();
      if (resume) {
        absl::SleepFor(*resume - absl::Now());
      } else {
        BackOff(attempts);
      }
      lock.lock();
      if (!shared.Work()) continue;
    }
    ++shared.active_streams;
    lock.unlock();
    new Stream(this, &shared);  // deleted here once it has ended
    lock.lock();
  }
  return shared.failure;
}

absl::StatusOr<v1::ClusterResponse> ClusterSession::Send(const v1::ClusterRequest& request) {
  const ClientOptions& options = client_->options_;
  for (int attempts = 1, pushbacks = 0;; ++attempts) {
    if (stream_ == nullptr) {
      context_ = std::make_unique<grpc::ClientContext>();
      if (options.stream_timeout != absl::InfiniteDuration()) {
        context_->set_deadline(absl::ToChronoTime(absl::Now() + options.stream_timeout));
      }
      stream_ = client_->stub_->Cluster(context_.get());
      sent_ = 0;
    }
    ++sent_;
    v1::ClusterResponse response;
    if (stream_->Write(request) && stream_->Read(&response)) {
      // The server's budget is full: the same stream carries the batch
      // again after the pause the server asked for.
      if (const std::optional<absl::Duration> pause = Pushback(response, pushbacks, options)) {
        ++pushbacks;
        --attempts;
        ++client_->resent_;
        absl::SleepFor(*pause);
        continue;
      }
      // A draining server answers UNAVAILABLE: the batch goes out again on a
      // fresh stream. A stream with a deadline carries one request.
      const bool unavailable = absl::IsUnavailable(FromBatchError(response.error()));
      if (unavailable || sent_ >= options.batches_per_stream ||
          options.stream_timeout != absl::InfiniteDuration()) {
        (void)End();
      }
      if (!unavailable || attempts >= options.max_attempts) return response;
    } else {
      const grpc::Status status = End();
      if (!Resendable(status)) return FromGrpc(status);
      if (attempts >= options.max_attempts) return Unanswered(request, attempts, status);
    }
    ++client_->resent_;
    BackOff(attempts);
  }
}

grpc::Status ClusterSession::End() {
  if (stream_ == nullptr) return grpc::Status::OK;
  stream_->WritesDone();
  // A stream that failed may still hold an answer; it is dropped.
  for (v1::ClusterResponse late; stream_->Read(&late);) {
  }
  const grpc::Status status = stream_->Finish();
  stream_.reset();
  context_.reset();
  return status;
}

}  // namespace kmt
