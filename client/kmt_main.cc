// kmt: the command-line client.
//   kmt models                          list the served models
//   kmt cluster --input=FILE ...        cluster a CSV or float32 file
//   kmt bench ...                       load the server, report latency and throughput
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <omp.h>
#include <sys/resource.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/cluster_client.h"
#include "client/point_reader.h"
#include "base/allocator.h"
#include "core/cluster_sums.h"
#include "base/cpus.h"
#include "core/constructions.h"
#include "core/init.h"
#include "core/random.h"
#include "learn/task_generator.h"
#include "core/transformer.h"
#include "core/validation.h"

ABSL_FLAG(std::string, server, "localhost:50051",
          "server address; several as ipv4:127.0.0.1:P1,127.0.0.1:P2 or dns:///host:port");
ABSL_FLAG(std::string, lb, "round_robin", "load balancing over the addresses: round_robin or pick_first");
ABSL_FLAG(std::string, model, "lloyd-onehot", "model name (kmt models lists them)");
ABSL_FLAG(int, k, 10, "clusters");
ABSL_FLAG(int, iterations, 20, "layers, i.e. Lloyd's iterations for exact models");
ABSL_FLAG(std::string, init, "kmeans++", "initial centers: kmeans++, random or given (--centers_in)");
ABSL_FLAG(std::string, centers_in, "", "CSV of k initial centers, one per line, for --init=given");
ABSL_FLAG(uint64_t, seed, 1, "seed of the initialisation");
ABSL_FLAG(double, beta, 0, "exact models: softmax inverse temperature of the assignment; 0 = hardmax");
ABSL_FLAG(std::string, input, "", "points: CSV (one point per line) or raw float32 row-major");
ABSL_FLAG(std::string, format, "", "csv or f32; by default .csv files are CSV, others float32");
ABSL_FLAG(int, d, 0, "dimensions of a float32 input; bench: dimensions of the generated batches");
ABSL_FLAG(int64_t, batch_size, 4096, "points per batch");
ABSL_FLAG(std::string, mode, "per-batch",
          "per-batch: every batch is its own clustering task; whole: the whole file is one "
          "dataset (k-means++ on a sample, one pass over all batches per Lloyd's iteration, "
          "then the final labels)");
ABSL_FLAG(int64_t, sample_size, 65536, "whole mode: points sampled for the initial centers");
ABSL_FLAG(std::string, labels_out, "", "where to write the labels, one per line");
ABSL_FLAG(std::string, centers_out, "", "where to write the centers (CSV)");
ABSL_FLAG(int, window, 8, "batches in flight on one stream");
ABSL_FLAG(int, batches_per_stream, 64,
          "batches one stream carries before a new one is opened (and balanced anew)");
ABSL_FLAG(int, streams, 1,
          "cluster: streams at once (round-robin spreads them over the --server addresses)");
ABSL_FLAG(int, max_attempts, 3, "sends of a batch answered UNAVAILABLE, the first included");
ABSL_FLAG(absl::Duration, timeout, absl::InfiniteDuration(), "deadline of each stream");
ABSL_FLAG(int, concurrency, 1, "bench: streams at once, one batch in flight on each");
ABSL_FLAG(absl::Duration, duration, absl::Seconds(10), "bench: how long to run (unless --count)");
ABSL_FLAG(int64_t, count, 0, "bench: batches to send in all (0: run for --duration)");
ABSL_FLAG(int64_t, n, 4096, "bench: points per generated batch");
ABSL_FLAG(bool, in_process, false,
          "bench: also run the same batches through the core in this process and compare");
ABSL_FLAG(int, rounds, 1,
          "bench: with --in_process, alternate service and in-process runs this many times "
          "(--duration or --count is split among them) and compare the totals");

