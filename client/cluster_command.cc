// kmt cluster: the --input file as one clustering (--mode=whole: exact
// Lloyd's over all of it, its points weighed by --weights_in if given and
// stopped by scikit-learn's rule, on shards resident on the replicas
// (client/resident_job.h) or, where a replica has no room for its shard,
// with one pass over the file per iteration), or in batches of --batch_size
// points, every batch its own clustering task (--mode=per-batch). The
// default, auto, is whole mode for a file of more than one batch and the
// file's one batch otherwise.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/command_line.h"
#include "client/cli_flags.h"
#include "client/cluster_client.h"
#include "client/commands.h"
#include "client/pass_shards.h"
#include "client/resident_job.h"
#include "client/shard_set.h"
#include "core/empty_clusters.h"
#include "core/point_moments.h"
#include "core/random.h"
#include "core/types.h"
#include "core/validation.h"
#include "io/npy.h"
#include "io/point_reader.h"
#include "io/svmlight.h"
#include "proto/batch_error.h"
#include "proto/enum_names.h"
#include "proto/model_file.h"

ABSL_FLAG(std::string, input, "",
          "points: CSV (one point per line), NumPy .npy (float16, float32 or float64, shape (n, "
          "d)), raw float32, binary16 or bfloat16 row-major (--format), or sparse points in the "
          "SVMlight / libsvm text format (.svm, .svmlight, .libsvm; whole mode, held sparse)");
ABSL_FLAG(
    std::string, format, "",
    "csv, npy, f32, f16, bf16 or svmlight; by default the name's extension says (.csv, .txt, .tsv: "
    "CSV; .npy, float16, float32 or float64; .f32, .bin, .raw: float32; .f16: binary16; "
    ".bf16: bfloat16, both read as float32; .svm, .svmlight, .libsvm: SVMlight), else the "
    "file's first bytes (text is CSV)");
ABSL_FLAG(int64_t, batch_size, 4096,
          "points per batch (a last batch of fewer than k points joins the one before)");
ABSL_FLAG(std::string, mode, "auto",
          "auto: whole for a file of more than --batch_size points, else its one batch; whole: "
          "the file is one dataset, clustered with exact Lloyd's on shards resident on every "
          "--server replica (--streams shards per replica); per-batch: every batch is its own "
          "clustering task, its labels numbered from 0 (a stream of independent batches)");
ABSL_FLAG(bool, resident, true,
          "whole mode: keep the shards resident on the replicas (k-means++ over all points); "
          "false, or a replica without room: one pass over the file per iteration (k-means++ on "
          "a sample of --sample_size points)");
ABSL_FLAG(double, tol, 1e-4,
          "whole mode: stop after the iteration whose total squared center shift is at most tol "
          "times the points' mean per-dimension variance, or that changed no label "
          "(scikit-learn's rule and default); 0: only at a fixed point");
ABSL_FLAG(bool, step_objectives, false,
          "whole mode: log every iteration's objective; without, only the initial and final "
          "centers' (the shards' bounds then need not read the points they keep in their "
          "clusters)");
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
          "whole mode: points sampled for the server's initial centers (one pass per "
          "iteration; --init=two-level on resident shards)");
ABSL_FLAG(int64_t, max_points_per_center, 0,
          "whole mode on resident shards: with more points than this times k, the "
          "initialisation and iterations run on a uniform sample of that many (FAISS's "
          "max_points_per_centroid), then the labels and objective over every point from its "
          "centers; 0: every point trains");
ABSL_FLAG(std::string, labels_out, "",
          "where to write the labels, one per input row (-1 for the rows of a failed batch): "
          "one per line, or int32 .npy if the name ends in .npy");
ABSL_FLAG(std::string, centers_out, "",
          "where to write the centers: CSV (per-batch mode: batch,cluster,x0,... rows), or "
          "float32 .npy of shape (k, d) (per-batch mode: (batches * k, d)) if the name ends in "
          ".npy");

ABSL_FLAG(std::string, model_out, "",
          "whole mode: where to write the fitted centers as a fitted model (kmt.v1.ModelFile, "
          "written aside and renamed into place); as DIR/NAME/VERSION/model.kmt, a server whose "
          "--model_dir is DIR serves it as version VERSION of model NAME");

