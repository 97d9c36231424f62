// The model directory read again every few milliseconds while its files
// change, raced by every user of the registry at once: ListModels, a batch
// on every model and version listed, /metrics, the health service, and
// UnloadModel/LoadModel. A call may fail only as the race allows (the model
// was removed, unloaded or refused between the listing and the call, and the
// message names it); the server stays up and stops cleanly on SIGTERM.
// KMT_STRESS_SECONDS sets each case's length (a short run by default);
// scripts/sanitize.sh stress-ci and stress run these cases under
// AddressSanitizer and ThreadSanitizer.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "proto/kmeans_transformer.grpc.pb.h"
#include "tests/integration/grpc_probe.h"
#include "tests/integration/model_files.h"
#include "tests/integration/server_process.h"

namespace kmt {
namespace {

namespace fs = std::filesystem;

// A bound on one call for a machine under load and a sanitizer, not a
// measure: a call that takes longer is a hung server.
std::chrono::system_clock::time_point CallDeadline() {
  return std::chrono::system_clock::now() + std::chrono::seconds(60);
}

// What the racing threads did: calls made by kind, and the calls that failed
// when they should not have (the first few, worded for the failure message).
// The first such failure ends every thread's loop: a crashed server fails
// each call after it, and the first is the one that says why.
class Tally {
 public:
  void Count(const std::string& kind) {
    std::lock_guard<std::mutex> lock(mu_);
    ++counts_[kind];
  }
  void Fail(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu_);
    if (failures_.size() < 10) failures_.push_back(what);
    failed_ = true;
  }
  bool failed() const { return failed_; }
  std::map<std::string, int64_t> counts() const {
    std::lock_guard<std::mutex> lock(mu_);
    return counts_;
  }
  std::vector<std::string> failures() const {
    std::lock_guard<std::mutex> lock(mu_);
    return failures_;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, int64_t> counts_;
  std::vector<std::string> failures_;
  std::atomic<bool> failed_{false};
};

std::string Describe(const grpc::Status& status) {
  return absl::StrCat(status.error_code(), " '", status.error_message(), "'");
}

// A failure the race allows: the model was removed, unloaded, or its file
// refused between the listing and the call, and the message says which
// model.
bool RaceAllows(int code, const std::string& message, const std::string& model) {
  const bool named = message.find(absl::StrCat("'", model, "'")) != std::string::npos ||
                     message.find(absl::StrCat(model, " version ")) != std::string::npos;
  return (code == grpc::StatusCode::NOT_FOUND || code == grpc::StatusCode::FAILED_PRECONDITION) &&
         named;
}

// Changes the model directory at random, as operators and tools do, one
// change at a time on one thread; each change is one the server must
// survive, and most leave something it can serve.
class Mutator {
 public:
  Mutator(fs::path dir, uint32_t seed) : dir_(std::move(dir)), random_(seed) {}

  // The directory's starting content: a model of every layout.
  void Populate() {
    for (const char* name : kVersioned) {
      PublishVersion(dir_, name, 1, Seed());
      PublishVersion(dir_, name, 2, Seed());
    }
    Publish(dir_ / "gamma.kmt", Seed(), "gamma");
    SwapConfigMap();
    SwapVersionLink();
  }

