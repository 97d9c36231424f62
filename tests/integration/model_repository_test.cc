// The model directory of a running server, changed under it: models added,
// replaced and removed while a stream runs batches back to back (none fails,
// each is answered by one whole version), a corrupt file beside a good one,
// a partial write completed later, a Kubernetes-style symlink swap,
// versions and the default, start-up with --require_models, and the control
// RPCs refused unless the operator allows them.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/engine.h"
#include "core/simd.h"
#include "proto/kmeans_transformer.grpc.pb.h"
#include "proto/model_file.h"
#include "proto/raw_payload.h"
#include "proto/request.h"
#include "tests/integration/grpc_probe.h"
#include "tests/integration/model_files.h"
#include "tests/integration/server_process.h"

namespace kmt {
namespace {

namespace fs = std::filesystem;

// What the weights of `seed` answer to ModelBatch, computed here.
std::vector<float> Expected(uint64_t seed) {
  absl::StatusOr<Model<float>> weights = ModelFromProto<float>(ModelFor(seed, "x"));
  EXPECT_TRUE(weights.ok()) << weights.status();
  absl::StatusOr<ServedModel<float>> model = ServedModel<float>::FromWeights(*weights, "");
  EXPECT_TRUE(model.ok()) << model.status();
  absl::StatusOr<RunResult<float>> run = Cluster(*model, *BatchFromRequest(ModelBatch("x")));
  EXPECT_TRUE(run.ok()) << run.status();
  v1::ClusterResponse response;
  FillResponse(ModelBatch("x"), *run, &response);
  return {response.centers().begin(), response.centers().end()};
}

// Polls `condition` until it holds or a minute has passed (a bound for a
// machine under load, not a measure).
bool Eventually(const std::function<bool()>& condition) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(1);
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return condition();
}

// The SIMD level the server and this process both run: KMT_SIMD's if set,
// else the highest this CPU has. A learned model's attention adds its
// products in another order at another packet width, so Expected's centers
// equal the server's only at one level; under `auto` each process would
// time its own choice.
std::string SharedSimdLevel() {
  const char* env = std::getenv("KMT_SIMD");
  if (env != nullptr && *env != '\0' && std::string(env) != "auto") return env;
  return SimdLevelName(SupportedSimdLevels().back());
}

class ModelRepository : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    const absl::Status pinned = UseSimdLevel(SharedSimdLevel());
    ASSERT_TRUE(pinned.ok()) << pinned;
  }

  void Start(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> flags = {"--model_dir=" + dir_.string(), "--model_poll_s=0.1",
                                      "--workers=1", "--simd=" + SharedSimdLevel()};
    flags.insert(flags.end(), extra.begin(), extra.end());
    server_ = ServerProcess::Start(flags);
    ASSERT_NE(server_, nullptr);
    stub_ = v1::KMeansTransformer::NewStub(
        grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    if (server_ != nullptr) {
      EXPECT_EQ(server_->Terminate(absl::Seconds(30)), 0) << server_->Log();
    }
  }

  v1::ListModelsResponse List() {
    grpc::ClientContext context;
    v1::ListModelsResponse response;
    EXPECT_TRUE(stub_->ListModels(&context, {}, &response).ok());
    return response;
  }
  // The model as ListModels lists it, available or not; empty if absent.
  v1::ModelInfo Listed(const std::string& name) {
    const v1::ListModelsResponse listed = List();
    for (const auto* list : {&listed.models(), &listed.unavailable()}) {
      for (const v1::ModelInfo& m : *list) {
        if (m.name() == name) return m;
      }
    }
    return {};
  }
  int64_t DefaultVersion(const std::string& name) { return Listed(name).default_version(); }
  v1::ModelVersion VersionOf(const std::string& name, int64_t version) {
    const v1::ModelInfo listed = Listed(name);
    for (const v1::ModelVersion& v : listed.versions()) {
      if (v.version() == version) return v;
    }
    return {};
  }
  v1::ClusterResponse Run(const v1::ClusterRequest& request) {
    grpc::ClientContext context;
    auto stream = stub_->Cluster(&context);
    v1::ClusterResponse response;
    EXPECT_TRUE(stream->Write(request));
    stream->WritesDone();
    EXPECT_TRUE(stream->Read(&response));
    EXPECT_TRUE(stream->Finish().ok());
    return response;
  }
  double Metric(const std::string& series) {
    const std::map<std::string, double> all = ScrapeMetrics(server_->metrics_port());
    const auto it = all.find(series);
    return it == all.end() ? -1 : it->second;
  }

  fs::path dir_ = TempDir("models");
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<v1::KMeansTransformer::Stub> stub_;
};

