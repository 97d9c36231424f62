#include "server/cluster_service.h"

#include <grpcpp/alarm.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "proto/batch_error.h"
#include "proto/reactor_order.h"
#include "server/batch_runner.h"
#include "server/grpc_status.h"
#include "server/job_reactor.h"
#include "server/log.h"

namespace kmt {

// One Cluster stream, one flow of the worker pool's fair queue (a batch
// costs its bytes). Batches are numbered as read; a finished batch waits
// in `ready_` until every earlier one has been written. Reading pauses while
// `max_in_flight` batches are unanswered, and while a batch refused for the
// budget is not yet written. The stream finishes once reading
// has ended (or the call is cancelled) and every batch read has been
// answered (written, or dropped when the call is gone), so no pool task
// outlives the reactor.
class ClusterReactor final
    : public grpc::ServerBidiReactor<v1::ClusterRequest, v1::ClusterResponse> {
 public:
  ClusterReactor(ClusterService* service, grpc::CallbackServerContext* context)
      : service_(service), context_(context) {
    ++service_->open_streams_;
    service_->metrics_->StreamStarted();
    order_.Release(ReactorOrder::kCreated);
    Read();
  }

  void OnReadDone(bool ok) override {
    ReactorOrder::Reaction reaction(&order_, ReactorOrder::kRead);
    const auto received = std::chrono::steady_clock::now();
    std::shared_ptr<v1::ClusterRequest> batch;
    int64_t number;
    {
      // Whether the call is still on and the batch's number are decided
      // under one lock: a cancellation in between would find every batch
      // answered and finish the call, and the batch's task would then answer
      // on a reactor gRPC has deleted. reading_ stays true until the next
      // read is decided below, so that no answer starts one meanwhile.
      std::unique_lock<std::mutex> lock(mu_);
      if (!ok || cancelled_) {
        // A batch read after the cancellation is dropped: nobody waits for it.
        reading_ = false;
        reads_done_ = true;
        Advance(lock);
        return;
      }
      batch = std::make_shared<v1::ClusterRequest>(std::move(request_));
      request_.Clear();
      number = read_++;
    }
    if (service_->draining_) {
      service_->metrics_->RecordRefused("draining");
      Answer(number, *batch, received,
             ErrorResponse(*batch, absl::UnavailableError(
                                       "server is shutting down; send this batch to another "
                                       "replica")));
    } else if (!Admit(number, batch, received)) {
      // Reading waits until the refusal is written (Advance): a client that
      // keeps many batches in flight sees the pushback before the server
      // reads, and refuses, the rest of them one by one.
      std::lock_guard<std::mutex> lock(mu_);
      refused_through_ = number;
    }
    std::unique_lock<std::mutex> lock(mu_);
    reading_ = false;
    Advance(lock);
  }

  void OnWriteDone(bool ok) override {
    ReactorOrder::Reaction reaction(&order_, ReactorOrder::kWrite);
    std::unique_lock<std::mutex> lock(mu_);
    writing_ = false;
    ++written_;
    writable_ = writable_ && ok;
    Advance(lock);
  }

  // A cancelled call may leave its pending read without a reaction until
  // the call is finished (seen with a client that stopped reading and then
  // cancelled): finish once every batch read has its answer, without
  // waiting for the read.
  void OnCancel() override {
    ReactorOrder::Reaction reaction(&order_, ReactorOrder::kCreated);
    std::unique_lock<std::mutex> lock(mu_);
    cancelled_ = true;
    Advance(lock);
  }

  void OnDone() override {
    order_.Acquire(ReactorOrder::kDone);
    service_->metrics_->StreamEnded();
    --service_->open_streams_;
    delete this;
  }

 private:
  void Read() {
    order_.Release(ReactorOrder::kRead);
    StartRead(&request_);
  }

  // Charges the batch against the budget and queues it, or answers it
  // refused (false). Refused at once rather than queued: holding it would
  // let the queue grow with the clients' offer, where the pushback makes
  // them wait on their side.
  bool Admit(int64_t number, const std::shared_ptr<v1::ClusterRequest>& batch,
             std::chrono::steady_clock::time_point received) {
    const int64_t bytes = static_cast<int64_t>(batch->ByteSizeLong());
    if (absl::Status admitted = service_->held_.Admit(bytes, held_); !admitted.ok()) {
      service_->metrics_->RecordRefused(
          RetryPushbackMs(admitted).value_or(0) < 0 ? "larger_than_budget" : "held_bytes");
      Answer(number, *batch, received, ErrorResponse(*batch, admitted));
      return false;
    }
    held_ += bytes;
    service_->pool_->Submit(flow_, bytes, [this, number, batch, received, bytes] {
      const double queued = Seconds(received);
      // Between its layers a batch lets much smaller ones queued behind it
      // run first (WorkerPool::RunCheaper).
      v1::ClusterResponse response =
          RunBatch(*service_->registry_, service_->limits_, *batch, [this, bytes] {
            service_->pool_->RunCheaper(bytes);
            return CallStatus(context_, arrived_);
          });
      response.mutable_timing()->set_queue_seconds(queued);
      // The request's bytes go with this task; the response is the
      // batch's labels and centers, a small part of them.
      held_ -= bytes;
      service_->held_.Release(bytes);
      Answer(number, *batch, received, std::move(response));
    });
    return true;
  }

  static double Seconds(std::chrono::steady_clock::time_point since) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
  }