  // One change, chosen at random; returns what it was, for the count.
  std::string Step() {
    switch (Pick(10)) {
      case 0: {  // a version added, or removed and added again
        const fs::path version = VersionDir();
        fs::remove_all(version, ignored_);
        PublishVersion(dir_, version.parent_path().filename().string(),
                       std::stoi(version.filename().string()), Seed());
        return "add version";
      }
      case 1: {  // a file replaced by a rename
        const fs::path file = AnyFile();
        if (!fs::exists(file.parent_path(), ignored_)) return "replace (absent)";
        Publish(file, Seed(), ModelOf(file));
        return "replace";
      }
      case 2: {  // truncated in place
        const fs::path file = AnyFile();
        const std::string bytes = Bytes(Seed(), ModelOf(file));
        if (!Overwrite(file, bytes.substr(0, bytes.size() / 3))) return "truncate (absent)";
        return "truncate";
      }
      case 3: {  // garbage written in place
        std::string garbage(64 + Pick(512), '\0');
        for (char& c : garbage) c = static_cast<char>(Pick(256));
        if (!Overwrite(AnyFile(), garbage)) return "garbage (absent)";
        return "garbage";
      }
      case 4: {  // written in place in two parts, as a careless copy does
        const fs::path file = AnyFile();
        const std::string bytes = Bytes(Seed(), ModelOf(file));
        if (!Overwrite(file, bytes.substr(0, 40))) return "partial write (absent)";
        std::this_thread::sleep_for(std::chrono::milliseconds(Pick(5)));
        std::ofstream(file, std::ios::binary | std::ios::app) << bytes.substr(40);
        return "partial write";
      }
      case 5:  // a version or a whole model removed
        fs::remove_all(Pick(4) == 0 ? VersionDir().parent_path() : VersionDir(), ignored_);
        return "remove version";
      case 6:
        if (Pick(2) == 0) {
          fs::remove(dir_ / "gamma.kmt", ignored_);
          return "remove flat file";
        }
        Publish(dir_ / "gamma.kmt", Seed(), "gamma");
        return "add flat file";
      case 7:
        SwapConfigMap();
        return "symlink swap (ConfigMap)";
      case 8: {
        // Names are bytes on Linux: one that is not UTF-8 (Latin-1 "cafe"
        // with an accent), as a flat file and as a model directory.
        const fs::path flat = dir_ / "caf\xe9.kmt", versioned = dir_ / "caf\xe9" / "1";
        if (Pick(2) == 0) {
          fs::remove(flat, ignored_);
          fs::remove_all(versioned.parent_path(), ignored_);
          return "remove a file named in Latin-1";
        }
        Publish(Pick(2) == 0 ? flat : versioned / "model.kmt", Seed(), "latin");
        return "add a file named in Latin-1";
      }
      default:
        SwapVersionLink();
        return "symlink swap (version directory)";
    }
  }

 private:
  static constexpr const char* kVersioned[] = {"alpha", "beta"};

  uint32_t Pick(uint32_t n) { return std::uniform_int_distribution<uint32_t>(0, n - 1)(random_); }
  uint64_t Seed() { return 1 + Pick(5); }

  fs::path VersionDir() { return dir_ / kVersioned[Pick(2)] / std::to_string(1 + Pick(3)); }
  // A model file of any layout, existing or not.
  fs::path AnyFile() {
    switch (Pick(4)) {
      case 0:
        return dir_ / "gamma.kmt";
      case 1:
        return dir_ / "..data" / "delta.kmt";  // through the ConfigMap's symlinks
      case 2:
        return dir_ / "epsilon" / "1" / "model.kmt";  // through the version's symlink
      default:
        return VersionDir() / "model.kmt";
    }
  }
  // The model a file serves: its version directory's name, or its own.
  static std::string ModelOf(const fs::path& file) {
    if (file.filename() == "model.kmt") return file.parent_path().parent_path().filename().string();
    return file.stem().string();
  }
  // Rewrites an existing file in place (not renamed: readers may see it
  // half written); false if it is absent.
  bool Overwrite(const fs::path& file, const std::string& bytes) {
    if (!fs::exists(file, ignored_)) return false;
    std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
    return true;
  }
  // A Kubernetes ConfigMap update: delta.kmt -> ..data/delta.kmt, and a new
  // ..data -> ..N renamed over the old one, whose directory then goes.
  void SwapConfigMap() {
    const std::string next = absl::StrCat("..", ++swaps_);
    Publish(dir_ / next / "delta.kmt", Seed(), "delta");
    fs::create_directory_symlink(next, dir_ / "..data_tmp", ignored_);
    fs::rename(dir_ / "..data_tmp", dir_ / "..data", ignored_);
    if (!fs::is_symlink(dir_ / "delta.kmt", ignored_)) {
      fs::create_symlink("..data/delta.kmt", dir_ / "delta.kmt", ignored_);
    }
    fs::remove_all(dir_ / absl::StrCat("..", swaps_ - 1), ignored_);
  }
  // epsilon/1 a symlink to a version directory kept elsewhere, swapped for
  // a new one by a rename.
  void SwapVersionLink() {
    const std::string next = absl::StrCat(".store-", ++swaps_);
    Publish(dir_ / next / "model.kmt", Seed(), "epsilon");
    fs::create_directories(dir_ / "epsilon", ignored_);
    fs::create_directory_symlink(fs::path("..") / next, dir_ / "epsilon" / ".1-next", ignored_);
    const fs::path link = dir_ / "epsilon" / "1";
    const fs::path old = fs::read_symlink(link, ignored_);
    fs::rename(dir_ / "epsilon" / ".1-next", link, ignored_);
    if (!old.empty()) fs::remove_all(dir_ / "epsilon" / old, ignored_);
  }