namespace kmt {
namespace {

using Clock = std::chrono::steady_clock;

ClientOptions Options() {
  return {.target = absl::GetFlag(FLAGS_server),
          .load_balancing = absl::GetFlag(FLAGS_lb),
          .max_attempts = absl::GetFlag(FLAGS_max_attempts),
          .window = absl::GetFlag(FLAGS_window),
          .streams = absl::GetFlag(FLAGS_streams),
          .batches_per_stream = absl::GetFlag(FLAGS_batches_per_stream),
          .stream_timeout = absl::GetFlag(FLAGS_timeout)};
}

absl::StatusOr<v1::Init> InitFlag() {
  const std::string init = absl::GetFlag(FLAGS_init);
  if (init == "given") return v1::INIT_GIVEN;
  absl::StatusOr<InitMethod> method = ParseInitMethod(init);
  if (!method.ok()) return method.status();
  return *method == InitMethod::kRandomSubset ? v1::INIT_RANDOM : v1::INIT_KMEANS_PLUS_PLUS;
}

// The request fields every batch shares.
absl::StatusOr<v1::ClusterRequest> Template(int d) {
  v1::ClusterRequest r;
  r.set_model(absl::GetFlag(FLAGS_model));
  r.set_d(d);
  r.set_k(absl::GetFlag(FLAGS_k));
  r.set_iterations(absl::GetFlag(FLAGS_iterations));
  r.set_seed(absl::GetFlag(FLAGS_seed));
  r.set_beta(absl::GetFlag(FLAGS_beta));
  absl::StatusOr<v1::Init> init = InitFlag();
  if (!init.ok()) return init.status();
  r.set_init(*init);
  if (*init == v1::INIT_GIVEN) {
    absl::StatusOr<std::unique_ptr<PointReader>> centers =
        PointReader::Open(absl::GetFlag(FLAGS_centers_in), "csv", d);
    if (!centers.ok()) return centers.status();
    std::vector<float> values;
    absl::StatusOr<int64_t> k = (*centers)->Read(INT64_MAX, &values);
    if (!k.ok()) return k.status();
    if (*k != r.k()) {
      return absl::InvalidArgumentError(absl::StrCat(
          absl::GetFlag(FLAGS_centers_in), " has ", *k, " centers, --k is ", r.k()));
    }
    r.mutable_centers()->Add(values.begin(), values.end());
  }
  return r;
}

std::string Describe(const v1::BatchError& e) {
  return absl::StrCat(absl::StatusCodeToString(static_cast<absl::StatusCode>(e.code())),
                      ": ", e.message());
}

// Progress on stderr at most once a second.
class Progress {
 public:
  void Report(const std::string& what) {
    const auto now = Clock::now();
    if (now - last_ < std::chrono::seconds(1)) return;
    last_ = now;
    std::fprintf(stderr, "\r%s   ", what.c_str());
    shown_ = true;
  }
  ~Progress() {
    if (shown_) std::fprintf(stderr, "\n");
  }