namespace kmt {
namespace {

// A line of a job's news (a shard moved, an iteration's figures), on stderr.
void LogLine(const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); }

// Whole mode's most iterations: --iterations, else scikit-learn's max_iter.
int WholeIterations() { return FlagGiven("iterations") ? absl::GetFlag(FLAGS_iterations) : 300; }

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

// Labels one per line, or as an int32 .npy.
absl::Status WriteLabels(const std::string& path, const std::vector<int>& labels) {
  if (path.empty()) return absl::OkStatus();
  if (IsNpy(path)) {
    return WriteNpy(path, "<i4", {static_cast<int64_t>(labels.size())}, labels.data(),
                    labels.size() * sizeof(int));
  }
  std::ofstream out(path);
  for (int label : labels) out << label << "\n";
  return out ? absl::OkStatus() : absl::InternalError(absl::StrCat("cannot write ", path));
}

// The model --model_out names: NAME of DIR/NAME/VERSION/model.kmt, else
// the file's name without its extension.
std::string ModelOutName(const std::string& path) {
  const std::filesystem::path p(path);
  const std::filesystem::path version = p.parent_path();
  int64_t number = 0;
  if (p.filename() == "model.kmt" && absl::SimpleAtoi(version.filename().string(), &number) &&
      !version.parent_path().filename().empty()) {
    return version.parent_path().filename().string();
  }
  return p.stem().string();
}

// A whole-mode fit as a fitted model at --model_out, its offset the
// centers' mean as the Python estimators' predict subtracts it.
template <typename Scalar>
absl::Status WriteModel(const Matrix<Scalar>& centers, const ResidentJobResult& result, int64_t n,
                        const v1::ClusterRequest& base) {
  const std::string path = absl::GetFlag(FLAGS_model_out);
  // Summed center by center in Scalar, then divided, as numpy's
  // centers.mean(axis=0) does in kmt.KMeans.from_model(...).predict.
  std::vector<Scalar> mean(centers.rows(), Scalar(0));
  for (Eigen::Index j = 0; j < centers.cols(); ++j) {
    for (Eigen::Index l = 0; l < centers.rows(); ++l) mean[l] += centers(l, j);
  }
  for (Scalar& m : mean) m /= static_cast<Scalar>(centers.cols());
  v1::ModelFile file = FittedToProto<Scalar>(ModelOutName(path), centers, mean);
  v1::FittedCenters* fitted = file.mutable_fitted();
  fitted->set_n(n);
  fitted->set_inertia(result.objective);
  fitted->set_algorithm("lloyd");
  fitted->set_iterations(result.iterations_run);
  auto& parameters = *fitted->mutable_parameters();
  parameters["input"] = absl::GetFlag(FLAGS_input);
  parameters["init"] = base.has_init() ? EngineName<v1::Init>(base.init()) : "kmeans++";
  parameters["max_iterations"] = absl::StrCat(WholeIterations());
  parameters["tol"] = absl::StrCat(absl::GetFlag(FLAGS_tol));
  parameters["n_init"] = absl::StrCat(std::max(1, base.n_init()));
  parameters["seed"] = absl::StrCat(base.seed());
  if (!absl::GetFlag(FLAGS_weights_in).empty()) {
    parameters["weights_in"] = absl::GetFlag(FLAGS_weights_in);
  }
  v1::Provenance* provenance = file.mutable_provenance();
  provenance->set_seed(base.seed());
  provenance->set_created(absl::FormatTime(absl::RFC3339_sec, absl::Now(), absl::UTCTimeZone()));
  provenance->set_trainer("kmt cluster " KMT_VERSION);
  return WriteModelFile(file, path);
}

// One dataset's results: labels one per line or as .npy, centers (d x k) as
// CSV rows or a k x d .npy, the fitted model if --model_out asks.
absl::Status WriteResults(const ResidentJobResult& result, int64_t n,
                          const v1::ClusterRequest& base) {
  const Labels& labels = result.labels;
  const Matrix<float> centers = result.centers_as<float>();
  if (!absl::GetFlag(FLAGS_model_out).empty()) {
    absl::Status s = std::visit(
        [&](const auto& fitted) { return WriteModel(fitted, result, n, base); }, result.centers);
    if (!s.ok()) return s;
  }
  if (absl::Status s = WriteLabels(absl::GetFlag(FLAGS_labels_out), labels); !s.ok()) return s;
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

// Every batch its own task. Labels keep one line per input row, -1 for the
// rows of a batch that failed; centers are batch,cluster,x0,... CSV rows
// (a failed batch has none) or a (batches * k, d) .npy (NaN for a failed
// batch's).
absl::Status ClusterPerBatch(Client& client, PointReader& reader, v1::ClusterRequest base) {
  const int d = reader.d(), k = base.k();
  std::vector<int> labels;
  std::vector<float> centers;  // batches * k * d
  std::vector<bool> answered;  // per batch
  int64_t batch = 0, failed = 0, failed_points = 0, converged = 0, learned_layers = 0,
          lloyd_layers = 0, lloyd_answered = 0;
  int min_iterations = INT32_MAX, max_iterations = 0;
  double objective = 0;
  std::string first_error;
  absl::Status status =
      Pass(client, reader, base, "batch", absl::GetFlag(FLAGS_batch_size),
           [&](v1::ClusterResponse&& r, const Rows& rows) {
             if (const absl::Status error = FromBatchError(r.error()); !error.ok()) {
               ++failed;
               failed_points += rows.n;
               const std::string line = absl::StrCat(
                   absl::StatusCodeToString(error.code()), ": ",
                   RowError(std::string(error.message()), rows, batch, absl::GetFlag(FLAGS_input)));
               std::fprintf(stderr, "%s\n", line.c_str());
               if (first_error.empty()) first_error = line;
               labels.insert(labels.end(), rows.n, -1);
               centers.insert(centers.end(), static_cast<size_t>(k) * d, std::nanf(""));
               answered.push_back(false);
             } else {
               objective += r.objective();
               learned_layers += r.guard_learned_layers();
               lloyd_layers += r.guard_lloyd_layers();
               lloyd_answered += r.guard_lloyd_answered();
               converged += r.converged();
               min_iterations = std::min(min_iterations, r.iterations_run());
               max_iterations = std::max(max_iterations, r.iterations_run());
               labels.insert(labels.end(), r.labels().begin(), r.labels().end());
               centers.insert(centers.end(), r.centers().begin(), r.centers().end());
               answered.push_back(true);
             }
             ++batch;
           });
  if (!status.ok()) return status;
  if (absl::Status s = WriteLabels(absl::GetFlag(FLAGS_labels_out), labels); !s.ok()) return s;
  if (const std::string path = absl::GetFlag(FLAGS_centers_out); IsNpy(path)) {
    absl::Status s = WriteNpy(path, "<f4", {batch * k, d}, centers.data(),
                              static_cast<int64_t>(centers.size() * sizeof(float)));
    if (!s.ok()) return s;
  } else if (!path.empty()) {
    std::vector<std::string> rows = {"batch,cluster"};
    for (int l = 0; l < d; ++l) absl::StrAppend(&rows[0], ",x", l);
    for (int64_t b = 0; b < batch; ++b) {
      for (int j = 0; j < k && answered[b]; ++j) {
        rows.push_back(absl::StrCat(b, ",", j, ",", Row(centers.data() + (b * k + j) * d, d)));
      }
    }
    if (absl::Status s = WriteCenters(path, rows); !s.ok()) return s;
  }
  const int64_t points = static_cast<int64_t>(labels.size()) - failed_points;
  std::printf("%lld %s, %lld points, %lld failed, %s %.10g\n", static_cast<long long>(batch),
              batch == 1 ? "batch" : "batches", static_cast<long long>(points),
              static_cast<long long>(failed), batch == 1 ? "objective" : "summed objective",
              objective);
  if (batch > 1) {
    std::printf(
        "per-batch mode: every batch clustered on its own, its labels 0 to k-1 (--mode=whole "
        "clusters the file as one)\n");
  }
  if (batch == 1 && failed == 0) {
    std::printf("iterations: %d, %s\n", max_iterations,
                converged ? "converged" : "not converged (--iterations reached)");
  } else if (batch > failed) {
    std::printf("iterations: %s; %lld of %lld batches converged\n",
                min_iterations == max_iterations
                    ? absl::StrCat(max_iterations, " in every batch").c_str()
                    : absl::StrCat(min_iterations, " to ", max_iterations).c_str(),
                static_cast<long long>(converged), static_cast<long long>(batch - failed));
  }
  if (base.guard()) {
    std::printf(
        "guard: %lld layers kept the learned step, %lld the Lloyd's step; exact Lloyd's from the "
        "same start answered %lld of %lld batches\n",
        static_cast<long long>(learned_layers), static_cast<long long>(lloyd_layers),
        static_cast<long long>(lloyd_answered), static_cast<long long>(batch - failed));
  }
  if (failed == 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      failed, failed == 1 ? " batch" : " batches", " failed (", failed_points, " rows, labelled -1",
      absl::GetFlag(FLAGS_labels_out).empty() ? "" : " in --labels_out",
      "); the first: ", first_error));
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

// A whole-mode job's objectives on stdout, and why its iterations stopped.
void PrintObjectives(const ResidentJobResult& result) {
  const char* why = result.convergence == Convergence::kTolerance
                        ? " (converged: center shift within tol)"
                    : result.convergence == Convergence::kLabelsUnchanged
                        ? " (converged: no label changed)"
                        : " (not converged: --iterations reached)";
  std::printf("initial objective %.10g\nfinal objective %.10g after %d iterations%s\n",
              result.initial_objective, result.objective, result.iterations_run, why);
}

// The server's initialisation (base's init and seed) on a uniform sample of
// --sample_size points of the file, which keep their weights (k-means++ on
// it draws by w D^2): the k x d initial centers, row-major.
absl::StatusOr<std::vector<float>> InitOnSample(Client& client, PointReader& reader,
                                                const v1::ClusterRequest& base,
                                                const std::vector<float>& weights) {
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
  for (int64_t i : indices) {
    if (weights.empty()) break;
    if (i >= static_cast<int64_t>(weights.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--weights_in has ", weights.size(), " weights, fewer than the points of the input"));
    }
    r.add_weights(weights[i]);
  }
  std::vector<float> centers;
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
  if (!failure.ok()) {
    const std::string named = FileRowError(
        std::string(failure.message()),
        [&](int64_t i) { return i < static_cast<int64_t>(indices.size()) ? indices[i] : i; },
        "the sample for the initial centers", absl::GetFlag(FLAGS_input));
    return named.empty() ? failure : absl::Status(failure.code(), named);
  }
  return centers;
}

// --max_points_per_center: the job on a uniform sample of `size` of the n
// points (FAISS's max_points_per_centroid), then a job of no iteration from
// its centers over every point: the result is the sample's run with every
// point's labels, counts and objective.
absl::StatusOr<ResidentJobResult> RunOnTrainingSample(PointReader& reader,
                                                      const ReplicaShardOptions& replicas,
                                                      ResidentJobOptions options, int64_t size,
                                                      int64_t n, int d, const PointSource& source) {
  int64_t m = 0;
  std::vector<int64_t> indices;
  absl::StatusOr<std::vector<float>> sample = Sample(reader, size, &m, &indices);
  if (!sample.ok()) return sample.status();
  ReplicaShardOptions on_sample = replicas;
  std::vector<float> sample_weights;
  if (const std::vector<float>* all = WeightsIn<float>(replicas.weights);
      all != nullptr && !all->empty()) {
    for (int64_t i : indices) sample_weights.push_back((*all)[i]);
  }
  on_sample.weights = std::move(sample_weights);
  if (options.log) {
    options.log(absl::StrCat("training on a sample of ", m, " of the ", n, " points"));
  }
  ResidentJobOptions trained_options = options;
  trained_options.labels = false;
  absl::StatusOr<ResidentJobResult> trained = RunResidentJobOnReplicas(
      on_sample, trained_options, absl::GetFlag(FLAGS_tol), m, d,
      [&](int64_t first, int64_t count, float* out) {
        std::copy(sample->begin() + first * d, sample->begin() + (first + count) * d, out);
        return absl::OkStatus();
      });
  if (!trained.ok()) return trained.status();
  options.iterations = 0;
  options.n_init = 1;
  options.starts = {trained->centers};
  absl::StatusOr<ResidentJobResult> all =
      RunResidentJobOnReplicas(replicas, std::move(options), 0, n, d, source);
  if (!all.ok()) return all.status();
  trained->labels = std::move(all->labels);
  trained->counts = std::move(all->counts);
  trained->objective = all->objective;
  trained->load_seconds += all->load_seconds;
  trained->labels_seconds = all->labels_seconds;
  return trained;
}

// Whole mode, one pass over the file per Lloyd's iteration: the driver's
// job on PassShards, from the given centers or the server's initialisation
// on a sample, stopped by scikit-learn's rule (the points' variance read
// in one pass first).
absl::Status ClusterWholeByPasses(Client& client, PointReader& reader, v1::ClusterRequest base,
                                  const std::vector<float>& weights) {
  const int d = reader.d(), k = base.k();
  const std::vector<float>* weighed = weights.empty() ? nullptr : &weights;
  absl::StatusOr<EmptyClusterPolicy> empty_clusters =
      ParseEmptyClusterPolicy(EngineName<v1::EmptyClusters>(base.empty_clusters()));
  if (!empty_clusters.ok()) return empty_clusters.status();
  if (*empty_clusters != EmptyClusterPolicy::kKeep) {
    return absl::InvalidArgumentError(
        absl::StrCat("--empty_clusters=", EmptyClusterPolicyName(*empty_clusters),
                     " needs resident shards: one pass over the file per iteration keeps an "
                     "empty cluster's center (--empty_clusters=keep)"));
  }
  if (absl::GetFlag(FLAGS_max_points_per_center) > 0) {
    return absl::InvalidArgumentError(
        "--max_points_per_center needs resident shards: one pass over the file per iteration "
        "trains on every point");
  }
  // Initial centers: given, or the server's initialisation on a sample.
  std::vector<float> centers(base.centers().begin(), base.centers().end());
  if (base.init() != v1::INIT_GIVEN) {
    absl::StatusOr<std::vector<float>> chosen = InitOnSample(client, reader, base, weights);
    if (!chosen.ok()) return chosen.status();
    centers = *std::move(chosen);
  }
  // The points' count and mean variance (scikit-learn's tol is relative to
  // it), in one read of the file.
  PointMoments moments;
  int64_t n = 0;
  if (absl::Status s = reader.Rewind(); !s.ok()) return s;
  for (std::vector<float> batch;; batch.clear()) {
    absl::StatusOr<int64_t> got =
        reader.Read(std::max<int64_t>(1, absl::GetFlag(FLAGS_batch_size)), &batch);
    if (!got.ok()) return got.status();
    if (*got == 0) break;
    moments.Add(batch.data(), *got, d);
    n += *got;
  }
  ResidentJobOptions options{
      .k = k,
      .iterations = WholeIterations(),
      .center_tol = absl::GetFlag(FLAGS_tol) * moments.MeanVariance(),
      .weighted = weighed != nullptr,
      .empty_clusters = *empty_clusters,
      .starts = {Matrix<float>(Eigen::Map<const Matrix<float>>(centers.data(), d, k))},
      .labels = !absl::GetFlag(FLAGS_labels_out).empty(),
      .iteration_objectives = absl::GetFlag(FLAGS_step_objectives),
      .log = LogLine};
  PassShards shards(client, reader, base, weighed, n, absl::GetFlag(FLAGS_batch_size),
                    absl::GetFlag(FLAGS_input));
  absl::StatusOr<ResidentJobResult> result = RunResidentJob(options, d, shards);
  if (!result.ok()) return result.status();
  PrintObjectives(*result);
  return WriteResults(*result, n, base);
}

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

// Whole mode's job on resident shards as the flags and the request
// template say: k, iterations, seeding (the given centers as the start),
// empty clusters, n_init, labels, objectives.
absl::StatusOr<ResidentJobOptions> WholeJobOptions(const v1::ClusterRequest& base, int d) {
  absl::StatusOr<EmptyClusterPolicy> empty_clusters =
      ParseEmptyClusterPolicy(EngineName<v1::EmptyClusters>(base.empty_clusters()));
  if (!empty_clusters.ok()) return empty_clusters.status();
  ResidentJobOptions options{
      .k = base.k(),
      .iterations = WholeIterations(),
      .seed = base.seed(),
      .seeding = InitIsKMeansParallel()           ? ResidentSeeding::kKMeansParallel
                 : base.init() == v1::INIT_RANDOM ? ResidentSeeding::kRandom
                 : base.init() == v1::INIT_PLAIN_KMEANS_PLUS_PLUS
                     ? ResidentSeeding::kPlainKMeansPlusPlus
                     : ResidentSeeding::kGreedyKMeansPlusPlus,
      .kmeans_parallel_rounds = absl::GetFlag(FLAGS_kmeans_parallel_rounds),
      .kmeans_parallel_oversampling = absl::GetFlag(FLAGS_kmeans_parallel_oversampling),
      .empty_clusters = *empty_clusters,
      .n_init = std::max(1, base.n_init()),
      .labels = !absl::GetFlag(FLAGS_labels_out).empty(),
      .iteration_objectives = absl::GetFlag(FLAGS_step_objectives),
      .log = LogLine};
  if (base.init() == v1::INIT_GIVEN) {
    options.starts.push_back(
        Matrix<float>(Eigen::Map<const Matrix<float>>(base.centers().data(), d, base.k())));
  }
  return options;
}

// The replicas of a whole-mode job as the flags say.
ReplicaShardOptions WholeReplicaOptions(const Client& client, std::vector<std::string> servers,
                                        std::vector<float> weights) {
  return {.servers = std::move(servers),
          .streams_per_server = std::max(1, absl::GetFlag(FLAGS_streams)),
          .weights = std::move(weights),
          .max_moves = std::max(0, absl::GetFlag(FLAGS_max_attempts)),
          .stream_timeout = absl::GetFlag(FLAGS_timeout),
          .security = client.options().security,
          .log = LogLine};
}

// Writes a whole-mode job's results and prints its objectives and where
// its time went.
absl::Status WriteResidentRun(const ResidentJobResult& result, int64_t n,
                              const v1::ClusterRequest& base, size_t servers,
                              std::chrono::steady_clock::time_point start) {
  const auto written = std::chrono::steady_clock::now();
  if (absl::Status s = WriteResults(result, n, base); !s.ok()) return s;
  const double write_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - written).count();
  const double total =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double iterating = 0;
  for (double t : result.iteration_seconds) iterating += t;
  const int run = result.iterations_run;
  PrintObjectives(result);
  std::printf(
      "resident: %d shards on %zu replicas, %d moved; seconds: load %.3f, init %.3f, "
      "iterations %.3f (%.4f each), labels %.3f, write %.3f, total %.3f\n",
      result.shards, servers, result.shard_moves, result.load_seconds, result.init_seconds,
      iterating, run > 0 ? iterating / run : 0.0, result.labels_seconds, write_seconds, total);
  if (InitIsKMeansParallel()) {
    std::printf("k-means||: %d rounds, %lld candidates\n", result.init_rounds,
                static_cast<long long>(result.init_candidates));
  }
  return absl::OkStatus();
}

// Whole mode on resident shards. A replica without room for its shard
// answers RESOURCE_EXHAUSTED, and the job runs by passes instead.
absl::Status ClusterWhole(Client& client, PointReader& reader, v1::ClusterRequest base) {
  absl::StatusOr<std::vector<float>> weights = ReadWeights();
  if (!weights.ok()) return weights.status();
  if (!absl::GetFlag(FLAGS_resident)) return ClusterWholeByPasses(client, reader, base, *weights);
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
  const PointSource source = [&](int64_t first, int64_t count, float* out) {
    if (reader.n() >= 0) return reader.ReadAt(first, count, out);
    std::copy(parsed.begin() + first * d, parsed.begin() + (first + count) * d, out);
    return absl::OkStatus();
  };
  absl::StatusOr<std::vector<std::string>> servers = ReplicaAddresses(absl::GetFlag(FLAGS_server));
  if (!servers.ok()) return servers.status();
  if (!weights->empty() && static_cast<int64_t>(weights->size()) != n) {
    return absl::InvalidArgumentError(absl::StrCat(absl::GetFlag(FLAGS_weights_in), " has ",
                                                   weights->size(), " weights for ", n, " points"));
  }
  absl::StatusOr<ResidentJobOptions> options = WholeJobOptions(base, d);
  if (!options.ok()) return options.status();
  if (base.init() == v1::INIT_TWO_LEVEL) {
    // The shards have no two-level step: it runs on the server on a sample,
    // as in one pass per iteration.
    absl::StatusOr<std::vector<float>> chosen = InitOnSample(client, reader, base, *weights);
    if (!chosen.ok()) return chosen.status();
    options->starts.push_back(
        Matrix<float>(Eigen::Map<const Matrix<float>>(chosen->data(), d, base.k())));
  }
  const ReplicaShardOptions replicas = WholeReplicaOptions(client, *servers, *weights);
  const int64_t most = absl::GetFlag(FLAGS_max_points_per_center);
  if (most < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--max_points_per_center = ", most,
                                                   ", must be at least 1, or 0 for every point"));
  }
  absl::StatusOr<ResidentJobResult> result =
      most > 0 && most < n && n > most * base.k()
          ? RunOnTrainingSample(reader, replicas, *std::move(options), most * base.k(), n, d,
                                source)
          : RunResidentJobOnReplicas(replicas, *std::move(options), absl::GetFlag(FLAGS_tol), n, d,
                                     source);
  if (!result.ok()) {
    // The job numbers points in the dataset: the file's rows.
    const std::string named = FileRowError(
        std::string(result.status().message()), [](int64_t i) { return i; }, "the dataset",
        absl::GetFlag(FLAGS_input));
    if (!named.empty()) result = absl::Status(result.status().code(), named);
  }
  if (result.status().code() == absl::StatusCode::kResourceExhausted) {
    std::fprintf(stderr,
                 "a replica has no room for its shard (%s); running one pass over the file per "
                 "iteration instead\n",
                 std::string(result.status().message()).c_str());
    return ClusterWholeByPasses(client, reader, base, *weights);
  }
  if (!result.ok()) return result.status();
  return WriteResidentRun(*result, n, base, servers->size(), start);
}