  const fs::path dir_;
  std::mt19937 random_;
  std::error_code ignored_;
  int swaps_ = 0;
};

class ModelRepositoryStress : public testing::Test {
 protected:
  void Start(const std::vector<std::string>& extra) {
    const absl::StatusOr<absl::Duration> length = StressDuration();
    ASSERT_TRUE(length.ok()) << length.status();
    length_ = absl::ToChronoNanoseconds(*length);
    std::vector<std::string> flags = {"--model_dir=" + dir_.string()};
    flags.insert(flags.end(), extra.begin(), extra.end());
    server_ = ServerProcess::Start(flags);
    ASSERT_NE(server_, nullptr);
    channel_ = grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
    stub_ = v1::KMeansTransformer::NewStub(channel_);
  }

  // Runs each of `loops` on a thread of its own until the case's time is
  // up or a call fails that should not have.
  void Race(const std::vector<std::function<void()>>& loops) {
    const auto end = std::chrono::steady_clock::now() + length_;
    std::vector<std::thread> threads;
    for (const std::function<void()>& loop : loops) {
      threads.emplace_back([&, loop] {
        while (!tally_.failed() && std::chrono::steady_clock::now() < end) loop();
      });
    }
    for (std::thread& t : threads) t.join();
  }

  // ListModels: OK, every exact model listed; the answer, for the callers
  // that go on to use it.
  v1::ListModelsResponse ListOnce() {
    grpc::ClientContext context;
    context.set_deadline(CallDeadline());
    v1::ListModelsResponse response;
    const grpc::Status status = stub_->ListModels(&context, {}, &response);
    tally_.Count("ListModels");
    if (!status.ok()) {
      tally_.Fail("ListModels: " + Describe(status));
    } else if (response.models_size() == 0 || response.models(0).kind() != "exact") {
      tally_.Fail("ListModels lists no exact model first: " + response.ShortDebugString());
    }
    return response;
  }

  // Every case ends the same way: nothing failed, the server answers and
  // stops cleanly, and each kind of call was made (the counts are printed:
  // docs/hardening.md quotes them).
  void Finish(const std::vector<std::string>& kinds) {
    const std::map<std::string, int64_t> counts = tally_.counts();
    std::vector<std::string> lines;
    for (const auto& [kind, count] : counts) lines.push_back(absl::StrCat(kind, ": ", count));
    std::cout << "calls and changes in " << std::chrono::duration<double>(length_).count()
              << " s:\n  " << absl::StrJoin(lines, "\n  ") << std::endl;
    const std::string log = server_->Log();
    EXPECT_TRUE(tally_.failures().empty())
        << absl::StrJoin(tally_.failures(), "\n") << "\nthe server's log ends:\n"
        << log.substr(log.size() > 4000 ? log.size() - 4000 : 0);
    for (const std::string& kind : kinds) {
      EXPECT_GT(counts.count(kind) ? counts.at(kind) : 0, 0) << kind;
    }
    if (tally_.failed()) return;
    ListOnce();  // the server is still up
    EXPECT_FALSE(tally_.failed()) << absl::StrJoin(tally_.failures(), "\n");
    EXPECT_EQ(server_->Terminate(absl::Seconds(60)), 0) << server_->Log();
  }