// A stream that sends `model`'s batch and reads its answer back to back,
// on a thread, until stopped: every answer kept.
class BusyStream {
 public:
  BusyStream(v1::KMeansTransformer::Stub* stub, const std::string& model)
      : stream_(stub->Cluster(&context_)), thread_([this, model] {
          const v1::ClusterRequest request = ModelBatch(model);
          while (!stop_) {
            v1::ClusterResponse response;
            if (!stream_->Write(request) || !stream_->Read(&response)) break;
            std::lock_guard<std::mutex> lock(mu_);
            responses_.push_back(std::move(response));
          }
          stream_->WritesDone();
          status_ = stream_->Finish();
        }) {}
  // Answers from `version` so far.
  int From(int64_t version) {
    std::lock_guard<std::mutex> lock(mu_);
    int count = 0;
    for (const v1::ClusterResponse& r : responses_) count += r.model_version() == version;
    return count;
  }
  std::vector<v1::ClusterResponse> Stop() {
    stop_ = true;
    thread_.join();
    EXPECT_TRUE(status_.ok()) << status_.error_message();
    return responses_;
  }

 private:
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::ClusterRequest, v1::ClusterResponse>> stream_;
  std::atomic<bool> stop_{false};
  grpc::Status status_;
  std::mutex mu_;
  std::vector<v1::ClusterResponse> responses_;
  std::thread thread_;
};

TEST_F(ModelRepository, AddReplaceAndRemoveWhileAStreamRunsFailNoBatch) {
  PublishVersion(dir_, "m", 1, /*seed=*/1);
  Start();
  BusyStream stream(stub_.get(), "m");
  ASSERT_TRUE(Eventually([&] { return stream.From(1) >= 5; }));

  PublishVersion(dir_, "m", 2, /*seed=*/2);  // added
  ASSERT_TRUE(Eventually([&] { return stream.From(2) >= 5; }));
  Publish(dir_ / "m" / "2" / "model.kmt", /*seed=*/3, "m");  // replaced
  ASSERT_TRUE(Eventually([&] { return Listed("m").description() == "seed 3"; }));
  const int before = stream.From(2);
  ASSERT_TRUE(Eventually([&] { return stream.From(2) >= before + 5; }));
  fs::remove_all(dir_ / "m" / "2");  // removed: back to version 1
  ASSERT_TRUE(Eventually([&] { return DefaultVersion("m") == 1; }));
  const int ones = stream.From(1);
  ASSERT_TRUE(Eventually([&] { return stream.From(1) >= ones + 5; }));
  const std::vector<v1::ClusterResponse> responses = stream.Stop();

  // Each answer is one whole version's: the centers that version's weights
  // give, never a mix.
  const std::map<int64_t, std::vector<std::vector<float>>> answers = {
      {1, {Expected(1)}}, {2, {Expected(2), Expected(3)}}};
  std::map<std::vector<float>, int> seen;
  for (const v1::ClusterResponse& r : responses) {
    ASSERT_FALSE(r.has_error()) << r.error().message();
    ASSERT_TRUE(answers.count(r.model_version())) << r.model_version();
    const std::vector<float> centers(r.centers().begin(), r.centers().end());
    const auto& allowed = answers.at(r.model_version());
    EXPECT_TRUE(std::find(allowed.begin(), allowed.end(), centers) != allowed.end())
        << "version " << r.model_version();
    ++seen[centers];
  }
  EXPECT_EQ(seen.size(), 3u);  // every file served
  EXPECT_EQ(VersionOf("m", 2).state(), v1::MODEL_VERSION_RETIRED);
  EXPECT_EQ(Metric("kmt_batches_total{code=\"OK\",model=\"m\"}"),
            static_cast<double>(responses.size()));
}