// Whole mode on a sparse file (SVMlight): sparse shards resident on the
// replicas, exact Lloyd's from the nonzeros. No pass over the file per
// iteration and no sample-based initialisation: the file is held as its
// nonzeros and loaded once.
absl::Status ClusterSparse(Client& client, const SvmlightFile& file, v1::ClusterRequest base) {
  const auto start = std::chrono::steady_clock::now();
  const int d = static_cast<int>(file.cols);
  const int64_t n = file.rows;
  if (!absl::GetFlag(FLAGS_resident) || absl::GetFlag(FLAGS_max_points_per_center) > 0 ||
      base.init() == v1::INIT_TWO_LEVEL) {
    return absl::InvalidArgumentError(
        "a sparse --input is clustered on resident shards over all its points: --resident=false, "
        "--max_points_per_center and --init=two-level do not apply to it");
  }
  absl::StatusOr<std::vector<float>> weights = ReadWeights();
  if (!weights.ok()) return weights.status();
  if (!weights->empty() && static_cast<int64_t>(weights->size()) != n) {
    return absl::InvalidArgumentError(absl::StrCat(absl::GetFlag(FLAGS_weights_in), " has ",
                                                   weights->size(), " weights for ", n, " points"));
  }
  absl::StatusOr<std::vector<std::string>> servers = ReplicaAddresses(absl::GetFlag(FLAGS_server));
  if (!servers.ok()) return servers.status();
  absl::StatusOr<ResidentJobOptions> options = WholeJobOptions(base, d);
  if (!options.ok()) return options.status();
  CsrSource<float> source{
      .indptr = file.indptr, .rows = [&file](int64_t first, int64_t count, CsrRows<float>* out) {
        const int64_t begin = file.indptr[first], end = file.indptr[first + count];
        out->indptr.reserve(count + 1);
        for (int64_t i = first; i <= first + count; ++i)
          out->indptr.push_back(file.indptr[i] - begin);
        out->indices.assign(file.indices.begin() + begin, file.indices.begin() + end);
        out->values.assign(file.values.begin() + begin, file.values.begin() + end);
        return absl::OkStatus();
      }};
  absl::StatusOr<ResidentJobResult> result =
      RunResidentJobOnReplicas(WholeReplicaOptions(client, *servers, *weights), *std::move(options),
                               absl::GetFlag(FLAGS_tol), n, d, source);
  if (!result.ok()) {
    const std::string named = FileRowError(
        std::string(result.status().message()), [](int64_t i) { return i; }, "the dataset",
        absl::GetFlag(FLAGS_input));
    if (!named.empty()) return absl::Status(result.status().code(), named);
    return result.status();
  }
  return WriteResidentRun(*result, n, base, servers->size(), start);
}

