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
#include "core/batch.h"
#include "core/constructions.h"
#include "core/init.h"
#include "core/model.h"
#include "core/transformer.h"

namespace kmt {

// A request field a model reads (beta, tau or gamma): 0 in the request
// means `default_value`; other values must lie in the range.
struct ParameterSpec {
  std::string name;            ///< the request field
  std::string description;     ///< what it does, for ListModels
  double default_value = 0;    ///< used when the request leaves the field 0
  double min = 0;              ///< lower end of the valid range
  double max = 0;              ///< upper end (may be infinity)
  bool min_exclusive = false;  ///< (min, max] rather than [min, max]
};

template <typename Scalar>
class ServedModel {
 public:
  // An exact construction of `algorithm` over the Lloyd circuit `options`:
  // any d and k (the batch's), reading the parameters listed. The name is
  // the construction's unless given.
  static ServedModel Exact(const LloydOptions& options, std::string description,
                           Algorithm algorithm = Algorithm::kLloyd,
                           std::vector<ParameterSpec> parameters = {}, std::string name = "");
  // Fixed weights for the model's d and k, validated here; the fast path runs
  // them if they are exactly a Lloyd construction.
  static absl::StatusOr<ServedModel> FromWeights(Model<Scalar> weights, std::string description);

  const std::string& name() const { return name_; }
  const std::string& description() const { return description_; }
  bool exact() const { return weights_ == nullptr; }
  Embedding embedding() const;
  // Exact constructions: how theta3 forms the cluster mean.
  Theta3Form theta3() const { return lloyd_.theta3; }
  Algorithm algorithm() const { return algorithm_; }
  const std::vector<ParameterSpec>& parameters() const { return parameters_; }
  InputScaling input_scaling() const;
  // The initialisation of a batch that names none: the first one a learned
  // model was trained from, else kDefaultInit.
  InitMethod default_init() const;
  // The weights; null for an exact construction.
  const Model<Scalar>* weights() const { return weights_.get(); }

  // Whether this model can run the batch: fixed weights need their own d and
  // k; a parameter must be one the model reads, within its range.
  absl::Status Accepts(const Batch<Scalar>& batch) const;
  // The batch's parameters with the defaults filled in (gamma 0: infinity).
  // Call after Accepts.
  VariantParameters Resolve(const Batch<Scalar>& batch) const;
  // Whether the batch runs the O(n^2) dense evaluator (softmax assignment,
  // or weights the fast path cannot run).
  bool RunsDense(const Batch<Scalar>& batch) const;

 private:
  ServedModel() = default;

  std::string name_;
  std::string description_;
  LloydOptions lloyd_;                            // exact: the construction
  Algorithm algorithm_ = Algorithm::kLloyd;       // exact: the center update
  std::vector<ParameterSpec> parameters_;         // the request fields it reads
  std::shared_ptr<const Model<Scalar>> weights_;  // fixed weights, or null
  bool fast_ = true;                              // the fast path runs it (hardmax)
};

// The exact constructions every server serves, in the order ListModels
// gives them.
template <typename Scalar>
std::vector<ServedModel<Scalar>> ExactModels();

// Runs `model` on `batch`. `check` is called before the initialisation's
// steps and before every layer; a non-OK status (deadline, cancellation)
// stops the run and is returned.
template <typename Scalar>
absl::StatusOr<RunResult<Scalar>> Cluster(const ServedModel<Scalar>& model,
                                          const Batch<Scalar>& batch, const StopCheck& check = {});

}  // namespace kmt

#endif  // KMT_CORE_ENGINE_H_
