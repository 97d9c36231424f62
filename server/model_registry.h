// The models a server runs: every exact Lloyd construction for any (d, k),
// and the versions of the learned models in the model directory, read again
// at every Scan. A model's versions live in `dir/<name>/<version>/model.kmt`
// (the layout of TF Serving and Triton: a new version is a new directory,
// published by a rename); a flat `dir/<file>.kmt` is version 1 of the model
// its file names. Each Scan publishes a new snapshot at once: a batch holds
// the version it started with (a shared_ptr) to its end, whatever a later
// scan retires. A file that cannot be served never replaces a version that
// serves.
#ifndef KMT_SERVER_MODEL_REGISTRY_H_
#define KMT_SERVER_MODEL_REGISTRY_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/engine.h"
#include "core/fitted_centers.h"
#include "proto/kmeans_transformer.pb.h"

namespace kmt {

// One servable version of a model, in both of the engine's precisions, made
// together when the version loads: float32 requests run served<float>(),
// float64 ones served<double>() (a file's weights read in double, not
// widened from float). A fitted model runs lloyd-onehot from its centers,
// held once in `fitted`.
struct RegistryEntry {
  /// The model for batches of each precision.
  std::tuple<ServedModel<float>, ServedModel<double>> models;
  v1::ModelInfo info;   ///< what ListModels says of it (without versions)
  int64_t version = 1;  ///< the version it serves as
  /// fitted models: the centers every batch starts from; null otherwise
  std::shared_ptr<const FittedCenters> fitted;

  // The model for a batch of Scalar.
  template <typename Scalar>
  const ServedModel<Scalar>& served() const {
    return std::get<ServedModel<Scalar>>(models);
  }
};

// OK when `dir` is empty (the exact models only) or a directory that can be
// listed; else why not, in a message that names the directory (absolute,
// as a relative one depends on where the server was started).
absl::Status CheckModelDirectory(const std::string& dir);

// Why a file was refused, the `reason` label of
// kmt_model_load_failures_total: each of kLoadFailureReasons.
inline constexpr const char* kLoadFailureReasons[] = {
    "unreadable",  // the file cannot be opened or read
    "corrupt",     // not a ModelFile: truncated or not protobuf
    "invalid",     // a ModelFile whose weights or sizes are wrong (NaN, shapes), or a
                   // path that is not UTF-8 (ListModels cannot name it)
    "refused",     // a valid model the engine does not serve
    "conflict",    // its name is taken (an exact model, another file)
};

// "loading", "available", "failed", "retired": the `state` label of
// kmt_model_versions, and the log's word for a state.
absl::string_view VersionStateName(v1::ModelVersionState state);

// What one scan changed, for the log and the metrics.
struct ScanReport {
  std::vector<std::string> loaded;   ///< "name version N (path)" now served, new or replaced
  std::vector<std::string> retired;  ///< "name version N" no longer served
  /// "path: why", one per file newly refused, with its reason label
  std::vector<std::pair<std::string, std::string>> refused;
};

// Defined in model_registry.cc: what the requests read, and what the scans
// keep between them.
struct RegistrySnapshot;
struct RegistryScanState;

class ModelRegistry {
 public:
  // The exact models only, watching `dir` (none if empty); Scan reads it.
  // `keep_versions` > 0: of each model's versions only the latest that many
  // available are served, older ones retired and their files not read (TF
  // Serving's `latest` policy); 0: every version.
  explicit ModelRegistry(std::string dir, int keep_versions = 0);
  ModelRegistry(ModelRegistry&&) noexcept;
  ~ModelRegistry();

  // The exact constructions plus the directory's models after one scan; a
  // file that cannot be served is skipped and why is appended to `refused`,
  // one line per file.
  static ModelRegistry Load(const std::string& dir, std::vector<std::string>* refused,
                            int keep_versions = 0);

  // Reads the directory again: new files and versions are loaded, changed
  // ones replace what they served once they load, removed ones retire. A
  // file whose size, modification time and identity have not changed since
  // the last scan is not read again. Scans run one at a time.
  ScanReport Scan();

  // The version `version` of `name` (0: the default, the highest
  // available); null if there is none.
  std::shared_ptr<const RegistryEntry> Find(absl::string_view name, int64_t version = 0) const;
  // The same, or NOT_FOUND naming what is missing.
  absl::StatusOr<std::shared_ptr<const RegistryEntry>> Resolve(absl::string_view name,
                                                               int64_t version) const;
  // Whether `name` was ever served or listed (metrics label it by name).
  bool Known(absl::string_view name) const;
  // The default version of every model that has one: exact models first,
  // then the directory's by name.
  std::vector<std::shared_ptr<const RegistryEntry>> models() const;
  // ListModels: every model with its versions and their states.
  v1::ListModelsResponse List() const;
  // The model's ModelInfo with its versions (available or not); NOT_FOUND
  // if the name is unknown.
  absl::StatusOr<v1::ModelInfo> Describe(absl::string_view name) const;
  // Versions known, by state (kmt_model_versions).
  std::map<v1::ModelVersionState, int> VersionCounts() const;

  // Explicit control. UnloadModel retires `version` of `name` (0: every
  // version) until LoadModel, which undoes that and scans; NOT_FOUND for a
  // name the directory does not hold. Exact models are refused.
  absl::Status UnloadModel(const std::string& name, int64_t version, ScanReport* report);
  absl::Status LoadModel(const std::string& name, int64_t version, ScanReport* report);

 private:
  // The snapshot published last. A reader holds it in a local for as long
  // as it reads from it: a scan may publish the next one at any moment, and
  // the last owner's release frees the models (`for (m : snapshot()->models)`
  // reads freed memory; tests/lifetime_lint.py refuses the pattern).
  std::shared_ptr<const RegistrySnapshot> snapshot() const;
  ScanReport ScanLocked();

  std::string dir_;
  int keep_versions_ = 0;
  std::unique_ptr<std::mutex> scan_mu_;  // one scan (and its state) at a time
  std::unique_ptr<RegistryScanState> scan_;
  mutable std::unique_ptr<std::mutex> mu_;  // guards snapshot_
  std::shared_ptr<const RegistrySnapshot> snapshot_;
};

}  // namespace kmt

#endif  // KMT_SERVER_MODEL_REGISTRY_H_