// An output file that cannot be written is the user's error, found before
// any work: its directory exists and the file can be opened for writing (a
// file that did not exist is not left behind).
absl::Status CheckWritable(absl::string_view flag, const std::string& path) {
  if (path.empty()) return absl::OkStatus();
  const bool existed = access(path.c_str(), F_OK) == 0;
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot write --", flag, "=", path, ": ", std::strerror(errno)));
  }
  close(fd);
  if (!existed) unlink(path.c_str());
  return absl::OkStatus();
}

// --model_out's directory, made if missing (a new version's directory);
// the file itself is not touched before it is written whole, since a server
// may be watching the directory.
absl::Status CheckModelOut(const std::string& path) {
  if (path.empty()) return absl::OkStatus();
  const std::filesystem::path parent = std::filesystem::absolute(path).parent_path();
  std::error_code error;
  std::filesystem::create_directories(parent, error);
  if (error || access(parent.c_str(), W_OK) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("cannot write --model_out=", path, ": ",
                                                   error ? error.message() : std::strerror(errno)));
  }
  return absl::OkStatus();
}

// Flags that only one mode reads are refused in the other.
absl::Status CheckModeFlags(bool whole) {
  const char* const whole_only[] = {"tol",
                                    "weights_in",
                                    "resident",
                                    "sample_size",
                                    "max_points_per_center",
                                    "kmeans_parallel_rounds",
                                    "kmeans_parallel_oversampling",
                                    "model_out"};
  for (const char* flag : whole_only) {
    if (!whole && FlagGiven(flag)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag,
                       " applies to whole mode only (the file as one clustering), and this run "
                       "clusters every batch on its own (--mode=per-batch, or a file of one "
                       "batch)"));
    }
  }
  if (whole) {
    const std::string model = absl::GetFlag(FLAGS_model);
    for (const char* flag : {"model", "parameters", "guard"}) {
      if (FlagGiven(flag) && !(std::string(flag) == "model" && model == "lloyd-onehot")) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", flag,
                         " applies to one batch at a time; whole mode (the file as one "
                         "clustering) runs exact Lloyd's. Give --mode=per-batch to run ",
                         model, " on every batch of --batch_size points on its own"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

// A sparse --input (SVMlight): whole mode alone, on sparse resident shards.
absl::Status RunClusterSparse() {
  const std::string mode = absl::GetFlag(FLAGS_mode);
  if (mode != "auto" && mode != "whole") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--mode=", mode, ": a sparse --input (SVMlight) is clustered as one dataset (whole mode)"));
  }
  if (absl::Status s = CheckModeFlags(true); !s.ok()) return s;
  for (const char* flag : {"labels_out", "centers_out"}) {
    const std::string path = flag == std::string("labels_out") ? absl::GetFlag(FLAGS_labels_out)
                                                               : absl::GetFlag(FLAGS_centers_out);
    if (absl::Status s = CheckWritable(flag, path); !s.ok()) return s;
  }
  if (absl::Status s = CheckModelOut(absl::GetFlag(FLAGS_model_out)); !s.ok()) return s;
  absl::StatusOr<SvmlightFile> file =
      ReadSvmlight(absl::GetFlag(FLAGS_input), absl::GetFlag(FLAGS_d));
  if (!file.ok()) return file.status();
  if (file->cols < 1 || file->cols > std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError(absl::StrCat(
        absl::GetFlag(FLAGS_input), " has d = ", file->cols, " features; needs at least 1"));
  }
  absl::StatusOr<v1::ClusterRequest> base = Template(static_cast<int>(file->cols), true);
  if (!base.ok()) return base.status();
  absl::StatusOr<ClientOptions> options = Options();
  if (!options.ok()) return options.status();
  Client client(*options);
  return ClusterSparse(client, *file, *base);
}

absl::Status RunCluster() {
  if (IsSvmlight(absl::GetFlag(FLAGS_input), absl::GetFlag(FLAGS_format))) {
    return RunClusterSparse();
  }
  absl::StatusOr<std::unique_ptr<PointReader>> reader = PointReader::Open(
      absl::GetFlag(FLAGS_input), absl::GetFlag(FLAGS_format), absl::GetFlag(FLAGS_d));
  if (!reader.ok()) return reader.status();
  std::string mode = absl::GetFlag(FLAGS_mode);
  if (mode == "auto") {
    // One batch is the file's one clustering; more are clustered as one
    // dataset.
    int64_t n = (*reader)->n();
    const int64_t batch_size = absl::GetFlag(FLAGS_batch_size);
    if (n < 0) {
      std::vector<float> values;
      absl::StatusOr<int64_t> got = (*reader)->Read(batch_size + 1, &values);
      if (!got.ok()) return got.status();
      n = *got;
    }
    mode = n > batch_size ? "whole" : "per-batch";
    if (mode == "whole" && FlagGiven("model") && absl::GetFlag(FLAGS_model) != "lloyd-onehot") {
      return absl::InvalidArgumentError(absl::StrCat(
          absl::GetFlag(FLAGS_input), " has more than one batch of --batch_size = ", batch_size,
          " points, and --model=", absl::GetFlag(FLAGS_model),
          " clusters one batch at a time: give --mode=per-batch to cluster every batch on its "
          "own, or a --batch_size that holds the file"));
    }
  } else if (mode != "per-batch" && mode != "whole") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown --mode '", mode, "', expected auto, whole or per-batch"));
  }
  const bool whole = mode == "whole";
  if (absl::Status s = CheckModeFlags(whole); !s.ok()) return s;
  for (const char* flag : {"labels_out", "centers_out"}) {
    const std::string path = flag == std::string("labels_out") ? absl::GetFlag(FLAGS_labels_out)
                                                               : absl::GetFlag(FLAGS_centers_out);
    if (absl::Status s = CheckWritable(flag, path); !s.ok()) return s;
  }
  if (absl::Status s = CheckModelOut(absl::GetFlag(FLAGS_model_out)); !s.ok()) return s;
  absl::StatusOr<v1::ClusterRequest> base =
      Template((*reader)->d(), whole && absl::GetFlag(FLAGS_resident));
  if (!base.ok()) return base.status();
  absl::StatusOr<ClientOptions> options = Options();
  if (!options.ok()) return options.status();
  Client client(*options);
  return whole ? ClusterWhole(client, **reader, *base) : ClusterPerBatch(client, **reader, *base);
}

}  // namespace kmt
