// The /metrics endpoint, scraped over HTTP as Prometheus does: the series
// alerts watch exist at 0 from the start, each recorded event moves exactly
// the series it should, the process metrics are there, and the operations
// guide's table lists what is exposed.
#include "server/metrics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/simd.h"
#include "tests/integration/server_process.h"

namespace kmt {
namespace {

class MetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<std::string> refused;
    registry_ = std::make_unique<ModelRegistry>(ModelRegistry::Load("", &refused));
    absl::StatusOr<std::unique_ptr<Metrics>> metrics =
        Metrics::Start("127.0.0.1:0", *registry_, "1.2.3");
    ASSERT_TRUE(metrics.ok()) << metrics.status();
    metrics_ = std::move(*metrics);
  }

  std::map<std::string, double> Scrape() { return ScrapeMetrics(metrics_->port()); }

  std::unique_ptr<ModelRegistry> registry_;
  std::unique_ptr<Metrics> metrics_;
};

v1::ClusterRequest Request(const std::string& model, int64_t n) {
  v1::ClusterRequest request;
  request.set_model(model);
  request.set_n(n);
  return request;
}

TEST_F(MetricsTest, SeriesAlertsWatchStartAtZero) {
  const std::map<std::string, double> series = Scrape();
  ASSERT_FALSE(registry_->models().empty());
  for (const std::shared_ptr<const RegistryEntry>& m : registry_->models()) {
    SCOPED_TRACE(m->info.name());
    EXPECT_EQ(series.at("kmt_batches_total{code=\"OK\",model=\"" + m->info.name() + "\"}"), 0);
    EXPECT_EQ(series.at("kmt_points_total{model=\"" + m->info.name() + "\"}"), 0);
  }
  for (const char* reason : kLoadFailureReasons) {
    EXPECT_EQ(series.at(absl::StrCat("kmt_model_load_failures_total{reason=\"", reason, "\"}")), 0)
        << reason;
  }
  for (const char* state : {"loading", "available", "failed", "retired"}) {
    EXPECT_EQ(series.at(absl::StrCat("kmt_model_versions{state=\"", state, "\"}")), 0) << state;
  }
  EXPECT_EQ(series.at("kmt_model_loads_total"), 0);
  for (const char* code : {"INTERNAL", "UNAVAILABLE", "DEADLINE_EXCEEDED", "INVALID_ARGUMENT"}) {
    EXPECT_EQ(series.at(std::string("kmt_errors_total{code=\"") + code + "\"}"), 0) << code;
  }
  EXPECT_EQ(series.count("kmt_errors_total{code=\"OK\"}"), 0u);
  for (const char* code : {"OK", "CANCELLED", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED",
                           "UNAVAILABLE", "INVALID_ARGUMENT"}) {
    EXPECT_EQ(series.at(std::string("kmt_jobs_total{code=\"") + code + "\"}"), 0) << code;
  }
  EXPECT_EQ(series.at("kmt_models_loaded{kind=\"learned\"}"), 0);
  EXPECT_EQ(series.at("kmt_models_loaded{kind=\"exact\"}"),
            static_cast<double>(registry_->models().size()));
  EXPECT_EQ(series.at(absl::StrCat("kmt_build_info{simd=\"", SimdChoiceName(ActiveSimdChoice()),
                                   "\",version=\"1.2.3\"}")),
            1);
}