  // Records the batch's metrics and queues its response for writing.
  void Answer(int64_t number, const v1::ClusterRequest& batch,
              std::chrono::steady_clock::time_point received, v1::ClusterResponse response) {
    service_->metrics_->RecordBatch(batch, response, Seconds(received));
    std::unique_lock<std::mutex> lock(mu_);
    ready_.emplace(number, std::move(response));
    Advance(lock);
  }

  // Starts what the state allows: the next write, more reading, or the end
  // of the call. gRPC operations are started with the lock released.
  void Advance(std::unique_lock<std::mutex>& lock) {
    bool write = false, read = false, finish = false, linger = false;
    if (!writing_) {
      auto next = ready_.find(written_);
      if (next != ready_.end()) {
        if (writable_) {
          writing_ = write = true;
          response_ = std::move(next->second);
        } else {
          ++written_;  // the client is gone: drop the answer
        }
        ready_.erase(next);
      }
    }
    if (!reads_done_ && !cancelled_ && !reading_ && written_ > refused_through_ &&
        read_ - written_ < static_cast<int64_t>(service_->max_in_flight_)) {
      reading_ = read = true;
    }
    if ((reads_done_ || cancelled_) && !writing_ && written_ == read_ && !finished_) {
      finished_ = finish = true;
      linger = service_->draining_ && !cancelled_ && written_ > 0 &&
               service_->drain_linger_ > absl::ZeroDuration();
    }
    // A dropped answer may have unblocked the next one.
    if (!writable_ && !write && ready_.count(written_)) return Advance(lock);
    lock.unlock();
    if (write) {
      order_.Release(ReactorOrder::kWrite);
      StartWrite(&response_);
    }
    if (read) Read();
    if (!finish) return;
    // Once the server has begun shutting down, gRPC closes a connection as
    // soon as its last call ends; if the client has sent anything the
    // server has not read (flow-control updates while it reads answers),
    // the close resets the connection, and answers still in the server's
    // send queue are lost. So while draining, a stream that answered
    // batches ends `drain_linger` after its last answer was handed to gRPC,
    // time for the client to read them.
    if (linger) {
      order_.Release(ReactorOrder::kAlarm);
      linger_.Set(absl::ToChronoTime(absl::Now() + service_->drain_linger_), [this](bool) {
        order_.Acquire(ReactorOrder::kAlarm);
        End();
      });
    } else {
      End();
    }
  }

  void End() {
    const absl::Status status = CallStatus(context_, arrived_);
    service_->metrics_->RecordStreamEnd(static_cast<int>(status.code()));
    order_.Release(ReactorOrder::kDone);
    Finish(ToGrpcStatus(status));
  }

  ClusterService* const service_;
  grpc::CallbackServerContext* const context_;
  const uint64_t flow_ = service_->pool_->NewFlow();  // the stream's share of the workers
  std::atomic<int64_t> held_{0};  // bytes of this stream's batches admitted, not yet answered
  const std::chrono::system_clock::time_point arrived_ = std::chrono::system_clock::now();
  v1::ClusterRequest request_;    // the read in progress
  v1::ClusterResponse response_;  // the write in progress
  ReactorOrder order_;
  grpc::Alarm linger_;  // ends the stream while draining (Advance)

  std::mutex mu_;
  int64_t read_ = 0;              // batches read
  int64_t written_ = 0;           // batches answered (written or dropped)
  int64_t refused_through_ = -1;  // the last batch refused for the budget
  std::map<int64_t, v1::ClusterResponse> ready_;
  bool reading_ = true;
  bool reads_done_ = false;
  bool writing_ = false;
  bool writable_ = true;
  bool finished_ = false;
  bool cancelled_ = false;
};

