// Lloyd's circuit in paper A's form (one-hot registers, theta3 linear
// attention) with theta1's inverse temperature as a parameter: hardmax, the
// default, is exact Lloyd's on the fast path; a finite beta makes the
// assignment a softmax, whose weights exist only for the batch's d, k and
// beta and run on the dense evaluator.
#include <cmath>
#include <limits>

#include "core/algorithms/homes.h"

namespace kmt {
namespace {

class SoftmaxLloyd final : public Algorithm {
 public:
  SoftmaxLloyd()
      : Algorithm({
            .name = "softmax-lloyd",
            .description =
                "Lloyd's algorithm, one-hot registers, linear-attention center update (paper A's "
                "form); beta > 0 makes the assignment a softmax, run by the dense evaluator (soft "
                "k-means; soft-kmeans runs it in O(n k d))",
            .parameters = {{.name = "beta",
                            .description =
                                "inverse temperature of the softmax assignment; default: hardmax",
                            .default_value = kInfinity,
                            .min = 0,
                            .max = kInfinity,
                            .min_exclusive = true}},
            .served = {{.options = {.embedding = Embedding::kOneHot,
                                    .theta3 = Theta3Form::kLinear}}},
            .reference = "ReferenceLloyd (reference/lloyd.h); with beta, ReferenceSoftKMeans "
                         "(reference/variant_reference.h)",
            .translation_invariant = true,
            .lloyd_at_defaults = true,
        }) {}

  bool UpdatesFromSums() const override { return true; }
  bool RunsDense(const ParameterValues& parameters) const override {
    return std::isfinite(parameters.at("beta"));
  }
  absl::Status DenseCircuit(int d, int k, const LloydOptions& circuit,
                            const ParameterValues& parameters, Model<float>* model) const override {
    return Build(d, k, circuit, parameters, model);
  }
  absl::Status DenseCircuit(int d, int k, const LloydOptions& circuit,
                            const ParameterValues& parameters,
                            Model<double>* model) const override {
    return Build(d, k, circuit, parameters, model);
  }

 private:
  static constexpr double kInfinity = std::numeric_limits<double>::infinity();

  template <typename Scalar>
  static absl::Status Build(int d, int k, LloydOptions circuit, const ParameterValues& parameters,
                            Model<Scalar>* model) {
    circuit.beta = parameters.at("beta");
    absl::StatusOr<Model<Scalar>> built = LloydConstruction<Scalar>(d, k, circuit);
    if (!built.ok()) return built.status();
    *model = *std::move(built);
    return absl::OkStatus();
  }
};

}  // namespace

const Algorithm& SoftmaxLloydAlgorithm() {
  static const SoftmaxLloyd algorithm;
  return algorithm;
}

}  // namespace kmt
