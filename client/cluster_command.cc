// kmt cluster: the --input file in batches of --batch_size points, either
// every batch its own clustering task (--mode=per-batch) or the whole file
// one dataset, clustered with exact Lloyd's over all of it (--mode=whole),
// its points weighed by --weights_in if given and stopped by scikit-learn's
// rule: on shards resident on the replicas (client/resident_job.h), or,
// where a replica has no room for its shard, with one pass over the file
// per iteration.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/cli_flags.h"
#include "client/cluster_client.h"
#include "client/commands.h"
#include "client/npy.h"
#include "client/point_reader.h"
#include "client/resident_job.h"
#include "core/cluster_sums.h"
#include "core/random.h"
#include "core/types.h"
#include "core/validation.h"
#include "proto/batch_error.h"

ABSL_FLAG(std::string, input, "",
          "points: CSV (one point per line), NumPy .npy (float32 or float64, shape (n, d)) or raw "
          "float32 row-major");
ABSL_FLAG(std::string, format, "",
          "csv, npy or f32; by default .csv files are CSV, .npy files NumPy, others float32");
ABSL_FLAG(int64_t, batch_size, 4096, "points per batch");
ABSL_FLAG(std::string, mode, "per-batch",
          "per-batch: every batch is its own clustering task; whole: the whole file is one "
          "dataset, clustered with exact Lloyd's on shards resident on every --server replica "
          "(--streams shards per replica)");
ABSL_FLAG(bool, resident, true,
          "whole mode: keep the shards resident on the replicas (k-means++ over all points); "
          "false, or a replica without room: one pass over the file per iteration (k-means++ on "
          "a sample of --sample_size points)");
ABSL_FLAG(double, tol, kmt::ResidentJobOptions{}.tol,
          "whole mode: stop after the iteration whose total squared center shift is at most tol "
          "times the points' mean per-dimension variance, or that changed no label "
          "(scikit-learn's rule); 0: only at a fixed point");
ABSL_FLAG(std::string, weights_in, "",
          "whole mode: per-point weights (scikit-learn's sample_weight), one per line or a "
          "float32 or float64 .npy of shape (n,); finite, >= 0, not all 0");
ABSL_FLAG(int, kmeans_parallel_rounds, kmt::ResidentJobOptions{}.kmeans_parallel_rounds,
          "whole mode, --init=kmeans||: sampling rounds (more while there are fewer than k "
          "candidates)");
ABSL_FLAG(double, kmeans_parallel_oversampling,
          kmt::ResidentJobOptions{}.kmeans_parallel_oversampling,
          "whole mode, --init=kmeans||: points sampled per round, times k");
ABSL_FLAG(int64_t, sample_size, 65536,
          "whole mode, one pass per iteration: points sampled for the initial centers");
ABSL_FLAG(std::string, labels_out, "",
          "where to write the labels: one per line, or int32 .npy if the name ends in .npy");
ABSL_FLAG(std::string, centers_out, "",
          "where to write the centers: CSV, or float32 .npy (k x d) if the name ends in .npy");

