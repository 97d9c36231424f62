// Keeps what the server says about its models in step with the registry:
// after every scan of the model directory (the poll's, or an operator's
// LoadModel/UnloadModel) it logs what changed, moves the metrics and sets
// each model's health (SERVING while a version is available). The poll reads
// the directory every `period` on a thread of its own.
#ifndef KMT_SERVER_MODEL_RELOADER_H_
#define KMT_SERVER_MODEL_RELOADER_H_

#include <grpcpp/health_check_service_interface.h>

#include <condition_variable>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "absl/time/time.h"
#include "server/metrics.h"
#include "server/model_registry.h"

namespace kmt {

class ModelReloader {
 public:
  ModelReloader(ModelRegistry* registry, Metrics* metrics);
  // Stops the poll.
  ~ModelReloader();

  // Logs, counts and publishes one scan's report.
  void Published(const ScanReport& report);
  // From now on each model's health is set on `health` (null: not at all),
  // starting with the models known now.
  void SetHealth(grpc::HealthCheckServiceInterface* health);
  // Scans every `period` until Stop (a zero period: never).
  void StartPolling(absl::Duration period);
  // Ends the poll and leaves health alone (the drain has set it).
  void Stop();

 private:
  void UpdateHealthLocked();

  ModelRegistry* const registry_;
  Metrics* const metrics_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopped_ = false;
  grpc::HealthCheckServiceInterface* health_ = nullptr;
  std::set<std::string> health_names_;  // model names whose health was set
  std::thread poll_;
};

}  // namespace kmt

#endif  // KMT_SERVER_MODEL_RELOADER_H_
