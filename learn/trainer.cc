#include "learn/trainer.h"

#include <omp.h>
#include <pmmintrin.h>

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "core/assign.h"
#include "core/init.h"
#include "core/input_scaling.h"
#include "core/padding.h"
#include "core/random.h"
#include "core/transformer.h"
#include "learn/evaluation.h"
#include "learn/learned_layer.h"

namespace kmt {
namespace {

// A seed for (purpose, step, index): independent streams from one seed.
uint64_t MixSeed(uint64_t seed, uint64_t a, uint64_t b) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull ^ (a + 0x632be59bd9b4e019ull) * 0xbf58476d1ce4e5b9ull ^
               (b + 1) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  x *= 0xd6e9f4a4c6b1f0d5ull;
  return x ^ (x >> 29);
}

constexpr uint64_t kTrainTasks = 1, kValidationTasks = 2, kInitSeeds = 3;

// For its lifetime, the calling thread's float arithmetic treats subnormal
// inputs and results as zero (x86's DAZ and FTZ). As a model sharpens, many
// softmax weights and their gradients fall below float's normal range, where
// every operation costs tens of cycles: a mixed-init run went from 14 steps/s
// at its start to 1.6 steps/s at step 5,500. Beside a softmax column's
// largest term, 1 before normalising, values that small vanish in its sum
// anyway; elsewhere they change last bits at most.
class FlushSubnormals {
 public:
  FlushSubnormals() : saved_(_mm_getcsr()) {
    _MM_SET_FLUSH_ZERO_MODE(_MM_FLUSH_ZERO_ON);
    _MM_SET_DENORMALS_ZERO_MODE(_MM_DENORMALS_ZERO_ON);
  }
  ~FlushSubnormals() { _mm_setcsr(saved_); }
  FlushSubnormals(const FlushSubnormals&) = delete;
  FlushSubnormals& operator=(const FlushSubnormals&) = delete;

 private:
  const unsigned saved_;
};

int Dim(const TrainerOptions& o) { return o.tasks.d + RegisterDim(o.embedding, o.tasks.k); }

// Visits the six tensors of each block in a fixed order.
template <typename Weights, typename Fn>
void ForEachTensor(Weights& w, Fn fn) {
  for (auto& block : w.blocks) {
    fn(block.Q.data(), block.Q.size());
    fn(block.K.data(), block.K.size());
    fn(block.V.data(), block.V.size());
    fn(block.bQ.data(), block.bQ.size());
    fn(block.bK.data(), block.bK.size());
    fn(block.bV.data(), block.bV.size());
  }
}

LayerWeights<float> WeightsFromParams(const TrainerOptions& o, const Vector<double>& params) {
  const int dim = Dim(o);
  LayerWeights<float> w;
  for (AttentionBlock<float>& block : w.blocks) {
    block = AttentionBlock<float>::Zero(dim);
    block.normalizer = Normalizer::kSoftmax;
    block.beta = 1.0f / std::sqrt(static_cast<float>(dim));
  }
  Eigen::Index at = 0;
  ForEachTensor(w, [&](float* data, Eigen::Index size) {
    for (Eigen::Index i = 0; i < size; ++i) data[i] = static_cast<float>(params[at++]);
  });
  return w;
}

int64_t ParamCount(const TrainerOptions& o) {
  const int64_t dim = Dim(o);
  return 4 * (3 * dim * dim + 3 * dim);
}

// The points of the task drawn with `task_seed`, of `options`' n and d:
// generated, or a subset of the dataset seen as the served model will see a
// batch, through the global min-max map (its k-means problem is the
// subset's, up to a translation and one scale).
Matrix<float> TaskPoints(const TrainerOptions& o, const TaskOptions& options, uint64_t task_seed) {
  if (!o.data) return GenerateTask<float>(options, task_seed).points;
  const Matrix<float> subset = DataTask(*o.data, options.n, task_seed);
  return InputMap<float>(InputScaling::kGlobalMinMax, subset).ToModel(subset);
}

// Initial centers of the task drawn with `task_seed`, the index-th of its
// kind: a random subset is the first k points (the points are drawn in
// random order); k-means++ draws its own with a seed from the task's.
Matrix<float> TaskInit(const TrainerOptions& o, int k, const Matrix<float>& points,
                       uint64_t task_seed, int64_t index) {
  const InitMethod method = o.inits[index % o.inits.size()];
  if (method == InitMethod::kRandomSubset) return points.leftCols(k);
  return *ChooseInitialCenters(points, k, method, MixSeed(task_seed, kInitSeeds, 0));
}

// A task in its own d' and k' (the options' d and k unless random_sizes):
// its points (d' x n) and initial centers (d' x k').
struct SizedTask {
  Matrix<float> points;
  Matrix<float> init;
};

SizedTask DrawTask(const TrainerOptions& o, uint64_t task_seed, int64_t index) {
  TaskOptions options = o.tasks;
  if (o.random_sizes) {
    const TaskSize size = DrawTaskSize(o.tasks, task_seed);
    options.d = size.d;
    options.k = size.k;
  }
  SizedTask task;
  task.points = TaskPoints(o, options, task_seed);
  task.init = TaskInit(o, options.k, task.points, task_seed, index);
  return task;
}

}  // namespace