namespace kmt {
namespace {

using Clock = std::chrono::steady_clock;

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

// One pass over the file: batches built from `base` plus the points (and
// their `weights`, if given), each response handed to `sink` in order; the
// points read are added to `moments`, if given.
absl::Status Pass(Client& client, PointReader& reader, const v1::ClusterRequest& base,
                  const std::string& label, const ResponseSink& sink,
                  const std::vector<float>* weights = nullptr, PointMoments* moments = nullptr) {
  if (absl::Status s = reader.Rewind(); !s.ok()) return s;
  const int64_t batch_size = absl::GetFlag(FLAGS_batch_size);
  int64_t batches = 0, points = 0;
  absl::Status read_status;
  Progress progress;
  const RequestSource source = [&](v1::ClusterRequest* r) {
    std::vector<float> values;
    absl::StatusOr<int64_t> n = reader.Read(batch_size, &values);
    if (!n.ok()) read_status = n.status();
    if (!n.ok() || *n == 0) return false;
    if (weights != nullptr && points + *n > static_cast<int64_t>(weights->size())) {
      read_status = absl::InvalidArgumentError(absl::StrCat(
          "--weights_in has ", weights->size(), " weights, fewer than the points of the input"));
      return false;
    }
    *r = base;
    r->set_request_id(absl::StrCat(label, "-", batches++));
    r->set_n(*n);
    r->mutable_points()->Add(values.begin(), values.end());
    if (weights != nullptr) {
      r->mutable_weights()->Add(weights->begin() + points, weights->begin() + points + *n);
    }
    if (moments != nullptr) moments->Add(values.data(), *n, reader.d());
    points += *n;
    progress.Report(absl::StrCat(label, ": ", batches, " batches, ",
                                 static_cast<int>(100 * reader.progress()), "%"));
    return true;
  };
  absl::Status status = client.Cluster(source, sink);
  if (!read_status.ok()) return read_status;
  if (status.ok() && weights != nullptr && points != static_cast<int64_t>(weights->size())) {
    return absl::InvalidArgumentError(absl::StrCat("--weights_in has ", weights->size(),
                                                   " weights for the input's ", points, " points"));
  }
  return status;
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

bool IsNpy(const std::string& path) { return absl::EndsWith(path, ".npy"); }

// One dataset's results: labels one per line or as .npy, centers (d x k) as
// CSV rows or a k x d .npy.
absl::Status WriteResults(const Labels& labels, const Matrix<float>& centers) {
  if (const std::string path = absl::GetFlag(FLAGS_labels_out); !path.empty()) {
    if (IsNpy(path)) {
      const absl::Status s = WriteNpy(path, "<i4", {static_cast<int64_t>(labels.size())},
                                      labels.data(), labels.size() * sizeof(int));
      if (!s.ok()) return s;
    } else {
      std::ofstream out(path);
      for (int label : labels) out << label << "\n";
      if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
    }
  }
  const std::string path = absl::GetFlag(FLAGS_centers_out);
  if (IsNpy(path)) {
    return WriteNpy(path, "<f4", {centers.cols(), centers.rows()}, centers.data(),
                    centers.size() * sizeof(float));
  }
  std::vector<std::string> rows;
  for (Eigen::Index j = 0; j < centers.cols(); ++j) {
    rows.push_back(Row(centers.col(j).data(), static_cast<int>(centers.rows())));
  }
  return WriteCenters(path, rows);
}

absl::Status ClusterPerBatch(Client& client, PointReader& reader, v1::ClusterRequest base) {
  std::ofstream labels;
  if (const std::string path = absl::GetFlag(FLAGS_labels_out); !path.empty()) {
    labels.open(path);
    if (!labels) return absl::InternalError(absl::StrCat("cannot write ", path));
  }
  std::vector<std::string> centers = {"batch,cluster"};
  int64_t batch = 0, failed = 0, points = 0, learned_layers = 0, lloyd_layers = 0;
  double objective = 0;
  absl::Status status = Pass(client, reader, base, "batch", [&](v1::ClusterResponse&& r) {
    if (const absl::Status error = FromBatchError(r.error()); !error.ok()) {
      ++failed;
      std::fprintf(stderr, "batch %lld (%s): %s\n", static_cast<long long>(batch),
                   r.request_id().c_str(), error.ToString().c_str());
    } else {
      objective += r.objective();
      points += r.labels_size();
      learned_layers += r.guard_learned_layers();
      lloyd_layers += r.guard_lloyd_layers();
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
  if (base.guard()) {
    std::printf("guard: %lld layers kept the learned step, %lld the Lloyd's step\n",
                static_cast<long long>(learned_layers), static_cast<long long>(lloyd_layers));
  }
  return failed == 0 ? absl::OkStatus()
                     : absl::InvalidArgumentError(absl::StrCat(failed, " batches failed"));
}

// A uniform sample of up to `size` points (reservoir sampling, seeded by
// --seed), for the initial centers, with their indices in the file; memory
// stays O(size).
absl::StatusOr<std::vector<float>> Sample(PointReader& reader, int64_t size, int64_t* n,
                                          std::vector<int64_t>* indices) {
  if (absl::Status s = reader.Rewind(); !s.ok()) return s;
  const int d = reader.d();
  Rng rng(absl::GetFlag(FLAGS_seed));
  std::vector<float> sample, batch;
  indices->clear();
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
        indices->push_back(seen);
      } else if (const uint64_t slot = rng.Below(seen + 1); slot < static_cast<uint64_t>(size)) {
        std::copy(point, point + d, sample.begin() + slot * d);
        (*indices)[slot] = seen;
      }
    }
  }
  *n = std::min(size, seen);
  return sample;
}

// Whole mode, one pass over the file per Lloyd's iteration: every batch is
// assigned and summed by the server (weighted, with `weights`), the client
// adds the sums. Scikit-learn's rule stops it: the variance comes from the
// first pass, and an unchanged assignment shows as a shift of 0.
absl::Status ClusterWholeByPasses(Client& client, PointReader& reader, v1::ClusterRequest base,
                                  const std::vector<float>& weights) {
  const int d = reader.d(), k = base.k();
  const std::vector<float>* weighed = weights.empty() ? nullptr : &weights;
  // Initial centers: given, or the server's initialisation on a sample.
  std::vector<float> centers(base.centers().begin(), base.centers().end());
  if (base.init() != v1::INIT_GIVEN) {
    int64_t n = 0;
    std::vector<int64_t> indices;
    absl::StatusOr<std::vector<float>> sample =
        Sample(reader, absl::GetFlag(FLAGS_sample_size), &n, &indices);
    if (!sample.ok()) return sample.status();
    v1::ClusterRequest r = base;
    r.set_request_id("init");
    r.set_n(n);
    r.set_iterations(0);
    r.set_omit_labels(true);
    r.mutable_points()->Add(sample->begin(), sample->end());
    // The sample keeps its points' weights: k-means++ on it draws by w D^2.
    for (int64_t i : indices) {
      if (weighed == nullptr) break;
      if (i >= static_cast<int64_t>(weights.size())) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--weights_in has ", weights.size(), " weights, fewer than the points of the input"));
      }
      r.add_weights(weights[i]);
    }
    absl::Status failure;
    const absl::Status status = client.Cluster(
        [&, sent = false](v1::ClusterRequest* out) mutable {
          if (sent) return false;
          *out = r;
          return sent = true;
        },
        [&](v1::ClusterResponse&& response) {
          failure = FromBatchError(response.error());
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
  const double tol = absl::GetFlag(FLAGS_tol);
  Labels all_labels;
  PointMoments moments;
  int run = 0;
  bool converged = false;
  for (int t = 0; t <= iterations; ++t) {
    const bool last = t == iterations;
    base.mutable_centers()->Assign(centers.begin(), centers.end());
    base.set_return_cluster_sums(!last);
    base.set_omit_labels(!last);
    ClusterSums sums(d, k);
    double objective = 0;
    absl::Status failure;
    const absl::Status status = Pass(
        client, reader, base, last ? "labels" : absl::StrCat("pass ", t + 1),
        [&](v1::ClusterResponse&& r) {
          if (const absl::Status error = FromBatchError(r.error()); !error.ok()) {
            if (failure.ok()) {
              failure =
                  absl::Status(error.code(), absl::StrCat(r.request_id(), ": ", error.message()));
            }
            return;
          }
          objective += r.objective();
          all_labels.insert(all_labels.end(), r.labels().begin(), r.labels().end());
          for (int j = 0; j < r.center_counts_size(); ++j) {
            sums.counts[j] += r.center_counts(j);
            sums.weights[j] += r.center_weights_size() > 0
                                   ? r.center_weights(j)
                                   : static_cast<double>(r.center_counts(j));
            for (int l = 0; l < d; ++l) sums.sums(l, j) += r.center_sums(j * d + l);
          }
        },
        weighed, t == 0 && tol > 0 ? &moments : nullptr);
    if (!status.ok()) return status;
    if (!failure.ok()) return failure;
    if (last) {
      std::fprintf(stderr, "final objective %.10g after %d iterations%s\n", objective, run,
                   converged ? " (converged: center shift within tol)" : "");
      break;
    }
    std::fprintf(stderr, "pass %d objective %.10g\n", t + 1, objective);
    const Matrix<float> current = Eigen::Map<const Matrix<float>>(centers.data(), d, k);
    Matrix<float> next = current;
    ApplyMeans(sums, &next);
    converged = (next - current).cast<double>().squaredNorm() <= tol * moments.MeanVariance();
    centers.assign(next.data(), next.data() + next.size());
    run = t + 1;
    if (converged) t = iterations - 1;  // only the labels pass remains
  }
  return WriteResults(all_labels, Eigen::Map<const Matrix<float>>(centers.data(), d, k));
}

// --weights_in's weights (none without it), checked as a request's are.
absl::StatusOr<std::vector<float>> ReadWeights() {
  const std::string path = absl::GetFlag(FLAGS_weights_in);
  if (path.empty()) return std::vector<float>();
  absl::StatusOr<std::unique_ptr<PointReader>> reader =
      PointReader::Open(path, IsNpy(path) ? "npy" : "csv", 1);
  if (!reader.ok()) return reader.status();
  std::vector<float> weights;
  absl::StatusOr<int64_t> n = (*reader)->Read(INT64_MAX / 2, &weights);
  if (!n.ok()) return n.status();
  const absl::Status valid =
      ValidateWeights(Vector<float>(Eigen::Map<const Vector<float>>(weights.data(), *n)), *n);
  if (!valid.ok()) return absl::Status(valid.code(), absl::StrCat(path, ": ", valid.message()));
  return weights;
}

// Whole mode on resident shards. A replica without room for its shard
// answers RESOURCE_EXHAUSTED, and the job runs by passes instead.
absl::Status ClusterWhole(Client& client, PointReader& reader, v1::ClusterRequest base) {
  absl::StatusOr<std::vector<float>> weights = ReadWeights();
  if (!weights.ok()) return weights.status();
  if (!absl::GetFlag(FLAGS_resident)) return ClusterWholeByPasses(client, reader, base, *weights);
  if (base.init() == v1::INIT_RANDOM) {
    std::fprintf(stderr, "whole mode with --init=random runs one pass per iteration\n");
    return ClusterWholeByPasses(client, reader, base, *weights);
  }
  const int d = reader.d();
  const auto start = std::chrono::steady_clock::now();
  // CSV is parsed once into memory; binary files are read where each shard
  // starts, by every loading thread at once.
  std::vector<float> parsed;
  int64_t n = reader.n();
  if (n < 0) {
    if (absl::Status s = reader.Rewind(); !s.ok()) return s;
    absl::StatusOr<int64_t> got = reader.Read(INT64_MAX / 2 / d, &parsed);
    if (!got.ok()) return got.status();
    n = *got;
  }
  const PointSource source = [&](int64_t first, int64_t count, std::vector<float>* values) {
    if (reader.n() >= 0) return reader.ReadAt(first, count, values);
    values->insert(values->end(), parsed.begin() + first * d, parsed.begin() + (first + count) * d);
    return absl::OkStatus();
  };
  absl::StatusOr<std::vector<std::string>> servers = ReplicaAddresses(absl::GetFlag(FLAGS_server));
  if (!servers.ok()) return servers.status();
  if (!weights->empty() && static_cast<int64_t>(weights->size()) != n) {
    return absl::InvalidArgumentError(absl::StrCat(absl::GetFlag(FLAGS_weights_in), " has ",
                                                   weights->size(), " weights for ", n, " points"));
  }
  const ResidentJobOptions options{
      .servers = *servers,
      .streams_per_server = std::max(1, absl::GetFlag(FLAGS_streams)),
      .k = base.k(),
      .iterations = absl::GetFlag(FLAGS_iterations),
      .tol = absl::GetFlag(FLAGS_tol),
      .weights = *weights,
      .seed = base.seed(),
      .seeding = InitIsKMeansParallel() ? ResidentSeeding::kKMeansParallel
                 : base.init() == v1::INIT_PLAIN_KMEANS_PLUS_PLUS
                     ? ResidentSeeding::kPlainKMeansPlusPlus
                     : ResidentSeeding::kGreedyKMeansPlusPlus,
      .kmeans_parallel_rounds = absl::GetFlag(FLAGS_kmeans_parallel_rounds),
      .kmeans_parallel_oversampling = absl::GetFlag(FLAGS_kmeans_parallel_oversampling),
      .labels = !absl::GetFlag(FLAGS_labels_out).empty(),
      .max_moves = std::max(0, absl::GetFlag(FLAGS_max_attempts)),
      .stream_timeout = absl::GetFlag(FLAGS_timeout),
      .security = client.options().security,
      .log = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); }};
  std::optional<Matrix<float>> initial;
  if (base.init() == v1::INIT_GIVEN) {
    initial = Eigen::Map<const Matrix<float>>(base.centers().data(), d, base.k());
  }
  absl::StatusOr<ResidentJobResult> result = RunResidentJob(options, n, d, source, initial);
  if (result.status().code() == absl::StatusCode::kResourceExhausted) {
    std::fprintf(stderr,
                 "a replica has no room for its shard (%s); running one pass over the file per "
                 "iteration instead\n",
                 std::string(result.status().message()).c_str());
    return ClusterWholeByPasses(client, reader, base, *weights);
  }
  if (!result.ok()) return result.status();
  const auto written = std::chrono::steady_clock::now();
  if (absl::Status s = WriteResults(result->labels, result->centers); !s.ok()) return s;
  const double write_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - written).count();
  const double total =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double iterating = 0;
  for (double t : result->iteration_seconds) iterating += t;
  const int run = result->iterations_run;
  const char* why =
      result->convergence == Convergence::kTolerance ? " (converged: center shift within tol)"
      : result->convergence == Convergence::kLabelsUnchanged ? " (converged: no label changed)"
                                                             : "";
  std::fprintf(stderr, "initial objective %.10g\nfinal objective %.10g after %d iterations%s\n",
               result->initial_objective, result->objective, run, why);
  std::fprintf(stderr,
               "resident: %d shards on %zu replicas, %d moved; seconds: load %.3f, init %.3f, "
               "iterations %.3f (%.4f each), labels %.3f, write %.3f, total %.3f\n",
               result->shards, options.servers.size(), result->shard_moves, result->load_seconds,
               result->init_seconds, iterating, run > 0 ? iterating / run : 0.0,
               result->labels_seconds, write_seconds, total);
  if (options.seeding == ResidentSeeding::kKMeansParallel) {
    std::fprintf(stderr, "k-means||: %d rounds, %lld candidates\n", result->init_rounds,
                 static_cast<long long>(result->init_candidates));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RunCluster() {
  absl::StatusOr<std::unique_ptr<PointReader>> reader = PointReader::Open(
      absl::GetFlag(FLAGS_input), absl::GetFlag(FLAGS_format), absl::GetFlag(FLAGS_d));
  if (!reader.ok()) return reader.status();
  const std::string mode = absl::GetFlag(FLAGS_mode);
  absl::StatusOr<v1::ClusterRequest> base =
      Template((*reader)->d(), mode == "whole" && absl::GetFlag(FLAGS_resident));
  if (!base.ok()) return base.status();
  absl::StatusOr<ClientOptions> options = Options();
  if (!options.ok()) return options.status();
  Client client(*options);
  if (mode == "per-batch") return ClusterPerBatch(client, **reader, *base);
  if (mode == "whole") return ClusterWhole(client, **reader, *base);
  return absl::InvalidArgumentError(
      absl::StrCat("unknown mode '", mode, "', expected per-batch or whole"));
}

}  // namespace kmt
