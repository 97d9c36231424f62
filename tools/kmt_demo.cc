// kmt-demo: clusters a generated Gaussian mixture with an exact k-means
// transformer and prints, per layer, its objective next to reference Lloyd's
// from the same initial centers.
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "absl/flags/flag.h"
#include "absl/status/statusor.h"
#include "base/command_line.h"
#include "core/constructions.h"
#include "core/engine_flags.h"
#include "core/init.h"
#include "core/transformer.h"
#include "learn/task_generator.h"
#include "reference/lloyd.h"

ABSL_FLAG(int, n, 10000, "points to generate");
ABSL_FLAG(int, d, 2, "dimensions");
ABSL_FLAG(int, k, 5, "clusters (also the mixture's components)");
ABSL_FLAG(double, scale, 0.1, "per-dimension standard deviation of a component");
ABSL_FLAG(int, layers, 10, "transformer layers = Lloyd's iterations");
ABSL_FLAG(std::string, embedding, "onehot", "cluster registers: onehot or binary");
ABSL_FLAG(std::string, theta3, "hardmax", "center update form: hardmax or linear");
ABSL_FLAG(double, beta, std::numeric_limits<double>::infinity(),
          "inverse temperature of the assignment block; inf is hardmax");
ABSL_FLAG(std::string, init, "kmeans++",
          "initial centers: random, kmeans++ (greedy) or plain-kmeans++");
ABSL_FLAG(uint64_t, seed, 1, "seed of the data and the initial centers");

namespace kmt {
namespace {

absl::Status Demo() {
  const int n = absl::GetFlag(FLAGS_n), d = absl::GetFlag(FLAGS_d), k = absl::GetFlag(FLAGS_k),
            layers = absl::GetFlag(FLAGS_layers);
  const uint64_t seed = absl::GetFlag(FLAGS_seed);
  absl::StatusOr<Embedding> embedding = ParseEmbedding(absl::GetFlag(FLAGS_embedding));
  if (!embedding.ok()) return embedding.status();
  absl::StatusOr<Theta3Form> theta3 = ParseTheta3Form(absl::GetFlag(FLAGS_theta3));
  if (!theta3.ok()) return theta3.status();
  absl::StatusOr<InitMethod> init_method = ParseInitMethod(absl::GetFlag(FLAGS_init));
  if (!init_method.ok()) return init_method.status();
  if (n < 1 || d < 1 || k < 1) {
    return absl::InvalidArgumentError("--n, --d and --k must be at least 1");
  }

  const Matrix<double> points =
      GenerateTask<double>({.n = n, .d = d, .k = k, .scale = absl::GetFlag(FLAGS_scale)}, seed)
          .points;
  absl::StatusOr<Matrix<double>> init = InitialCenters(points, k, *init_method, seed);
  if (!init.ok()) return init.status();
  absl::StatusOr<Model<double>> model = LloydConstruction<double>(
      d, k, {.embedding = *embedding, .theta3 = *theta3, .beta = absl::GetFlag(FLAGS_beta)});
  if (!model.ok()) return model.status();
  absl::StatusOr<RunResult<double>> run = RunTransformer(*model, points, *init, {.layers = layers});
  if (!run.ok()) return run.status();
  const auto lloyd = ReferenceLloyd(points, *init, layers);

  std::printf("model %s (d_emb = %d), n = %d, d = %d, k = %d, %s init, %s path\n",
              model->name.c_str(), model->dim(), n, d, k,
              std::string(InitMethodName(*init_method)).c_str(),
              run->path == Path::kFast ? "fast" : "dense");
  std::printf("%5s  %18s  %18s  %10s\n", "layer", "transformer", "Lloyd's", "rel. gap");
  for (int t = 0; t < layers; ++t) {
    const double got = run->layer_objectives[t], want = lloyd[t].objective;
    std::printf("%5d  %18.10g  %18.10g  %10.2e\n", t + 1, got, want, std::abs(got - want) / want);
  }
  std::printf("empty-cluster events: %lld\n", static_cast<long long>(run->empty_cluster_events));
  return absl::OkStatus();
}

}  // namespace
}  // namespace kmt

int main(int argc, char** argv) {
  kmt::ParseCommandLine(
      "Clusters a generated Gaussian mixture with an exact k-means transformer\n"
      "and prints its objective per layer next to reference Lloyd's.",
      argc, argv, kmt::EngineFlags());
  const absl::Status status = kmt::Demo();
  if (!status.ok()) {
    std::fprintf(stderr, "kmt-demo: %s\n", std::string(status.message()).c_str());
    return 2;
  }
  return 0;
}