TrainerState InitialState(const TrainerOptions& o) {
  TrainerState s;
  const int64_t count = ParamCount(o);
  const double bound = 1 / std::sqrt(static_cast<double>(Dim(o)));
  Rng rng(MixSeed(o.seed, 0, 0));
  s.params.resize(count);
  for (int64_t i = 0; i < count; ++i) s.params[i] = bound * (2 * rng.Uniform() - 1);
  s.adam_m = Vector<double>::Zero(count);
  s.adam_v = Vector<double>::Zero(count);
  s.learning_rate = o.learning_rate;
  s.best_validation = INFINITY;
  return s;
}

Model<float> ModelFromParams(const TrainerOptions& o, const Vector<double>& params,
                             const std::string& name) {
  Model<float> model;
  model.name = name;
  model.d = o.tasks.d;
  model.k = o.tasks.k;
  model.embedding = o.embedding;
  model.reembed = true;
  model.keep_empty_centers = false;
  // Trained on tasks in [0, 1]^d: served through the map onto that box that
  // keeps the caller's k-means problem (one scale for every dimension).
  model.input_scaling = o.tasks.min_max_scale ? InputScaling::kGlobalMinMax : InputScaling::kNone;
  model.layers.push_back(WeightsFromParams(o, params));
  model.trained_inits = o.inits;
  return model;
}

double ValidationRatio(const TrainerOptions& o, const Model<float>& model) {
  std::vector<double> ratios(o.validation_tasks);
#pragma omp parallel for schedule(dynamic)
  for (int t = 0; t < o.validation_tasks; ++t) {
    const FlushSubnormals flush;
    const uint64_t seed = MixSeed(o.seed, kValidationTasks, t);
    const SizedTask task = DrawTask(o, seed, t);
    const absl::StatusOr<RunResult<float>> learned =
        RunPadded(model, task.points, task.init, {.layers = 1});
    const double lloyd = RunLloyd<float>({}, task.points, task.init, {.layers = 1})->objective;
    ratios[t] = learned.ok() ? learned->objective / lloyd : std::numeric_limits<double>::infinity();
  }
  double sum = 0;
  for (double r : ratios) sum += r;
  return sum / o.validation_tasks;
}

