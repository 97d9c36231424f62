#include "server/model_reloader.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "server/log.h"

namespace kmt {

ModelReloader::ModelReloader(ModelRegistry* registry, Metrics* metrics)
    : registry_(registry), metrics_(metrics) {}

ModelReloader::~ModelReloader() { Stop(); }

void ModelReloader::Published(const ScanReport& report) {
  for (const auto& [line, reason] : report.refused) {
    Log("ERROR", absl::StrCat("refused ", line));
    metrics_->RecordLoadFailure(reason);
  }
  for (const std::string& loaded : report.loaded) {
    Log("INFO", absl::StrCat("serving ", loaded));
    metrics_->RecordModelLoaded();
  }
  for (const std::string& retired : report.retired) Log("INFO", absl::StrCat("retired ", retired));
  metrics_->SetModels(*registry_);
  std::lock_guard<std::mutex> lock(mu_);
  UpdateHealthLocked();
}

void ModelReloader::SetHealth(grpc::HealthCheckServiceInterface* health) {
  std::lock_guard<std::mutex> lock(mu_);
  health_ = health;
  UpdateHealthLocked();
}

// A model's health name is its name: SERVING while it has a version
// available, NOT_SERVING once it has none (gRPC's health service cannot
// forget a name, and a probe of a retired model should fail, not pass).
void ModelReloader::UpdateHealthLocked() {
  if (health_ == nullptr || stopped_) return;
  const v1::ListModelsResponse listed = registry_->List();
  std::set<std::string> names;
  for (const v1::ModelInfo& m : listed.models()) {
    health_->SetServingStatus(m.name(), true);
    names.insert(m.name());
  }
  for (const v1::ModelInfo& m : listed.unavailable()) {
    health_->SetServingStatus(m.name(), false);
    names.insert(m.name());
  }
  for (const std::string& gone : health_names_) {
    if (!names.count(gone)) health_->SetServingStatus(gone, false);
  }
  health_names_.insert(names.begin(), names.end());
}

void ModelReloader::StartPolling(absl::Duration period) {
  if (period <= absl::ZeroDuration()) return;
  poll_ = std::thread([this, period] {
    std::unique_lock<std::mutex> lock(mu_);
    while (!wake_.wait_for(lock, absl::ToChronoNanoseconds(period), [this] { return stopped_; })) {
      lock.unlock();
      Published(registry_->Scan());
      lock.lock();
    }
  });
}

void ModelReloader::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
  }
  wake_.notify_all();
  if (poll_.joinable()) poll_.join();
}

}  // namespace kmt
