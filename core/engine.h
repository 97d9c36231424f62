// The engine's one entry point. A ServedModel carries everything that defines
// what a model computes, decided once when it is made: an exact Lloyd
// construction for any d and k, or fixed weights (a model file) with their
// embedding, input scaling and whether the fast path runs them. Cluster runs
// it on a validated batch: initial centers, T layers, and labels, centers,
// objectives and cluster sums in the caller's units.
#ifndef KMT_CORE_ENGINE_H_
#define KMT_CORE_ENGINE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/algorithm.h"
#include "core/batch.h"
#include "core/constructions.h"
#include "core/init.h"
#include "core/model.h"
#include "core/transformer.h"

namespace kmt {

template <typename Scalar>
class ServedModel;

// One batch's run as ServedModel::Plan decided it; Cluster runs it. It
// refers to the model and the batch, which outlive it.
template <typename Scalar>
struct ClusterPlan {
  const ServedModel<Scalar>* model = nullptr;
  const Batch<Scalar>* batch = nullptr;
  ParameterValues parameters;  ///< the batch's, the model's defaults filled in
  bool dense = false;          ///< the O(n^2) dense evaluator, else the fast path
};

template <typename Scalar>
class ServedModel {
 public:
  // An exact model: `algorithm` on the circuit `served` (one of
  // algorithm.served()), any d and k (the batch's).
  static ServedModel Exact(const Algorithm& algorithm, const ServedCircuit& served);
  // Fixed weights for the model's d and k, validated here; the fast path runs
  // them if they are exactly a Lloyd construction.
  static absl::StatusOr<ServedModel> FromWeights(Model<Scalar> weights, std::string description);

  const std::string& name() const { return name_; }
  const std::string& description() const { return description_; }
  bool exact() const { return weights_ == nullptr; }
  Embedding embedding() const;
  // Exact models: the circuit they are served on.
  const LloydOptions& circuit() const { return lloyd_; }
  // The algorithm an exact model runs; Lloyd's for fixed weights (the steps
  // a learned model may hand over to).
  const Algorithm& algorithm() const { return *algorithm_; }
  // The parameters a request may set: the algorithm's; none for fixed
  // weights.
  const std::vector<ParameterSpec>& parameters() const;
  InputScaling input_scaling() const;
  // The initialisation of a batch that names none: the first one a learned
  // model was trained from, else kDefaultInit.
  InitMethod default_init() const;
  // The weights; null for an exact construction.
  const Model<Scalar>* weights() const { return weights_.get(); }
  // The same weights guarded (Model::guard), for batches that ask; null
  // for an exact construction, and for weights the fast path runs.
  const Model<Scalar>* guarded_weights() const { return guarded_.get(); }

  // Fixed weights: the batch sizes they run, their own d and k first, then
  // those they serve by padding (Model::padded_sizes). Empty for an exact
  // model, which runs any.
  std::vector<ModelSize> accepted_sizes() const;

  // What this model runs for the batch (ClusterPlan), decided once: the
  // batch is checked against the model (fixed weights need one of their
  // accepted sizes, and a guard needs weights of their own; a parameter must
  // be one the model reads, within its range), its parameters resolved and
  // its path chosen. A batch the model cannot run is INVALID_ARGUMENT.
  absl::StatusOr<ClusterPlan<Scalar>> Plan(const Batch<Scalar>& batch) const;

 private:
  ServedModel() = default;

  std::string name_;
  std::string description_;
  LloydOptions lloyd_;                              // exact: the circuit
  const Algorithm* algorithm_ = &LloydAlgorithm();  // exact: what it computes
  std::shared_ptr<const Model<Scalar>> weights_;    // fixed weights, or null
  std::shared_ptr<const Model<Scalar>> guarded_;    // the same, guarded, or null
  bool fast_ = true;                                // the fast path runs it (hardmax)
};

// The exact models every server serves: each algorithm on each circuit it
// is served as, in the order of Algorithms().
template <typename Scalar>
std::vector<ServedModel<Scalar>> ExactModels();

// Runs a plan. `check` is called before the initialisation's steps and
// before every layer; a non-OK status (deadline, cancellation) stops the
// run and is returned.
template <typename Scalar>
absl::StatusOr<RunResult<Scalar>> Cluster(const ClusterPlan<Scalar>& plan,
                                          const StopCheck& check = {});

// Plans and runs `model` on `batch`, for callers with nothing to decide
// between the two.
template <typename Scalar>
absl::StatusOr<RunResult<Scalar>> Cluster(const ServedModel<Scalar>& model,
                                          const Batch<Scalar>& batch, const StopCheck& check = {});

}  // namespace kmt

#endif  // KMT_CORE_ENGINE_H_