absl::Status Train(const TrainerOptions& o, int64_t until, TrainerState* s,
                   const std::function<void(const StepReport&)>& report) {
  until = std::min(until, o.steps);
  const int64_t count = ParamCount(o);
  std::vector<Vector<double>> task_grads(o.batch, Vector<double>(count));
  std::vector<double> task_loss(o.batch);
  // One workspace per thread, kept across tasks and steps: after the first
  // task no large buffer is allocated (allocated per task, they made page
  // faults a third of the training's profile).
  struct Workspace {
    LayerCache<float> cache;
    LayerWeights<float> grad;
    Matrix<float> d_centers;
    Matrix<float> d_own;  // the loss gradient in the task's own d' rows
  };
  std::vector<Workspace> workspaces(omp_get_max_threads(),
                                    Workspace{{}, ZeroLike(WeightsFromParams(o, s->params)), {}});
  while (s->step < until) {
    const LayerWeights<float> w = WeightsFromParams(o, s->params);
    // Per-task gradients, summed in task order below: the result does not
    // depend on how tasks fall on threads.
#pragma omp parallel for schedule(dynamic)
    for (int t = 0; t < o.batch; ++t) {
      const FlushSubnormals flush;
      Workspace& ws = workspaces[omp_get_thread_num()];
      const int64_t index = s->step * o.batch + t;
      const uint64_t seed = MixSeed(o.seed, kTrainTasks, index);
      const SizedTask task = DrawTask(o, seed, index);
      const int d = static_cast<int>(task.points.rows());
      const Matrix<float> centers =
          d < o.tasks.d
              ? LayerForward(w, o.embedding, PadRows(task.points, o.tasks.d),
                             PadRows(task.init, o.tasks.d), &ws.cache, o.tasks.k)
              : LayerForward(w, o.embedding, task.points, task.init, &ws.cache, o.tasks.k);
      // The served run holds the padded coordinates of the centers at zero:
      // the loss is the task's own, of the centers' first d' rows.
      ws.d_own.setZero(d, centers.cols());
      const float scale = 1.0f / static_cast<float>(o.batch);
      task_loss[t] = SmoothedObjective<float>(task.points, Matrix<float>(centers.topRows(d)), o.tau,
                                              o.loss, scale, &ws.d_own) /
                     o.batch;
      ws.d_centers.setZero(centers.rows(), centers.cols());
      ws.d_centers.topRows(d) = ws.d_own;
      SetZero(&ws.grad);
      LayerBackward(w, ws.d_centers, &ws.cache, &ws.grad);
      Eigen::Index at = 0;
      ForEachTensor(ws.grad, [&](float* data, Eigen::Index size) {
        for (Eigen::Index i = 0; i < size; ++i) task_grads[t][at++] = data[i];
      });
    }
    Vector<double> g = Vector<double>::Zero(count);
    StepReport r;
    for (int t = 0; t < o.batch; ++t) {
      g += task_grads[t];
      r.loss += task_loss[t];
    }
    r.gradient_norm = g.norm();
    if (!std::isfinite(r.loss) || !std::isfinite(r.gradient_norm)) {
      return absl::FailedPreconditionError(
          absl::StrCat("step ", s->step + 1, ": the loss is ", r.loss, " and the gradient's norm ",
                       r.gradient_norm,
                       "; the training diverged (a lower --lr or --clip "
                       "may hold it), and the weights of step ",
                       s->step, " are kept"));
    }
    if (r.gradient_norm > o.clip_norm) {
      g *= o.clip_norm / r.gradient_norm;
    }
    // Adam with bias correction.
    const double t = static_cast<double>(s->step + 1);
    s->adam_m = o.beta1 * s->adam_m + (1 - o.beta1) * g;
    s->adam_v = o.beta2 * s->adam_v + (1 - o.beta2) * g.cwiseAbs2();
    const double c1 = 1 - std::pow(o.beta1, t), c2 = 1 - std::pow(o.beta2, t);
    s->params.array() -=
        s->learning_rate * (s->adam_m.array() / c1) / ((s->adam_v.array() / c2).sqrt() + o.epsilon);
    // The state is complete for this step before anyone sees the report.
    r.step = ++s->step;
    r.learning_rate = s->learning_rate;
    if (o.eval_every > 0 && r.step % o.eval_every == 0) {
      r.validated = true;
      r.validation_ratio = ValidationRatio(o, ModelFromParams(o, s->params, ""));
      if (r.validation_ratio < s->best_validation - 1e-4) {
        s->best_validation = r.validation_ratio;
        s->evals_since_best = 0;
      } else if (++s->evals_since_best >= o.patience) {
        s->learning_rate /= 2;
        s->evals_since_best = 0;
      }
    }
    if (report) report(r);
  }
  return absl::OkStatus();
}

}  // namespace kmt
