// kmt-train: trains one k-means transformer (one layer, re-embedded at every
// step) per (d, k, embedding) on a distribution of clustering tasks, or on
// random subsets of a user's dataset with a part of it held out, with a
// progress bar, checkpoints and resume, and writes the model file with its
// provenance. Defaults are the papers' main setting.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/command_line.h"
#include "core/engine_flags.h"
#include "core/init.h"
#include "learn/dataset.h"
#include "learn/evaluation.h"
#include "learn/trainer.h"
#include "proto/model_file.h"
#include "proto/training_checkpoint.pb.h"

ABSL_FLAG(int, d, 32, "dimensions of the tasks");
ABSL_FLAG(int, k, 10, "clusters of the tasks");
ABSL_FLAG(int, n, 512, "points per task");
ABSL_FLAG(std::string, embedding, "onehot", "cluster registers: onehot, binary or none");
ABSL_FLAG(std::string, family, "normal",
          "noise family: normal, laplace, gumbel, lognormal, cauchy");
ABSL_FLAG(double, scale, 0.1, "per-dimension scale of a component");
ABSL_FLAG(int64_t, steps, 10000, "optimiser steps");
ABSL_FLAG(int, batch, 32, "tasks per step");
ABSL_FLAG(double, lr, 0.01, "Adam's initial learning rate");
ABSL_FLAG(double, clip, 1.0, "gradient-norm clipping threshold");
ABSL_FLAG(double, tau, 0.1, "temperature of the smoothed objective");
ABSL_FLAG(std::string, loss, "softmax", "loss weights: softmax or sparsemax");
ABSL_FLAG(int, eval_every, 200, "steps between validation runs");
ABSL_FLAG(int, validation_tasks, 64, "held-out tasks for the validation ratio");
ABSL_FLAG(int, patience, 5, "validations without improvement before the rate halves");
ABSL_FLAG(uint64_t, seed, 1, "seed of the weights and the tasks");
ABSL_FLAG(std::string, init, "random",
          "initial centers of the tasks, comma-separated, taken in turn: random, kmeans++, "
          "plain-kmeans++; the model records them, the first as its default");
ABSL_FLAG(std::string, name, "", "model name (default learned-<embedding>-d<d>-k<k>)");
ABSL_FLAG(std::string, out, "", "model file to write (default models/<name>.kmt)");
ABSL_FLAG(std::string, checkpoint, "", "checkpoint file (default <out>.ckpt)");
ABSL_FLAG(int64_t, checkpoint_every, 500, "steps between checkpoints");
ABSL_FLAG(bool, resume, false, "continue from the checkpoint if it exists");
ABSL_FLAG(std::string, data, "",
          "train on a dataset instead (.npy, float32 or float64, shape (N, d)): each task is --n "
          "points drawn from its --data_train_rows, the model's d the file's (--d is ignored)");
ABSL_FLAG(std::string, data_train_rows, "",
          "rows of --data to train and validate on, A:B (rows A to B - 1), A: or :B; the others "
          "are held out, for kmt-eval --data_rows; empty: the first 80%");
ABSL_FLAG(int, lloyd_after, 0,
          "the model file runs its layer for this many steps and exact Lloyd's steps after "
          "(0: the layer throughout); training is the same. With --data, unless given, chosen "
          "on the validation rows");
ABSL_FLAG(std::string, data_validation_rows, "",
          "rows of --data the trained model is measured on against Lloyd's, A:B; empty: the "
          "first half of the rows after the training rows (or before them, if none follow), "
          "the rest left for kmt-eval --data_rows");
ABSL_FLAG(int, data_validation_tasks, 200, "validation tasks per initialisation");
ABSL_FLAG(int, data_validation_steps, 10, "steps of each validation task");
ABSL_FLAG(bool, write_behind_lloyd, false,
          "with --data, write the model even if it is not ahead of Lloyd's on its validation "
          "rows (its mean log objective below Lloyd's by two standard errors and 0.001); it is "
          "then listed as not ahead");
ABSL_FLAG(bool, random_sizes, false,
          "each task of random d' in 2..d and k' in 2..k, padded to d and k as the server "
          "pads a smaller batch (zero coordinates, the other centers masked)");
ABSL_FLAG(int64_t, stop_after, 0,
          "stop (with a checkpoint) after this many steps in this run; 0: run to the end");