 private:
  Clock::time_point last_ = Clock::now();
  bool shown_ = false;
};

// One pass over the file: batches built from `base` plus the points, each
// response handed to `sink` in order.
absl::Status Pass(Client& client, PointReader& reader, const v1::ClusterRequest& base,
                  const std::string& label, const ResponseSink& sink) {
  if (absl::Status s = reader.Rewind(); !s.ok()) return s;
  const int64_t batch_size = absl::GetFlag(FLAGS_batch_size);
  int64_t batches = 0;
  absl::Status read_status;
  Progress progress;
  const RequestSource source = [&](v1::ClusterRequest* r) {
    std::vector<float> values;
    absl::StatusOr<int64_t> n = reader.Read(batch_size, &values);
    if (!n.ok()) read_status = n.status();
    if (!n.ok() || *n == 0) return false;
    *r = base;
    r->set_request_id(absl::StrCat(label, "-", batches++));
    r->set_n(*n);
    r->mutable_points()->Add(values.begin(), values.end());
    progress.Report(absl::StrCat(label, ": ", batches, " batches, ",
                                 static_cast<int>(100 * reader.progress()), "%"));
    return true;
  };
  absl::Status status = client.Cluster(source, sink);
  return read_status.ok() ? status : read_status;
}

absl::Status WriteCenters(const std::string& path, const std::vector<std::string>& rows) {
  if (path.empty()) return absl::OkStatus();
  std::ofstream out(path);
  for (const std::string& row : rows) out << row << "\n";
  return out ? absl::OkStatus() : absl::InternalError(absl::StrCat("cannot write ", path));
}

// Nine significant digits: every float reads back as itself.
std::string Row(const float* values, int d) {
  return absl::StrJoin(values, values + d, ",", [](std::string* out, float v) {
    absl::StrAppend(out, absl::StrFormat("%.9g", v));
  });
}

absl::Status ClusterPerBatch(Client& client, PointReader& reader, v1::ClusterRequest base) {
  std::ofstream labels;
  if (const std::string path = absl::GetFlag(FLAGS_labels_out); !path.empty()) {
    labels.open(path);
    if (!labels) return absl::InternalError(absl::StrCat("cannot write ", path));
  }
  std::vector<std::string> centers = {"batch,cluster"};
  int64_t batch = 0, failed = 0, points = 0;
  double objective = 0;
  absl::Status status = Pass(client, reader, base, "batch", [&](v1::ClusterResponse&& r) {
    if (r.has_error()) {
      ++failed;
      std::fprintf(stderr, "batch %lld (%s): %s\n", static_cast<long long>(batch),
                   r.request_id().c_str(), Describe(r.error()).c_str());
    } else {
      objective += r.objective();
      points += r.labels_size();
      for (int label : r.labels()) labels << label << "\n";
      const int d = reader.d();
      for (int j = 0; j * d < r.centers_size(); ++j) {
        centers.push_back(absl::StrCat(batch, ",", j, ",", Row(r.centers().data() + j * d, d)));
      }
    }
    ++batch;
  });
  if (!status.ok()) return status;
  for (int l = 0; l < reader.d(); ++l) absl::StrAppend(&centers[0], ",x", l);
  if (absl::Status s = WriteCenters(absl::GetFlag(FLAGS_centers_out), centers); !s.ok()) return s;
  std::printf("%lld batches, %lld points, %lld failed, summed objective %.10g\n",
              static_cast<long long>(batch), static_cast<long long>(points),
              static_cast<long long>(failed), objective);
  return failed == 0 ? absl::OkStatus()
                     : absl::InvalidArgumentError(absl::StrCat(failed, " batches failed"));
}

// A uniform sample of up to `size` points (reservoir sampling, seeded by
// --seed), for the initial centers; memory stays O(size).
absl::StatusOr<std::vector<float>> Sample(PointReader& reader, int64_t size, int64_t* n) {
  if (absl::Status s = reader.Rewind(); !s.ok()) return s;
  const int d = reader.d();
  Rng rng(absl::GetFlag(FLAGS_seed));
  std::vector<float> sample, batch;
  int64_t seen = 0;
  for (;;) {
    batch.clear();
    absl::StatusOr<int64_t> got = reader.Read(absl::GetFlag(FLAGS_batch_size), &batch);
    if (!got.ok()) return got.status();
    if (*got == 0) break;
    for (int64_t i = 0; i < *got; ++i, ++seen) {
      const float* point = batch.data() + i * d;
      if (seen < size) {
        sample.insert(sample.end(), point, point + d);
      } else if (const uint64_t slot = rng.Below(seen + 1); slot < static_cast<uint64_t>(size)) {
        std::copy(point, point + d, sample.begin() + slot * d);
      }
    }
  }
  *n = std::min(size, seen);
  return sample;
}

absl::Status ClusterWhole(Client& client, PointReader& reader, v1::ClusterRequest base) {
  const int d = reader.d(), k = base.k();
  // Initial centers: given, or the server's initialisation on a sample.
  std::vector<float> centers(base.centers().begin(), base.centers().end());
  if (base.init() != v1::INIT_GIVEN) {
    int64_t n = 0;
    absl::StatusOr<std::vector<float>> sample =
        Sample(reader, absl::GetFlag(FLAGS_sample_size), &n);
    if (!sample.ok()) return sample.status();
    v1::ClusterRequest r = base;
    r.set_request_id("init");
    r.set_n(n);
    r.set_iterations(0);
    r.set_omit_labels(true);
    r.mutable_points()->Add(sample->begin(), sample->end());
    absl::Status failure;
    const absl::Status status = client.Cluster(
        [&, sent = false](v1::ClusterRequest* out) mutable {
          if (sent) return false;
          *out = r;
          return sent = true;
        },
        [&](v1::ClusterResponse&& response) {
          if (response.has_error()) {
            failure = absl::Status(static_cast<absl::StatusCode>(response.error().code()),
                                   response.error().message());
          }
          centers.assign(response.centers().begin(), response.centers().end());
        });
    if (!status.ok()) return status;
    if (!failure.ok()) return failure;
  }
  // Lloyd's over all batches: each pass assigns every point to the current
  // centers and sums per center; the new centers are the summed means.
  base.set_init(v1::INIT_GIVEN);
  base.set_iterations(0);
  const int iterations = absl::GetFlag(FLAGS_iterations);
  for (int t = 0; t <= iterations; ++t) {
    const bool last = t == iterations;
    base.mutable_centers()->Assign(centers.begin(), centers.end());
    base.set_return_cluster_sums(!last);
    base.set_omit_labels(!last);
    ClusterSums sums(d, k);
    double objective = 0;
    absl::Status failure;
    std::ofstream labels;
    if (last && !absl::GetFlag(FLAGS_labels_out).empty()) {
      labels.open(absl::GetFlag(FLAGS_labels_out));
    }
    const absl::Status status =
        Pass(client, reader, base, last ? "labels" : absl::StrCat("pass ", t + 1),
             [&](v1::ClusterResponse&& r) {
               if (r.has_error()) {
                 if (failure.ok()) {
                   failure = absl::Status(static_cast<absl::StatusCode>(r.error().code()),
                                          absl::StrCat(r.request_id(), ": ", r.error().message()));
                 }
                 return;
               }
               objective += r.objective();
               for (int label : r.labels()) labels << label << "\n";
               for (int j = 0; j < r.center_counts_size(); ++j) {
                 sums.counts[j] += r.center_counts(j);
                 for (int l = 0; l < d; ++l) sums.sums(l, j) += r.center_sums(j * d + l);
               }
             });
    if (!status.ok()) return status;
    if (!failure.ok()) return failure;
    std::fprintf(stderr, "%s objective %.10g\n",
                 last ? "final" : absl::StrCat("pass ", t + 1).c_str(), objective);
    if (last) break;
    Matrix<float> next = Eigen::Map<const Matrix<float>>(centers.data(), d, k);
    ApplyMeans(sums, &next);
    const bool converged = std::equal(centers.begin(), centers.end(), next.data());
    centers.assign(next.data(), next.data() + next.size());
    if (converged) t = iterations - 1;  // only the labels pass remains
  }
  std::vector<std::string> rows;
  for (int j = 0; j < k; ++j) rows.push_back(Row(centers.data() + j * d, d));
  return WriteCenters(absl::GetFlag(FLAGS_centers_out), rows);
}

absl::Status Cluster() {
  absl::StatusOr<std::unique_ptr<PointReader>> reader = PointReader::Open(
      absl::GetFlag(FLAGS_input), absl::GetFlag(FLAGS_format), absl::GetFlag(FLAGS_d));
  if (!reader.ok()) return reader.status();
  absl::StatusOr<v1::ClusterRequest> base = Template((*reader)->d());
  if (!base.ok()) return base.status();
  Client client(Options());
  const std::string mode = absl::GetFlag(FLAGS_mode);
  if (mode == "per-batch") return ClusterPerBatch(client, **reader, *base);
  if (mode == "whole") return ClusterWhole(client, **reader, *base);
  return absl::InvalidArgumentError(
      absl::StrCat("unknown mode '", mode, "', expected per-batch or whole"));
}

absl::Status Models() {
  Client client(Options());
  absl::StatusOr<std::vector<v1::ModelInfo>> models = client.ListModels();
  if (!models.ok()) return models.status();
  for (const v1::ModelInfo& m : *models) {
    std::printf("%-24s %-8s %-7s d=%s k=%s scaling=%s\n  %s\n", m.name().c_str(),
                m.kind().c_str(), m.embedding().c_str(),
                m.d() ? std::to_string(m.d()).c_str() : "any",
                m.k() ? std::to_string(m.k()).c_str() : "any",
                m.input_scaling().c_str(), m.description().c_str());
  }
  return absl::OkStatus();
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5))];
}