ClusterService::ClusterService(ModelRegistry* registry, Limits limits, WorkerPool* pool,
                               Metrics* metrics, int max_in_flight, absl::Duration drain_linger,
                               ModelControl control, ModelReloader* reloader)
    : registry_(registry),
      limits_(limits),
      pool_(pool),
      metrics_(metrics),
      max_in_flight_(static_cast<size_t>(max_in_flight)),
      drain_linger_(drain_linger),
      held_(limits.max_held_bytes,
            [metrics](int64_t held, int64_t budget) { metrics->SetHeldBytes(held, budget); }),
      resident_(limits.max_resident_bytes),
      job_environment_{.limits = limits,
                       .pool = pool,
                       .metrics = metrics,
                       .memory = &resident_,
                       .draining = &draining_,
                       .open_streams = &open_streams_},
      control_(std::move(control)),
      reloader_(reloader) {
  metrics_->SetResidentBytes(0, resident_.cap());
}

grpc::ServerBidiReactor<v1::ClusterRequest, v1::ClusterResponse>* ClusterService::Cluster(
    grpc::CallbackServerContext* context) {
  return new ClusterReactor(this, context);
}

grpc::ServerBidiReactor<v1::JobRequest, v1::JobResponse>* ClusterService::Job(
    grpc::CallbackServerContext* context) {
  return new JobReactor(&job_environment_, context);
}

grpc::ServerUnaryReactor* ClusterService::ListModels(grpc::CallbackServerContext* context,
                                                     const v1::ListModelsRequest*,
                                                     v1::ListModelsResponse* response) {
  const absl::Status status = Handled([&] {
    *response = registry_->List();
    for (v1::ModelInfo& info : *response->mutable_models()) {
      info.set_max_points(limits_.max_points);
    }
    return absl::OkStatus();
  });
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

absl::Status ClusterService::MayControl(const grpc::CallbackServerContext* context) const {
  if (!control_.enabled) {
    return absl::PermissionDeniedError(
        "model control is off on this server: its operator allows it with --model_control");
  }
  if (!control_.tls) return absl::OkStatus();
  std::vector<std::string> names;
  const std::shared_ptr<const grpc::AuthContext> auth = context->auth_context();
  if (auth != nullptr) {
    for (const char* property : {"x509_subject_alternative_name", "x509_common_name"}) {
      for (const grpc::string_ref& value : auth->FindPropertyValues(property)) {
        names.emplace_back(value.data(), value.size());
      }
    }
  }
  for (const std::string& name : names) {
    if (control_.clients.count(name)) return absl::OkStatus();
  }
  if (names.empty()) {
    return absl::PermissionDeniedError(
        "model control needs a client certificate that --model_control_clients names; this "
        "client presented none");
  }
  return absl::PermissionDeniedError(
      absl::StrCat("the client certificate (", absl::StrJoin(names, ", "),
                   ") is not one that --model_control_clients names"));
}

grpc::ServerUnaryReactor* ClusterService::Control(grpc::CallbackServerContext* context,
                                                  absl::string_view rpc, const std::string& name,
                                                  int64_t version, RegistryChange change,
                                                  v1::ModelControlResponse* response) {
  const absl::Status status = Handled([&] {
    ScanReport report;
    absl::Status changed = MayControl(context);
    if (changed.ok()) changed = (registry_->*change)(name, version, &report);
    Log("INFO", absl::StrCat(rpc, " ", name, " version ", version, " from ", context->peer(), ": ",
                             changed.ok() ? "OK" : changed.ToString()));
    if (reloader_ != nullptr) reloader_->Published(report);
    if (absl::StatusOr<v1::ModelInfo> info = registry_->Describe(name); info.ok()) {
      *response->mutable_model() = *std::move(info);
    }
    return changed;
  });
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

grpc::ServerUnaryReactor* ClusterService::LoadModel(grpc::CallbackServerContext* context,
                                                    const v1::LoadModelRequest* request,
                                                    v1::ModelControlResponse* response) {
  return Control(context, "LoadModel", request->name(), request->version(),
                 &ModelRegistry::LoadModel, response);
}

grpc::ServerUnaryReactor* ClusterService::UnloadModel(grpc::CallbackServerContext* context,
                                                      const v1::UnloadModelRequest* request,
                                                      v1::ModelControlResponse* response) {
  return Control(context, "UnloadModel", request->name(), request->version(),
                 &ModelRegistry::UnloadModel, response);
}

}  // namespace kmt
