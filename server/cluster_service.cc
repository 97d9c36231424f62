#include "server/cluster_service.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <thread>

#include "server/batch_runner.h"

namespace kmt {
namespace {

// Why the work of a call should stop, if it should.
absl::Status CallStatus(const grpc::ServerContext* context) {
  if (!context->IsCancelled()) return absl::OkStatus();
  if (context->deadline() <= std::chrono::system_clock::now()) {
    return absl::DeadlineExceededError("the call's deadline passed");
  }
  return absl::CancelledError("the call was cancelled");
}

}  // namespace

ClusterService::ClusterService(const ModelRegistry* registry, Limits limits,
                               WorkerPool* pool, int max_in_flight)
    : registry_(registry),
      limits_(limits),
      pool_(pool),
      max_in_flight_(static_cast<size_t>(max_in_flight)) {}

grpc::Status ClusterService::ListModels(grpc::ServerContext*,
                                        const v1::ListModelsRequest*,
                                        v1::ListModelsResponse* response) {
  for (const ServedModel& m : registry_->models()) *response->add_models() = m.info;
  return grpc::Status::OK;
}

grpc::Status ClusterService::Cluster(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::ClusterResponse, v1::ClusterRequest>* stream) {
  // Responses leave in request order: the reader queues one future per
  // batch, the writer waits for them front to back.
  std::mutex mu;
  std::condition_variable changed;
  std::deque<std::future<v1::ClusterResponse>> pending;
  bool reading_done = false;

  std::thread writer([&] {
    bool writable = true;
    for (;;) {
      std::future<v1::ClusterResponse> next;
      {
        std::unique_lock<std::mutex> lock(mu);
        changed.wait(lock, [&] { return !pending.empty() || reading_done; });
        if (pending.empty()) return;
        next = std::move(pending.front());
      }
      v1::ClusterResponse response = next.get();
      {
        std::lock_guard<std::mutex> lock(mu);
        pending.pop_front();
      }
      changed.notify_all();
      writable = writable && stream->Write(response);
    }
  });

  v1::ClusterRequest request;
  while (stream->Read(&request)) {
    const auto received = std::chrono::steady_clock::now();
    auto promise = std::make_shared<std::promise<v1::ClusterResponse>>();
    {
      std::unique_lock<std::mutex> lock(mu);
      changed.wait(lock, [&] { return pending.size() < max_in_flight_; });
      pending.push_back(promise->get_future());
    }
    changed.notify_all();
    if (draining_) {
      promise->set_value(ErrorResponse(
          request, absl::UnavailableError(
                       "server is shutting down; send this batch to another replica")));
      continue;
    }
    auto batch = std::make_shared<v1::ClusterRequest>(std::move(request));
    request.Clear();
    pool_->Submit([this, context, promise, batch, received] {
      const double queued =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - received)
              .count();
      v1::ClusterResponse response = RunBatch(
          *registry_, limits_, *batch, [context] { return CallStatus(context); });
      response.mutable_timing()->set_queue_seconds(queued);
      promise->set_value(std::move(response));
    });
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    reading_done = true;
  }
  changed.notify_all();
  writer.join();
  const absl::Status status = CallStatus(context);
  if (!status.ok()) {
    return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                        std::string(status.message()));
  }
  return grpc::Status::OK;
}

}  // namespace kmt