// User plus kernel CPU seconds of this process so far.
double ProcessCpuSeconds() {
  rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  const auto seconds = [](const timeval& t) { return t.tv_sec + 1e-6 * t.tv_usec; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

struct Throughput {
  double batches_per_second;
  double cpu_seconds_per_batch;
};

// Batches/s of the core alone on the same batches, with a thread per CPU
// this process may run on, each batch on one thread (as the server's workers
// run them).
absl::StatusOr<Throughput> InProcessThroughput(const std::vector<v1::ClusterRequest>& batches,
                                               int64_t count) {
  std::optional<LloydOptions> lloyd;
  for (const LloydOptions& o : {LloydOptions{.embedding = Embedding::kOneHot},
                                LloydOptions{.embedding = Embedding::kBinary},
                                LloydOptions{.theta3 = Theta3Form::kLinear}}) {
    if (LloydModelName(o) == batches[0].model()) lloyd = o;
  }
  if (!lloyd) {
    return absl::InvalidArgumentError("--in_process compares exact models (lloyd-*) only");
  }
  const auto one = [&lloyd](const v1::ClusterRequest& r) -> absl::Status {
    absl::StatusOr<Matrix<float>> points = PointsFromRowMajor<float>(r.points(), r.n(), r.d());
    if (!points.ok()) return points.status();
    absl::StatusOr<Matrix<float>> init =
        InitialCenters(*points, r.k(), InitMethod::kKMeansPlusPlus, r.seed());
    if (!init.ok()) return init.status();
    return RunLloyd<float>(*lloyd, *points, *init, {.layers = r.iterations()}).status();
  };
  const int threads = UsableCpus();
  std::atomic<int64_t> next{0};
  std::mutex mu;
  absl::Status failure;
  const double cpu_start = ProcessCpuSeconds();
  const auto start = Clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      omp_set_num_threads(1);
      for (int64_t i; (i = next++) < count;) {
        if (absl::Status s = one(batches[i % batches.size()]); !s.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          failure.Update(s);
          return;
        }
      }
    });
  }
  for (std::thread& t : pool) t.join();
  if (!failure.ok()) return failure;
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return Throughput{count / seconds, (ProcessCpuSeconds() - cpu_start) / count};
}