TEST_F(MetricsTest, ABatchMovesItsCountersAndHistograms) {
  const std::string model = registry_->models().front()->info.name();
  v1::ClusterResponse ok;
  ok.set_objective(2.0 * 100);
  ok.set_iterations_run(5);
  ok.mutable_timing()->set_queue_seconds(0.001);
  ok.mutable_timing()->set_compute_seconds(0.02);
  metrics_->RecordBatch(Request(model, 100), ok, 0.03);
  v1::ClusterResponse failed;
  failed.mutable_error()->set_code(static_cast<int>(absl::StatusCode::kInvalidArgument));
  metrics_->RecordBatch(Request("no-such-model", 100), failed, 0.0001);

  const std::map<std::string, double> series = Scrape();
  const std::string m = "model=\"" + model + "\"";
  EXPECT_EQ(series.at("kmt_batches_total{code=\"OK\"," + m + "}"), 1);
  EXPECT_EQ(series.at("kmt_batches_total{code=\"INVALID_ARGUMENT\",model=\"unknown\"}"), 1);
  EXPECT_EQ(series.at("kmt_errors_total{code=\"INVALID_ARGUMENT\"}"), 1);
  EXPECT_EQ(series.at("kmt_points_total{" + m + "}"), 100);
  EXPECT_EQ(series.at("kmt_objective_per_point_sum{" + m + "}"), 2.0);
  EXPECT_EQ(series.at("kmt_layers_sum{" + m + "}"), 5);
  EXPECT_DOUBLE_EQ(series.at("kmt_queue_seconds_sum{" + m + ",size=\"small\"}"), 0.001);
  EXPECT_DOUBLE_EQ(series.at("kmt_compute_seconds_sum{" + m + "}"), 0.02);
  EXPECT_DOUBLE_EQ(series.at("kmt_request_duration_seconds_sum{code=\"OK\"," + m + "}"), 0.03);
  // Queue and compute time are those of successful batches only.
  EXPECT_EQ(series.count("kmt_queue_seconds_count{model=\"unknown\",size=\"small\"}"), 0u);
  EXPECT_EQ(series.at("kmt_request_duration_seconds_count{code=\"INVALID_ARGUMENT\",model="
                      "\"unknown\"}"),
            1);
}

TEST_F(MetricsTest, AGuardedBatchCountsTheStepsItsLayersKept) {
  const std::string model = registry_->models().front()->info.name();
  v1::ClusterRequest request = Request(model, 10);
  v1::ClusterResponse response;
  response.set_guard_learned_layers(3);
  response.set_guard_lloyd_layers(2);
  metrics_->RecordBatch(request, response, 0.01);  // not guarded: not counted
  request.set_guard(true);
  metrics_->RecordBatch(request, response, 0.01);
  response.set_guard_lloyd_answered(true);
  metrics_->RecordBatch(request, response, 0.01);
  const std::map<std::string, double> series = Scrape();
  const std::string m = "model=\"" + model + "\"";
  EXPECT_EQ(series.at("kmt_guard_layers_total{" + m + ",step=\"learned\"}"), 6);
  EXPECT_EQ(series.at("kmt_guard_layers_total{" + m + ",step=\"lloyd\"}"), 4);
  // Which trajectory answered each guarded batch.
  EXPECT_EQ(series.at("kmt_guard_answers_total{" + m + ",trajectory=\"learned\"}"), 1);
  EXPECT_EQ(series.at("kmt_guard_answers_total{" + m + ",trajectory=\"lloyd\"}"), 1);
}

// A deadline that ends a stream is a stream outcome, not another failed batch.
TEST_F(MetricsTest, StreamOutcomesHaveTheirOwnCounter) {
  metrics_->RecordStreamEnd(static_cast<int>(absl::StatusCode::kDeadlineExceeded));
  metrics_->RecordStreamEnd(0);
  metrics_->RecordStreamEnd(0);
  const std::map<std::string, double> series = Scrape();
  EXPECT_EQ(series.at("kmt_streams_total{code=\"DEADLINE_EXCEEDED\"}"), 1);
  EXPECT_EQ(series.at("kmt_streams_total{code=\"OK\"}"), 2);
  EXPECT_EQ(series.at("kmt_streams_total{code=\"CANCELLED\"}"), 0);
  EXPECT_EQ(series.at("kmt_errors_total{code=\"DEADLINE_EXCEEDED\"}"), 0);
}