namespace kmt {
namespace {

// The part of a --data file a run trains on.
struct DataSource {
  std::string path;
  int64_t rows = 0;  ///< in the file
  RowRange train;
  RowRange validation;
  std::shared_ptr<const Matrix<float>> validation_points;
};

// Reads --data into o->data (its training rows) and sets o->tasks.d.
absl::StatusOr<DataSource> LoadData(TrainerOptions* o) {
  DataSource source{.path = absl::GetFlag(FLAGS_data)};
  absl::StatusOr<std::shared_ptr<const Matrix<float>>> points = ReadDataset(source.path);
  if (!points.ok()) return points.status();
  source.rows = (*points)->cols();
  std::string rows = absl::GetFlag(FLAGS_data_train_rows);
  if (rows.empty()) rows = absl::StrCat("0:", source.rows * 4 / 5);
  absl::StatusOr<RowRange> train = ParseRowRange(rows, source.rows);
  if (!train.ok()) return train.status();
  source.train = *train;
  if (source.train.end - source.train.first < o->tasks.n) {
    return absl::InvalidArgumentError(absl::StrCat("--data_train_rows=", rows, " has ",
                                                   source.train.end - source.train.first,
                                                   " rows, fewer than a task's --n=", o->tasks.n));
  }
  std::string held = absl::GetFlag(FLAGS_data_validation_rows);
  if (held.empty()) {
    // Half of the rows after the training rows, or before them.
    const RowRange after{source.train.end, source.rows}, before{0, source.train.first};
    const RowRange& rest = after.end > after.first ? after : before;
    held = absl::StrCat(rest.first, ":", rest.first + (rest.end - rest.first + 1) / 2);
  }
  absl::StatusOr<RowRange> validation = ParseRowRange(held, source.rows);
  if (!validation.ok()) {
    return absl::Status(validation.status().code(),
                        absl::StrCat("validation rows ", held,
                                     " (--data_validation_rows): ", validation.status().message()));
  }
  source.validation = *validation;
  if (source.validation.first < source.train.end && source.train.first < source.validation.end) {
    return absl::InvalidArgumentError(
        absl::StrCat("validation rows ", held, " overlap the training rows ", rows));
  }
  if (source.validation.end - source.validation.first < o->tasks.k) {
    return absl::InvalidArgumentError(
        absl::StrCat("validation rows ", held, " are fewer than k = ", o->tasks.k));
  }
  o->tasks.d = static_cast<int>((*points)->rows());
  o->data = DatasetRows(**points, source.train);
  source.validation_points = DatasetRows(**points, source.validation);
  return source;
}

absl::StatusOr<TrainerOptions> Options() {
  TrainerOptions o;
  o.tasks.d = absl::GetFlag(FLAGS_d);
  o.tasks.k = absl::GetFlag(FLAGS_k);
  o.tasks.n = absl::GetFlag(FLAGS_n);
  o.tasks.scale = absl::GetFlag(FLAGS_scale);
  absl::StatusOr<Family> family = ParseFamily(absl::GetFlag(FLAGS_family));
  if (!family.ok()) return family.status();
  o.tasks.family = *family;
  absl::StatusOr<Embedding> embedding = ParseEmbedding(absl::GetFlag(FLAGS_embedding));
  if (!embedding.ok()) return embedding.status();
  o.embedding = *embedding;
  absl::StatusOr<LossForm> loss = ParseLossForm(absl::GetFlag(FLAGS_loss));
  if (!loss.ok()) return loss.status();
  o.loss = *loss;
  o.steps = absl::GetFlag(FLAGS_steps);
  o.batch = absl::GetFlag(FLAGS_batch);
  o.learning_rate = absl::GetFlag(FLAGS_lr);
  o.clip_norm = absl::GetFlag(FLAGS_clip);
  o.tau = absl::GetFlag(FLAGS_tau);
  o.eval_every = absl::GetFlag(FLAGS_eval_every);
  o.validation_tasks = absl::GetFlag(FLAGS_validation_tasks);
  o.patience = absl::GetFlag(FLAGS_patience);
  o.seed = absl::GetFlag(FLAGS_seed);
  o.random_sizes = absl::GetFlag(FLAGS_random_sizes);
  o.inits.clear();
  for (absl::string_view name : absl::StrSplit(absl::GetFlag(FLAGS_init), ',')) {
    absl::StatusOr<InitMethod> method = ParseInitMethod(name);
    if (!method.ok()) return method.status();
    if (std::find(o.inits.begin(), o.inits.end(), *method) != o.inits.end()) {
      return absl::InvalidArgumentError(absl::StrCat("--init names ", name, " twice"));
    }
    o.inits.push_back(*method);
  }
  if (o.tasks.d < 1 || o.tasks.k < 1 || o.tasks.n < o.tasks.k || o.batch < 1 || o.steps < 0) {
    return absl::InvalidArgumentError("need d >= 1, k >= 1, n >= k, batch >= 1, steps >= 0");
  }
  return o;
}

std::string InitsName(const std::vector<InitMethod>& inits) {
  return absl::StrJoin(inits, ",", [](std::string* out, InitMethod method) {
    absl::StrAppend(out, InitMethodName(method));
  });
}

// The options that decide the result, one per line: stored in checkpoints
// and in the model's provenance.
std::string Config(const TrainerOptions& o) {
  return absl::StrFormat(
             "d=%d\nk=%d\nn=%d\nembedding=%s\nfamily=%s\nscale=%g\nsteps=%d\nbatch=%d\nlr=%g\n"
             "clip=%g\ntau=%g\nloss=%s\neval_every=%d\nvalidation_tasks=%d\npatience=%d\nseed=%d\n"
             "init=%s\n",
             o.tasks.d, o.tasks.k, o.tasks.n, EmbeddingName(o.embedding),
             FamilyName(o.tasks.family), o.tasks.scale, o.steps, o.batch, o.learning_rate,
             o.clip_norm, o.tau, LossFormName(o.loss), o.eval_every, o.validation_tasks, o.patience,
             o.seed, InitsName(o.inits)) +
         // Only when set, so that the checkpoints of other runs still resume.
         (o.random_sizes ? "random_sizes=true\n" : "");
}

// What a --data run adds to its configuration, before the other options:
// the file and the rows it trains on.
std::string DataConfig(const TrainerOptions& o, const DataSource& data) {
  if (!o.data) return "";
  return absl::StrFormat("data=%s\ndata_rows=%s\n", data.path, RowRangeName(data.train));
}

absl::Status SaveCheckpoint(const std::string& path, const std::string& config,
                            const TrainerState& s) {
  training::v1::TrainingCheckpoint c;
  c.set_training_config(config);
  c.set_step(s.step);
  c.mutable_params()->Add(s.params.data(), s.params.data() + s.params.size());
  c.mutable_adam_m()->Add(s.adam_m.data(), s.adam_m.data() + s.adam_m.size());
  c.mutable_adam_v()->Add(s.adam_v.data(), s.adam_v.data() + s.adam_v.size());
  c.set_learning_rate(s.learning_rate);
  c.set_best_validation(s.best_validation);
  c.set_evals_since_best(s.evals_since_best);
  return WriteMessage(c, path);
}

absl::Status LoadCheckpoint(const std::string& path, const std::string& config, TrainerState* s) {
  training::v1::TrainingCheckpoint c;
  if (absl::Status status = ReadMessage(path, &c); !status.ok()) return status;
  if (c.training_config() != config) {
    return absl::FailedPreconditionError(absl::StrCat(path, " was made with other options:\n",
                                                      c.training_config(), "now:\n", config));
  }
  if (c.params_size() != s->params.size()) {
    return absl::DataLossError(
        absl::StrCat(path, " has ", c.params_size(), " weights, expected ", s->params.size()));
  }
  s->step = c.step();
  s->params = Eigen::Map<const Vector<double>>(c.params().data(), c.params_size());
  s->adam_m = Eigen::Map<const Vector<double>>(c.adam_m().data(), c.adam_m_size());
  s->adam_v = Eigen::Map<const Vector<double>>(c.adam_v().data(), c.adam_v_size());
  s->learning_rate = c.learning_rate();
  s->best_validation = c.best_validation();
  s->evals_since_best = c.evals_since_best();
  return absl::OkStatus();
}

std::string Bar(double fraction) {
  const int width = 24, filled = static_cast<int>(fraction * width);
  return "[" + std::string(filled, '=') + (filled < width ? ">" : "") +
         std::string(std::max(0, width - filled - 1), ' ') + "]";
}

absl::Status Run() {
  absl::StatusOr<TrainerOptions> options = Options();
  if (!options.ok()) return options.status();
  if (absl::GetFlag(FLAGS_lloyd_after) < 0) {
    return absl::InvalidArgumentError("--lloyd_after must not be negative");
  }
  if (absl::GetFlag(FLAGS_data_validation_tasks) < 2 ||
      absl::GetFlag(FLAGS_data_validation_steps) < 1) {
    return absl::InvalidArgumentError(
        "--data_validation_tasks must be at least 2 and --data_validation_steps at least 1");
  }
  DataSource data;
  if (!absl::GetFlag(FLAGS_data).empty()) {
    if (options->random_sizes) {
      return absl::InvalidArgumentError(
          "--random_sizes draws each task's d, and --data's tasks have the file's");
    }
    absl::StatusOr<DataSource> loaded = LoadData(&*options);
    if (!loaded.ok()) return loaded.status();
    data = *std::move(loaded);
    std::fprintf(stderr,
                 "training on rows %s of %s (%lld rows of d = %d), validating on rows %s; the "
                 "others held out\n",
                 RowRangeName(data.train).c_str(), data.path.c_str(),
                 static_cast<long long>(data.rows), options->tasks.d,
                 RowRangeName(data.validation).c_str());
  }
  const TrainerOptions& o = *options;
  std::string name = absl::GetFlag(FLAGS_name);
  if (name.empty() && o.data) {
    name = absl::StrCat("learned-", EmbeddingName(o.embedding), "-",
                        std::filesystem::path(data.path).stem().string(), "-k", o.tasks.k);
  }
  if (name.empty()) {
    name = absl::StrCat("learned-", EmbeddingName(o.embedding), "-d", o.tasks.d, "-k", o.tasks.k);
  }
  std::string out = absl::GetFlag(FLAGS_out);
  if (out.empty()) out = absl::StrCat("models/", name, ".kmt");
  std::string checkpoint = absl::GetFlag(FLAGS_checkpoint);
  if (checkpoint.empty()) checkpoint = out + ".ckpt";
  const std::string config = DataConfig(o, data) + Config(o);

  TrainerState state = InitialState(o);
  if (absl::GetFlag(FLAGS_resume) && std::ifstream(checkpoint).good()) {
    if (absl::Status s = LoadCheckpoint(checkpoint, config, &state); !s.ok()) return s;
    std::fprintf(stderr, "resuming %s at step %lld\n", checkpoint.c_str(),
                 static_cast<long long>(state.step));
  }
  const int64_t stop_after = absl::GetFlag(FLAGS_stop_after);
  const int64_t until = stop_after > 0 ? std::min(o.steps, state.step + stop_after) : o.steps;
  const int64_t every = std::max<int64_t>(1, absl::GetFlag(FLAGS_checkpoint_every));
  const int64_t first = state.step;
  const auto start = std::chrono::steady_clock::now();
  double loss = 0, validation = NAN;
  absl::Status save_status;
  const absl::Status trained = Train(o, until, &state, [&](const StepReport& r) {
    loss = r.loss;
    if (r.validated) validation = r.validation_ratio;
    if (r.step % every == 0) {
      save_status.Update(SaveCheckpoint(checkpoint, config, state));
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double rate = (r.step - first) / std::max(seconds, 1e-9);
    std::fprintf(
        stderr, "\r%s step %lld/%lld loss %.4g val %.4f lr %.3g %.1f steps/s ETA %s   ",
        Bar(static_cast<double>(r.step) / o.steps).c_str(), static_cast<long long>(r.step),
        static_cast<long long>(o.steps), r.loss, validation, r.learning_rate, rate,
        absl::FormatDuration(absl::Seconds(std::round((o.steps - r.step) / rate))).c_str());
  });
  std::fprintf(stderr, "\n");
  if (!save_status.ok()) return save_status;
  if (absl::Status s = SaveCheckpoint(checkpoint, config, state); !s.ok()) return s;
  if (!trained.ok()) {
    return absl::Status(trained.code(), absl::StrCat(trained.message(), " in ", checkpoint,
                                                     "; no model was written"));
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (state.step < o.steps) {
    std::printf("stopped at step %lld; resume with --resume\n", static_cast<long long>(state.step));
    return absl::OkStatus();
  }

  const Model<float> model = ModelFromParams(o, state.params, name);
  const double final_validation = ValidationRatio(o, model);
  v1::ModelFile file = ModelToProto(model);
  file.set_description(absl::StrCat(
      "one learned layer applied per step with re-embedding, trained on ",
      FamilyName(o.tasks.family), " mixtures (n = ", o.tasks.n, ", d = ", o.tasks.d,
      ", k = ", o.tasks.k, ") scaled to [0, 1], from ", InitsName(o.inits), " initial centers",
      o.random_sizes ? ", each task of random d <= " : "",
      o.random_sizes ? absl::StrCat(o.tasks.d, " and k <= ", o.tasks.k, " padded") : ""));
  if (o.data) {
    file.set_description(absl::StrCat(
        "one learned layer applied per step with re-embedding, trained on subsets of n = ",
        o.tasks.n, " points of rows ", RowRangeName(data.train), " of ",
        std::filesystem::path(data.path).filename().string(), " (d = ", o.tasks.d,
        ", k = ", o.tasks.k, ") through the global min-max map, from ", InitsName(o.inits),
        " initial centers"));
  }
  int after = absl::GetFlag(FLAGS_lloyd_after);
  std::optional<HandOverChoice> validated;
  if (o.data) {
    // Measured against Lloyd's on the validation rows from each start it is
    // served with; the hand-over chosen there unless given.
    const int steps = absl::GetFlag(FLAGS_data_validation_steps);
    std::vector<int> candidates = {after};
    if (!FlagGiven("lloyd_after")) {
      candidates.clear();
      for (int l = 0; l < steps; ++l) candidates.push_back(l);
    }
    validated = ChooseHandOver(model, data.validation_points, o.tasks.n, o.inits,
                               absl::GetFlag(FLAGS_data_validation_tasks), steps,
                               o.seed * 1000003 + 17, candidates);
    after = validated->lloyd_after;
    for (size_t i = 0; i < o.inits.size(); ++i) {
      std::printf(
          "validation (rows %s, %s starts, %d steps): %+.4f +- %.4f log objective against "
          "Lloyd's%s\n",
          RowRangeName(data.validation).c_str(), std::string(InitMethodName(o.inits[i])).c_str(),
          steps, validated->gain[i], validated->standard_error[i],
          i == 0 ? absl::StrCat(", Lloyd's after layer ", after).c_str() : "");
    }
    if (!validated->ahead && !absl::GetFlag(FLAGS_write_behind_lloyd)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the model is not ahead of Lloyd's on its validation rows by two standard errors and ",
          kMeaningfulGain, " (",
          absl::StrFormat("%+.4f +- %.4f", validated->gain[0], validated->standard_error[0]),
          " from ", InitMethodName(o.inits[0]),
          " starts); no model was written. Train longer or otherwise, or write it anyway with "
          "--write_behind_lloyd (it is then listed as behind)"));
    }
  }
  if (after != 0) {
    file.set_lloyd_after(after);
    file.set_description(
        absl::StrCat(file.description(), "; exact Lloyd's steps after ", after, " layers"));
  }
  if (validated && !validated->ahead) {
    file.set_description(
        absl::StrCat(file.description(), "; NOT ahead of Lloyd's on its validation rows"));
  }
  v1::Provenance* p = file.mutable_provenance();
  p->set_training_config(config);
  p->set_seed(o.seed);
  (*p->mutable_final_metrics())["loss"] = loss;
  (*p->mutable_final_metrics())["validation_ratio"] = final_validation;
  (*p->mutable_final_metrics())["steps"] = static_cast<double>(o.steps);
  (*p->mutable_final_metrics())["seconds_this_run"] = seconds;
  if (validated) {
    auto& metrics = *p->mutable_final_metrics();
    metrics["validation_first_row"] = static_cast<double>(data.validation.first);
    metrics["validation_end_row"] = static_cast<double>(data.validation.end);
    metrics["validation_tasks"] = absl::GetFlag(FLAGS_data_validation_tasks);
    metrics["validation_steps"] = absl::GetFlag(FLAGS_data_validation_steps);
    metrics["validation_lloyd_after"] = after;
    metrics["validation_ahead"] = validated->ahead ? 1 : 0;
    for (size_t i = 0; i < o.inits.size(); ++i) {
      const std::string init(InitMethodName(o.inits[i]));
      metrics["validation_gain_" + init] = validated->gain[i];
      metrics["validation_se_" + init] = validated->standard_error[i];
    }
  }
  p->set_created(absl::FormatTime(absl::RFC3339_sec, absl::Now(), absl::UTCTimeZone()));
  p->set_trainer("kmt-train " KMT_VERSION);
  if (absl::Status s = WriteModelFile(file, out); !s.ok()) return s;
  std::printf(
      "wrote %s: validation ratio %.4f (objective after one layer / after one Lloyd's "
      "step), %.1f s, %.2f steps/s\n",
      out.c_str(), final_validation, seconds, (o.steps - first) / seconds);
  if (validated) {
    std::printf("%s\n", validated->ahead ? "ahead of Lloyd's on its validation rows"
                                         : "NOT ahead of Lloyd's on its validation rows");
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace kmt

int main(int argc, char** argv) {
  kmt::ParseCommandLine(
      "Trains a one-layer k-means transformer on generated clustering tasks, or on\n"
      "subsets of a dataset (--data), and writes it as a model file the server\n"
      "loads (--out).",
      argc, argv, kmt::EngineFlags());
  const absl::Status status = kmt::Run();
  if (!status.ok()) {
    std::fprintf(stderr, "kmt-train: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