TEST_F(ModelRepository, ACorruptFileBesideAGoodOneIsRefusedAndTheGoodOneServes) {
  Publish(dir_ / "good.kmt", 1, "good");
  std::ofstream(dir_ / "bad.kmt") << "not a model";
  Start();
  EXPECT_FALSE(Run(ModelBatch("good")).has_error());
  const v1::ModelInfo bad = Listed("bad");
  ASSERT_EQ(bad.versions_size(), 1);
  EXPECT_EQ(bad.versions(0).state(), v1::MODEL_VERSION_FAILED);
  EXPECT_NE(bad.versions(0).reason().find("protobuf parse failed"), std::string::npos);
  EXPECT_EQ(Metric("kmt_model_load_failures_total{reason=\"corrupt\"}"), 1);
  EXPECT_EQ(Metric("kmt_model_versions{state=\"failed\"}"), 1);
  EXPECT_EQ(HealthStatus(server_->address(), "good").value_or(0), 1);
  EXPECT_EQ(HealthStatus(server_->address(), "bad").value_or(0), 2);  // NOT_SERVING
  const v1::ClusterResponse refused = Run(ModelBatch("bad"));
  EXPECT_EQ(refused.error().code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(refused.error().message().find("has no version available"), std::string::npos);

  // The good model's file truncated in place: refused, and version 1 goes on.
  const std::string bytes = Bytes(1, "good");
  std::ofstream(dir_ / "good.kmt", std::ios::binary | std::ios::trunc)
      << bytes.substr(0, bytes.size() / 3);
  ASSERT_TRUE(Eventually([&] {
    return Metric("kmt_model_load_failures_total{reason=\"corrupt\"}") == 2;
  })) << server_->Log();
  EXPECT_EQ(VersionOf("good", 1).state(), v1::MODEL_VERSION_AVAILABLE);
  EXPECT_NE(VersionOf("good", 1).reason().find("the version loaded before serves"),
            std::string::npos);
  const v1::ClusterResponse still = Run(ModelBatch("good"));
  ASSERT_FALSE(still.has_error()) << still.error().message();
  EXPECT_EQ(std::vector<float>(still.centers().begin(), still.centers().end()), Expected(1));
  EXPECT_NE(server_->Log().find("ERROR refused " + (dir_ / "bad.kmt").string()), std::string::npos);
}

TEST_F(ModelRepository, APartialWriteIsServedOnceCompleted) {
  PublishVersion(dir_, "p", 1, 1);
  Start();
  // Written in place, in two parts, as a careless copy would.
  const std::string bytes = Bytes(2, "p");
  fs::create_directories(dir_ / "p" / "2");
  std::ofstream(dir_ / "p" / "2" / "model.kmt", std::ios::binary) << bytes.substr(0, 40);
  ASSERT_TRUE(Eventually([&] { return VersionOf("p", 2).version() == 2; }));
  EXPECT_NE(VersionOf("p", 2).state(), v1::MODEL_VERSION_AVAILABLE);
  EXPECT_EQ(Run(ModelBatch("p")).model_version(), 1);
  std::ofstream(dir_ / "p" / "2" / "model.kmt", std::ios::binary | std::ios::app)
      << bytes.substr(40);
  ASSERT_TRUE(Eventually([&] { return DefaultVersion("p") == 2; })) << server_->Log();
  const v1::ClusterResponse r = Run(ModelBatch("p"));
  EXPECT_EQ(r.model_version(), 2);
  EXPECT_EQ(std::vector<float>(r.centers().begin(), r.centers().end()), Expected(2));
}

TEST_F(ModelRepository, AConfigMapSymlinkSwapServesTheNewFile) {
  // A ConfigMap volume's layout: s.kmt -> ..data/s.kmt, ..data -> a
  // timestamped directory; an update renames a new ..data into place.
  Publish(dir_ / "..v1" / "s.kmt", 1, "s");
  fs::create_directory_symlink("..v1", dir_ / "..data");
  fs::create_symlink("..data/s.kmt", dir_ / "s.kmt");
  Start();
  const v1::ClusterResponse before = Run(ModelBatch("s"));
  EXPECT_EQ(std::vector<float>(before.centers().begin(), before.centers().end()), Expected(1));
  Publish(dir_ / "..v2" / "s.kmt", 2, "s");
  fs::create_directory_symlink("..v2", dir_ / "..data_tmp");
  fs::rename(dir_ / "..data_tmp", dir_ / "..data");
  ASSERT_TRUE(Eventually([&] { return Listed("s").description() == "seed 2"; }));
  const v1::ClusterResponse r = Run(ModelBatch("s"));
  EXPECT_EQ(std::vector<float>(r.centers().begin(), r.centers().end()), Expected(2));
  EXPECT_EQ(Metric("kmt_model_loads_total"), 2);
}

TEST_F(ModelRepository, ARequestGetsTheLatestVersionOrTheOneItNames) {
  PublishVersion(dir_, "v", 1, 1);
  PublishVersion(dir_, "v", 3, 3);
  Start();
  EXPECT_EQ(DefaultVersion("v"), 3);
  v1::ClusterResponse latest = Run(ModelBatch("v"));
  EXPECT_EQ(latest.model_version(), 3);
  EXPECT_EQ(std::vector<float>(latest.centers().begin(), latest.centers().end()), Expected(3));
  v1::ClusterResponse first = Run(ModelBatch("v", 1));
  EXPECT_EQ(first.model_version(), 1);
  EXPECT_EQ(std::vector<float>(first.centers().begin(), first.centers().end()), Expected(1));
  const v1::ClusterResponse missing = Run(ModelBatch("v", 2));
  EXPECT_EQ(missing.error().code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(missing.error().message(), "model 'v' has no version 2 available; available: 1, 3");
  EXPECT_EQ(Run(ModelBatch("lloyd-onehot")).model_version(), 1);
  EXPECT_EQ(Metric("kmt_model_default_version{model=\"v\"}"), 3);
}

TEST_F(ModelRepository, ControlRpcsAreRefusedWithoutTheFlag) {
  PublishVersion(dir_, "c", 1, 1);
  Start();
  grpc::ClientContext unload_context;
  v1::UnloadModelRequest unload;
  unload.set_name("c");
  v1::ModelControlResponse response;
  const grpc::Status status = stub_->UnloadModel(&unload_context, unload, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(status.error_message().find("--model_control"), std::string::npos);
  EXPECT_EQ(DefaultVersion("c"), 1);
}

TEST_F(ModelRepository, ControlRpcsUnloadAndLoadWhenAllowed) {
  PublishVersion(dir_, "c", 1, 1);
  PublishVersion(dir_, "c", 2, 2);
  Start({"--model_control", "--model_poll_s=0"});
  v1::UnloadModelRequest unload;
  unload.set_name("c");
  v1::ModelControlResponse response;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(stub_->UnloadModel(&context, unload, &response).ok());
  }
  EXPECT_EQ(response.model().versions(1).state(), v1::MODEL_VERSION_RETIRED);
  EXPECT_EQ(HealthStatus(server_->address(), "c").value_or(0), 2);
  EXPECT_EQ(Run(ModelBatch("c")).error().code(), grpc::StatusCode::NOT_FOUND);

  // With polling off, LoadModel is what reads the directory.
  PublishVersion(dir_, "c", 3, 3);
  v1::LoadModelRequest load;
  load.set_name("c");
  {
    grpc::ClientContext context;
    ASSERT_TRUE(stub_->LoadModel(&context, load, &response).ok());
  }
  EXPECT_EQ(response.model().default_version(), 3);
  EXPECT_EQ(HealthStatus(server_->address(), "c").value_or(0), 1);
  EXPECT_EQ(Run(ModelBatch("c")).model_version(), 3);
  {
    grpc::ClientContext context;
    unload.set_name("lloyd-onehot");
    EXPECT_EQ(stub_->UnloadModel(&context, unload, &response).error_code(),
              grpc::StatusCode::FAILED_PRECONDITION);
  }
}

TEST_F(ModelRepository, RequiredModelsMustLoadForTheServerToStart) {
  Publish(dir_ / "here.kmt", 1, "here");
  std::ofstream(dir_ / "broken.kmt") << "garbage";
  std::string out, err;
  EXPECT_EQ(RunProgram({ServerBinary(), "--listen=127.0.0.1:0", "--metrics_listen=127.0.0.1:0",
                        "--model_dir=" + dir_.string(), "--require_models=here,broken"},
                       &out, &err),
            1);
  EXPECT_NE(err.find("ERROR refused " + (dir_ / "broken.kmt").string()), std::string::npos) << err;
  EXPECT_NE(err.find("ERROR --require_models: model 'broken' has no version available; 1 "
                     "failed: "),
            std::string::npos)
      << err;
  Start({"--require_models=here"});
  EXPECT_EQ(HealthStatus(server_->address(), "kmt.v1.KMeansTransformer").value_or(0), 1);
}

// The request that sends a fitted model's centers itself, as predict does:
// lloyd-onehot from the centers minus the offset, the points minus the
// offset (float32, or float64 with `f64`).
v1::ClusterRequest SendingTheCenters(v1::ClusterRequest r, const v1::ModelFile& file,
                                     bool f64 = false) {
  absl::StatusOr<FittedCenters> fitted = FittedFromProto(file);
  EXPECT_TRUE(fitted.ok()) << fitted.status();
  r.set_model("lloyd-onehot");
  r.set_model_version(0);
  r.set_k(fitted->k());
  r.set_init(v1::INIT_GIVEN);
  if (f64) {
    const Matrix<double> centers = fitted->Centers<double>();
    EncodeFloat64({centers.data(), static_cast<size_t>(centers.size())}, r.mutable_centers_f64());
    EncodeFloat64(fitted->Offset<double>(), r.mutable_points_offset_f64());
  } else {
    const Matrix<float> centers = fitted->Centers<float>();
    r.mutable_centers()->Add(centers.data(), centers.data() + centers.size());
    for (float o : fitted->Offset<float>()) r.add_points_offset(o);
  }
  return r;
}

// ModelBatch for a fitted model: no k, no init, its assignment only, with
// every distance; in float64 with `f64`.
v1::ClusterRequest Assignment(const std::string& model, bool f64 = false) {
  v1::ClusterRequest r = ModelBatch(model);
  r.set_k(0);
  r.set_iterations(0);
  r.set_return_distances(v1::DISTANCES_ALL);
  if (f64) {
    std::vector<double> points(r.points().begin(), r.points().end());
    for (double& p : points) p += 1.0 / 3;  // not a float32 value
    r.clear_points();
    EncodeFloat64(points, r.mutable_points_f64());
    r.set_raw_response(true);
  }
  return r;
}

void ExpectSameAnswer(const v1::ClusterResponse& a, const v1::ClusterResponse& b) {
  ASSERT_FALSE(a.has_error()) << a.error().message();
  ASSERT_FALSE(b.has_error()) << b.error().message();
  EXPECT_EQ(std::vector<int>(a.labels().begin(), a.labels().end()),
            std::vector<int>(b.labels().begin(), b.labels().end()));
  EXPECT_EQ(std::vector<float>(a.distances().begin(), a.distances().end()),
            std::vector<float>(b.distances().begin(), b.distances().end()));
  EXPECT_EQ(a.distances_f64(), b.distances_f64());
  EXPECT_EQ(a.labels_i32(), b.labels_i32());
  EXPECT_EQ(a.objective(), b.objective());
}

TEST_F(ModelRepository, AFittedModelAnswersAsARequestSendingItsCenters) {
  const v1::ModelFile file = FittedFor(1, "fit");
  PublishVersion(dir_, "fit", 1, file);
  Start();
  const v1::ModelInfo listed = Listed("fit");
  EXPECT_EQ(listed.kind(), "fitted");
  EXPECT_EQ(listed.d(), kModelFileD);
  EXPECT_EQ(listed.k(), kModelFileK);
  EXPECT_EQ(listed.fitted().n(), 24);
  EXPECT_EQ(listed.fitted().algorithm(), "test");
  EXPECT_EQ(listed.fitted().precision(), v1::FittedCenters::PRECISION_FLOAT32);
  EXPECT_TRUE(listed.fitted().centers().empty());  // listed without its centers
  EXPECT_EQ(listed.provenance().created(), "2026-01-02T03:04:05Z");
  EXPECT_EQ(listed.default_version(), 1);

  for (const bool f64 : {false, true}) {
    SCOPED_TRACE(f64 ? "float64" : "float32");
    const v1::ClusterResponse named = Run(Assignment("fit", f64));
    ExpectSameAnswer(named, Run(SendingTheCenters(Assignment("fit", f64), file, f64)));
    EXPECT_EQ(named.model_version(), 1);
    EXPECT_EQ(named.centers_size() + named.centers_f32().size() + named.centers_f64().size(), 0);
  }

  // Lloyd's steps from the fitted centers: the centers they reach, back in
  // the points' coordinates.
  v1::ClusterRequest steps = Assignment("fit");
  steps.set_iterations(2);
  const v1::ClusterResponse moved = Run(steps);
  const v1::ClusterResponse sent = Run(SendingTheCenters(steps, file));
  ExpectSameAnswer(moved, sent);
  const std::vector<float> offset = FittedFromProto(file)->Offset<float>();
  ASSERT_EQ(moved.centers_size(), kModelFileK * kModelFileD);
  for (int i = 0; i < moved.centers_size(); ++i) {
    EXPECT_EQ(moved.centers(i), sent.centers(i) + offset[i % kModelFileD]) << i;
  }

  // Fewer points than centers: each point's answer as in a whole batch.
  v1::ClusterRequest two = Assignment("fit");
  two.set_n(2);
  two.mutable_points()->Truncate(2 * kModelFileD);
  const v1::ClusterResponse short_batch = Run(two);
  const v1::ClusterResponse whole = Run(Assignment("fit"));
  ASSERT_FALSE(short_batch.has_error()) << short_batch.error().message();
  ASSERT_EQ(short_batch.labels_size(), 2);
  EXPECT_EQ(short_batch.labels(0), whole.labels(0));
  EXPECT_EQ(short_batch.labels(1), whole.labels(1));
  EXPECT_EQ(short_batch.distances_size(), 2 * kModelFileK);

  struct Refused {
    const char* what;
    std::function<void(v1::ClusterRequest*)> change;
    const char* message;
  };
  const Refused refused[] = {
      {"d",
       [](v1::ClusterRequest* r) {
         r->set_d(3);
         r->mutable_points()->Truncate(24 * 2 - 3);
         r->set_n(15);
       },
       "d = 3, but model 'fit' is fitted: its centers have d = 2"},
      {"k", [](v1::ClusterRequest* r) { r->set_k(4); },
       "k = 4, but model 'fit' is fitted: it has k = 3 centers (0 takes them)"},
      {"centers", [](v1::ClusterRequest* r) { r->add_centers(1); },
       "centers is set; model 'fit' is fitted: it serves its own 3 centers"},
      {"init", [](v1::ClusterRequest* r) { r->set_init(v1::INIT_RANDOM); },
       "init is set; model 'fit' is fitted: its 3 centers start every batch"},
      {"offset",
       [](v1::ClusterRequest* r) {
         r->add_points_offset(1);
         r->add_points_offset(2);
       },
       "points_offset is set; model 'fit' is fitted: the model's own offset is subtracted"},
  };
  for (const Refused& c : refused) {
    SCOPED_TRACE(c.what);
    v1::ClusterRequest r = Assignment("fit");
    c.change(&r);
    const v1::ClusterResponse response = Run(r);
    EXPECT_EQ(response.error().code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(response.error().message(), c.message);
  }
}

TEST_F(ModelRepository, AFittedModelRollsOutUnderAStreamAndOlderVersionsRetire) {
  PublishVersion(dir_, "fit", 1, FittedFor(1, "fit"));
  Start({"--keep_versions=2"});
  // ModelBatch asks k = 3 (the model's) and 3 Lloyd's steps: labels and
  // centers both tell the versions apart.
  std::map<int64_t, v1::ClusterResponse> expected;
  for (int v = 1; v <= 3; ++v) {
    expected[v] = Run(SendingTheCenters(ModelBatch("fit"), FittedFor(v, "fit")));
  }
  BusyStream stream(stub_.get(), "fit");
  ASSERT_TRUE(Eventually([&] { return stream.From(1) >= 5; }));
  PublishVersion(dir_, "fit", 2, FittedFor(2, "fit"));
  ASSERT_TRUE(Eventually([&] { return stream.From(2) >= 5; }));
  EXPECT_EQ(VersionOf("fit", 1).state(), v1::MODEL_VERSION_AVAILABLE);  // 2 kept
  PublishVersion(dir_, "fit", 3, FittedFor(3, "fit"));
  ASSERT_TRUE(Eventually([&] { return stream.From(3) >= 5; }));
  const std::vector<v1::ClusterResponse> responses = stream.Stop();

  for (const v1::ClusterResponse& r : responses) {
    ASSERT_FALSE(r.has_error()) << r.error().message();
    ASSERT_TRUE(expected.count(r.model_version())) << r.model_version();
    const v1::ClusterResponse& e = expected.at(r.model_version());
    EXPECT_EQ(std::vector<int>(r.labels().begin(), r.labels().end()),
              std::vector<int>(e.labels().begin(), e.labels().end()))
        << "version " << r.model_version();
    EXPECT_EQ(r.objective(), e.objective()) << "version " << r.model_version();
  }
  EXPECT_EQ(VersionOf("fit", 1).state(), v1::MODEL_VERSION_RETIRED);
  EXPECT_EQ(VersionOf("fit", 1).reason(), "older than the latest 2 available (--keep_versions)");
  EXPECT_EQ(VersionOf("fit", 2).state(), v1::MODEL_VERSION_AVAILABLE);
  EXPECT_EQ(DefaultVersion("fit"), 3);
  EXPECT_EQ(Run(ModelBatch("fit", 1)).error().code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Run(ModelBatch("fit", 2)).model_version(), 2);
  // Version 3 removed: version 1 is among the latest two again and serves.
  fs::remove_all(dir_ / "fit" / "3");
  ASSERT_TRUE(
      Eventually([&] { return VersionOf("fit", 1).state() == v1::MODEL_VERSION_AVAILABLE; }));
  EXPECT_EQ(DefaultVersion("fit"), 2);
}

}  // namespace
}  // namespace kmt