// {name: type} of every metric family in an exposition, from its "# TYPE"
// lines.
std::map<std::string, std::string> Families(const std::string& exposition) {
  std::map<std::string, std::string> families;
  for (absl::string_view line : absl::StrSplit(exposition, '\n')) {
    if (!absl::ConsumePrefix(&line, "# TYPE ")) continue;
    const std::vector<std::string> fields = absl::StrSplit(line, ' ');
    if (fields.size() == 2) families[fields[0]] = fields[1];
  }
  return families;
}

// {name: type} of the metrics docs/operations.md's metrics table lists: a
// row's first cell names one or more metrics in backquotes, its second
// gives their type.
std::map<std::string, std::string> DocumentedFamilies() {
  std::ifstream in(std::string(KMT_SOURCE_DIR) + "/docs/operations.md");
  std::map<std::string, std::string> families;
  bool in_section = false;
  for (std::string line; std::getline(in, line);) {
    if (absl::StartsWith(line, "## ")) in_section = line == "## Metrics";
    if (!in_section || !absl::StartsWith(line, "| `")) continue;
    const std::vector<std::string> cells = absl::StrSplit(line, '|');
    if (cells.size() < 4) continue;
    const std::vector<std::string> quoted = absl::StrSplit(cells[1], '`');
    for (size_t i = 1; i < quoted.size(); i += 2) {
      families[quoted[i]] = std::string(absl::StripAsciiWhitespace(cells[2]));
    }
  }
  return families;
}

// The operations guide's table names every metric the server exposes, with
// its type, and no other.
TEST_F(MetricsTest, TheOperationsGuideListsEveryMetric) {
  // Histograms appear with their first observation, the guard's counter
  // (no learned model here) with its first guarded batch.
  v1::ClusterResponse ok;
  ok.set_objective(1.0);
  v1::ClusterRequest guarded = Request(registry_->models().front()->info.name(), 1);
  guarded.set_guard(true);
  metrics_->RecordBatch(guarded, ok, 0.001);
  const std::map<std::string, std::string> documented = DocumentedFamilies();
  ASSERT_FALSE(documented.empty());
  EXPECT_EQ(documented, Families(MetricsText(metrics_->port())));
}

// histogram_quantile interpolates linearly within a bucket: with each bound
// at most 1.26 times the previous, a quantile inside 1e-6..1e6 reads within
// about 10% of the true one.
TEST_F(MetricsTest, ObjectiveBucketsAreFineEnoughForQuantiles) {
  v1::ClusterResponse ok;
  ok.set_objective(1.0);
  metrics_->RecordBatch(Request(registry_->models().front()->info.name(), 1), ok, 0.001);
  std::vector<double> bounds;
  for (const auto& [name, value] : Scrape()) {
    if (name.rfind("kmt_objective_per_point_bucket{", 0) != 0) continue;
    const size_t at = name.find("le=\"") + 4;
    double le;
    if (absl::SimpleAtod(name.substr(at, name.find('"', at) - at), &le) && std::isfinite(le)) {
      bounds.push_back(le);
    }
  }
  std::sort(bounds.begin(), bounds.end());
  ASSERT_GE(bounds.size(), 2u);
  EXPECT_LE(bounds.front(), 1e-6);
  EXPECT_GE(bounds.back(), 1e6);
  for (size_t i = 1; i < bounds.size(); ++i) EXPECT_LE(bounds[i] / bounds[i - 1], 1.26);
}

TEST_F(MetricsTest, ProcessMetricsUnderPrometheusNames) {
  const std::map<std::string, double> series = Scrape();
  EXPECT_GE(series.at("process_cpu_seconds_total"), 0);
  for (const char* name :
       {"process_resident_memory_bytes", "process_virtual_memory_bytes",
        "process_start_time_seconds", "process_threads", "process_open_fds", "process_max_fds"}) {
    EXPECT_GT(series.at(name), 0) << name;
  }
}

}  // namespace
}  // namespace kmt