// What the streams of a bench run recorded.
struct BenchRecord {
  std::mutex mu;
  std::vector<double> latencies;  // seconds, one per answered batch
  std::map<std::string, int64_t> codes;
};

// `concurrency` streams, one batch in flight on each, send `batches` round
// robin, numbered from `first`: up to `last` if given, else until
// `deadline`. Returns the wall-clock seconds taken.
double ServicePass(const std::vector<v1::ClusterRequest>& batches, const ClientOptions& options,
                   int concurrency, int64_t first, std::optional<int64_t> last,
                   Clock::time_point deadline, BenchRecord* record) {
  std::atomic<int64_t> issued{first};
  const auto start = Clock::now();
  std::vector<std::thread> streams;
  for (int c = 0; c < concurrency; ++c) {
    streams.emplace_back([&] {
      Client client(options);
      Clock::time_point sent;
      const absl::Status status = client.Cluster(
          [&](v1::ClusterRequest* r) {
            const int64_t i = issued++;
            if (last ? i >= *last : Clock::now() >= deadline) return false;
            *r = batches[i % batches.size()];
            r->set_request_id(absl::StrCat("bench-", i));
            sent = Clock::now();
            return true;
          },
          [&](v1::ClusterResponse&& r) {
            const double latency = std::chrono::duration<double>(Clock::now() - sent).count();
            const auto code = static_cast<absl::StatusCode>(r.error().code());
            std::lock_guard<std::mutex> lock(record->mu);
            record->latencies.push_back(latency);
            ++record->codes[absl::StatusCodeToString(code)];
          });
      if (!status.ok()) {
        std::lock_guard<std::mutex> lock(record->mu);
        ++record->codes["stream " + absl::StatusCodeToString(status.code())];
      }
    });
  }
  for (std::thread& t : streams) t.join();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

absl::Status Bench() {
  const int concurrency = std::max(1, absl::GetFlag(FLAGS_concurrency));
  const int64_t n = absl::GetFlag(FLAGS_n), count = absl::GetFlag(FLAGS_count);
  const int d = absl::GetFlag(FLAGS_d) > 0 ? absl::GetFlag(FLAGS_d) : 32;
  absl::StatusOr<v1::ClusterRequest> base = Template(d);
  if (!base.ok()) return base.status();
  // A few distinct batches, reused round robin.
  std::vector<v1::ClusterRequest> batches;
  for (int b = 0; b < 8; ++b) {
    const Matrix<float> points =
        GenerateTask<float>({.n = static_cast<int>(n), .d = d, .k = base->k()}, b + 1).points;
    v1::ClusterRequest r = *base;
    r.set_n(n);
    r.set_seed(b + 1);
    r.mutable_points()->Add(points.data(), points.data() + points.size());
    batches.push_back(std::move(r));
  }
  // With --rounds, the service and the in-process core take turns, so a
  // machine that speeds up or slows down during the run affects both alike.
  const int rounds = std::max(1, absl::GetFlag(FLAGS_rounds));
  const bool in_process = absl::GetFlag(FLAGS_in_process);
  ClientOptions options = Options();
  options.window = 1;
  options.streams = 1;
  BenchRecord record;
  const std::vector<double>& latencies = record.latencies;
  double seconds = 0, client_cpu = 0, local_seconds = 0, local_cpu = 0;
  int64_t sent_before = 0;
  std::vector<std::string> round_ratios;
  for (int round = 0; round < rounds; ++round) {
    const std::optional<int64_t> last =
        count > 0 ? std::optional<int64_t>(count * (round + 1) / rounds) : std::nullopt;
    const auto deadline =
        Clock::now() + absl::ToChronoNanoseconds(absl::GetFlag(FLAGS_duration) / rounds);
    const size_t answered_before = latencies.size();
    const double cpu_start = ProcessCpuSeconds();
    const double round_seconds =
        ServicePass(batches, options, concurrency, sent_before, last, deadline, &record);
    seconds += round_seconds;
    client_cpu += ProcessCpuSeconds() - cpu_start;
    const auto answered = static_cast<int64_t>(latencies.size() - answered_before);
    sent_before = last ? *last : sent_before + answered;
    if (in_process && answered > 0) {
      const absl::StatusOr<Throughput> local =
          InProcessThroughput(batches, std::max<int64_t>(answered, 16));
      if (!local.ok()) return local.status();
      // Counted as if it had run `answered` batches at its measured pace.
      local_seconds += answered / local->batches_per_second;
      local_cpu += local->cpu_seconds_per_batch * answered;
      round_ratios.push_back(absl::StrFormat(
          "%.3f", (answered / round_seconds) / local->batches_per_second));
    }
  }
  const double rate = latencies.size() / seconds;
  std::printf("batches %zu (n=%lld d=%d k=%d iterations=%d model=%s) concurrency %d\n",
              latencies.size(), static_cast<long long>(n), d, base->k(), base->iterations(),
              base->model().c_str(), concurrency);
  std::printf("latency p50 %.3f ms  p90 %.3f ms  p99 %.3f ms\n",
              1e3 * Percentile(latencies, 0.5), 1e3 * Percentile(latencies, 0.9),
              1e3 * Percentile(latencies, 0.99));
  std::printf("throughput %.1f batches/s  %.0f points/s\n", rate, rate * n);
  std::vector<std::string> code_counts;
  for (const auto& [code, c] : record.codes) code_counts.push_back(absl::StrCat(code, " ", c));
  std::printf("status %s\n", absl::StrJoin(code_counts, ", ").c_str());
  if (latencies.empty()) {
    return absl::UnavailableError("no batch was answered; is the server at --server running?");
  }
  std::printf("client CPU %.3f ms per batch\n", 1e3 * client_cpu / latencies.size());
  if (in_process) {
    const double local_rate = latencies.size() / local_seconds;
    if (rounds > 1) {
      std::printf("service/in-process by round %s\n", absl::StrJoin(round_ratios, " ").c_str());
    }
    std::printf("in-process core %.1f batches/s, CPU %.3f ms per batch; "
                "service/in-process = %.3f\n",
                local_rate, 1e3 * local_cpu / latencies.size(), rate / local_rate);
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace kmt

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "kmt models | kmt cluster --input=FILE [flags] | kmt bench [flags]\n"
      "cluster modes: --mode=per-batch clusters every batch as its own task;\n"
      "--mode=whole clusters the whole file as one dataset with exact Lloyd's\n"
      "over all batches (one pass per iteration).");
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  kmt::KeepBatchMemory();
  const std::string command = args.size() > 1 ? args[1] : "";
  absl::Status status;
  if (command == "models") {
    status = kmt::Models();
  } else if (command == "cluster") {
    status = kmt::Cluster();
  } else if (command == "bench") {
    status = kmt::Bench();
  } else {
    std::fprintf(stderr, "usage: kmt models | cluster | bench (--help for flags)\n");
    return 2;
  }
  if (!status.ok()) {
    std::fprintf(stderr, "kmt: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