  // Each case's length (StressDuration): long enough by default for a few
  // thousand scans and calls of each kind.
  std::chrono::nanoseconds length_{0};
  const fs::path dir_ = TempDir("stress-models");
  std::unique_ptr<ServerProcess> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::KMeansTransformer::Stub> stub_;
  Tally tally_;
};

// The crash's reproduction: a versioned model re-read every 10 ms (each
// scan publishes a new snapshot, changed or not) and ListModels in a loop.
TEST_F(ModelRepositoryStress, ListModelsWhileAVersionedModelIsReadAgainEvery10Ms) {
  PublishVersion(dir_, "v", 1, 1);
  PublishVersion(dir_, "v", 2, 2);
  Start({"--model_poll_s=0.01"});
  const auto list = [this] {
    const v1::ListModelsResponse listed = ListOnce();
    for (const v1::ModelInfo& m : listed.models()) {
      if (m.name() != "v") continue;
      if (m.default_version() != 2 || m.versions_size() != 2) {
        tally_.Fail("model v listed as " + m.ShortDebugString());
      }
      return;
    }
    if (!tally_.failed()) tally_.Fail("ListModels does not list model v");
  };
  Race({list, list});
  Finish({"ListModels"});
}

TEST_F(ModelRepositoryStress, EveryCallerRacesFilesChangingUnderAFiveMillisecondPoll) {
  Mutator mutator(dir_, /*seed=*/51);
  mutator.Populate();
  Start({"--model_poll_s=0.005", "--model_control"});

  const auto change = [&] {
    tally_.Count(mutator.Step());
    tally_.Count("directory change");
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  };
  const auto list = [this] { ListOnce(); };
  // One stream per thread, one batch at a time, on every model and version
  // just listed: answered, or refused as the race allows.
  const auto cluster = [this] {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + length_ + std::chrono::minutes(5));
    const auto stream = stub_->Cluster(&context);
    const auto run = [&](const std::string& model, int64_t version, bool exact) {
      v1::ClusterResponse response;
      if (!stream->Write(ModelBatch(model, version)) || !stream->Read(&response)) {
        stream->WritesDone();
        tally_.Fail(absl::StrCat("Cluster stream broke at ", model, " version ", version, ": ",
                                 Describe(stream->Finish())));
        return false;
      }
      tally_.Count("Cluster batch");
      if (!response.has_error()) {
        tally_.Count(exact ? "Cluster OK (exact model)" : "Cluster OK (directory model)");
      } else if (RaceAllows(response.error().code(), response.error().message(), model)) {
        tally_.Count("Cluster refused as the race allows");
      } else {
        tally_.Fail(absl::StrCat("Cluster on ", model, " version ", version, ": ",
                                 response.error().code(), " '", response.error().message(), "'"));
      }
      return true;
    };
    // One listing per stream: streams come and go, as clients do.
    const v1::ListModelsResponse listed = ListOnce();
    for (const auto* list : {&listed.models(), &listed.unavailable()}) {
      for (const v1::ModelInfo& m : *list) {
        if (!run(m.name(), 0, m.kind() == "exact")) return;
        for (const v1::ModelVersion& v : m.versions()) {
          if (!run(m.name(), v.version(), m.kind() == "exact")) return;
        }
      }
    }
    stream->WritesDone();
    const grpc::Status status = stream->Finish();
    if (!status.ok() && !tally_.failed()) tally_.Fail("Cluster stream ended " + Describe(status));
  };
  const auto metrics = [this] {
    const std::string text = MetricsText(server_->metrics_port());
    tally_.Count("GET /metrics");
    if (text.find("\nkmt_model_loads_total ") == std::string::npos) {
      tally_.Fail("/metrics has no kmt_model_loads_total: '" + text.substr(0, 200) + "'");
    }
  };
  const char* const probed[] = {"", "kmt.v1.KMeansTransformer", "alpha", "gamma", "delta"};
  std::atomic<int> probes{0};
  const auto health = [&] {
    const std::string service = probed[probes++ % std::size(probed)];
    const absl::StatusOr<int> status = HealthStatus(server_->address(), service);
    tally_.Count("grpc.health.v1 Check");
    // A model is SERVING or NOT_SERVING once it has been seen; the server
    // itself is always SERVING.
    const bool model = service.find('.') == std::string::npos && !service.empty();
    if (status.ok() ? !(*status == 1 || (model && *status == 2))
                    : !(model && absl::IsNotFound(status.status()))) {
      tally_.Fail(absl::StrCat("health of '", service, "': ",
                               status.ok() ? absl::StrCat(*status) : status.status().ToString()));
    }
  };
  std::mt19937 control_random(7);
  const auto control = [&] {
    const char* const names[] = {"alpha", "beta", "gamma", "delta", "epsilon"};
    const std::string name = names[control_random() % std::size(names)];
    const int64_t version = control_random() % 4;
    for (const bool unload : {true, false}) {
      grpc::ClientContext context;
      context.set_deadline(CallDeadline());
      v1::ModelControlResponse response;
      grpc::Status status;
      if (unload) {
        v1::UnloadModelRequest request;
        request.set_name(name);
        request.set_version(version);
        status = stub_->UnloadModel(&context, request, &response);
      } else {
        v1::LoadModelRequest request;
        request.set_name(name);
        request.set_version(version);
        status = stub_->LoadModel(&context, request, &response);
      }
      const std::string rpc = unload ? "UnloadModel" : "LoadModel";
      tally_.Count(rpc);
      if (status.ok()) {
        tally_.Count(rpc + " OK");
      } else if (!RaceAllows(status.error_code(), status.error_message(), name)) {
        tally_.Fail(absl::StrCat(rpc, " ", name, " version ", version, ": ", Describe(status)));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  };
  Race({change, list, cluster, cluster, metrics, health, control});
  Finish({"directory change", "ListModels", "Cluster OK (exact model)",
          "Cluster OK (directory model)", "Cluster refused as the race allows", "GET /metrics",
          "grpc.health.v1 Check", "UnloadModel OK", "LoadModel OK"});
}

}  // namespace
}  // namespace kmt
