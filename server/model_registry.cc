#include "server/model_registry.h"

#include <sys/stat.h>

#include <algorithm>
#include <cassert>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <set>
#include <sstream>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "proto/init_method.h"
#include "proto/model_file.h"
#include "proto/utf8.h"

namespace kmt {

struct RegistrySnapshot {
  struct Version {
    int64_t version = 0;
    v1::ModelVersionState state = v1::MODEL_VERSION_STATE_UNSPECIFIED;
    std::string reason;
    std::string path;                            // relative to the directory
    std::shared_ptr<const RegistryEntry> entry;  // set when available
  };
  struct Model {
    std::string name;
    std::string kind;
    std::map<int64_t, Version> versions;

    // The highest version available.
    std::shared_ptr<const RegistryEntry> Default() const {
      for (auto v = versions.rbegin(); v != versions.rend(); ++v) {
        if (v->second.entry != nullptr) return v->second.entry;
      }
      return nullptr;
    }
  };

  std::vector<Model> models;    // exact first, then the directory's by name
  std::set<std::string> known;  // every name ever listed

  const Model* Get(absl::string_view name) const {
    for (const Model& m : models) {
      if (m.name == name) return &m;
    }
    return nullptr;
  }
};

// What the last look at a file found: a file whose identity is unchanged is
// not read again.
struct FileLook {
  std::string identity;  // device, inode, size, modification time
  uint64_t content = 0;  // hash of the bytes read
  std::string name;      // the model it names, or named when it last loaded
  std::shared_ptr<const RegistryEntry> entry;
  absl::Status status;
  std::string reason;     // one of kLoadFailureReasons when !status.ok()
  bool settled = true;    // false: refused, but changed moments ago (being written)
  bool reported = false;  // its refusal is in a ScanReport already
};

struct RegistryScanState {
  std::vector<RegistrySnapshot::Model> exact;
  std::map<std::string, FileLook> looks;               // by path
  std::set<std::pair<std::string, int64_t>> unloaded;  // (name, version), 0: every version
  std::set<std::string> known;
  std::set<std::string> conflicts;  // paths refused for their name or path at the last scan
  bool scanned = false;             // the first scan is done
};

namespace {

// A refused file modified less than this long ago may be half-written: it
// shows as loading and is read again at the next scan, and counts as a
// failure only once it has stayed unchanged this long.
constexpr auto kSettle = std::chrono::seconds(2);

// The file a version directory holds.
constexpr char kVersionFile[] = "model.kmt";

v1::ModelInfo Info(const ServedModel<float>& model) {
  v1::ModelInfo info;
  info.set_name(model.name());
  info.set_kind(model.exact() ? "exact" : "learned");
  info.set_description(model.description());
  info.set_embedding(std::string(EmbeddingName(model.embedding())));
  info.set_input_scaling(std::string(InputScalingName(model.input_scaling())));
  for (const ParameterSpec& p : model.parameters()) {
    v1::ModelParameter* out = info.add_parameters();
    out->set_name(p.name);
    out->set_description(p.description);
    out->set_default_value(p.default_value);
    out->set_min(p.min);
    out->set_max(p.max);
    out->set_min_exclusive(p.min_exclusive);
    out->set_max_exclusive(p.max_exclusive);
  }
  if (const Model<float>* weights = model.weights()) {
    info.set_d(weights->d);
    info.set_k(weights->k);
    for (InitMethod method : weights->trained_inits) info.add_trained_inits(InitToProto(method));
    info.set_lloyd_after(weights->lloyd_after);
    for (const ModelSize& size : model.accepted_sizes()) {
      v1::ModelSize* out = info.add_accepted_sizes();
      out->set_d(size.d);
      out->set_k(size.k);
    }
  }
  info.set_default_init(InitToProto(model.default_init()));
  info.set_accepts_weights(model.exact() && model.algorithm().weighted());
  info.set_unit_norm(model.exact() && model.algorithm().unit_norm());
  info.set_translation_invariant(model.exact() && model.algorithm().translation_invariant());
  info.set_lloyd_at_defaults(model.exact() && model.algorithm().lloyd_at_defaults());
  return info;
}

// A model file's model in Scalar (its weights read in Scalar), or why not:
// `reason` the refusal's (kLoadFailureReasons).
template <typename Scalar>
absl::StatusOr<ServedModel<Scalar>> FileModel(const v1::ModelFile& file, const char** reason) {
  absl::StatusOr<Model<Scalar>> weights = ModelFromProto<Scalar>(file);
  if (!weights.ok()) {
    *reason = "invalid";
    return weights.status();
  }
  absl::StatusOr<ServedModel<Scalar>> model =
      ServedModel<Scalar>::FromWeights(*std::move(weights), file.description());
  if (!model.ok()) *reason = "refused";
  return model;
}

// The exact model a fitted model's batches run: lloyd-onehot.
template <typename Scalar>
ServedModel<Scalar> AssignModel() {
  for (ServedModel<Scalar>& model : ExactModels<Scalar>()) {
    if (model.name() == "lloyd-onehot") return std::move(model);
  }
  assert(false && "lloyd-onehot is an exact model");
  return ExactModels<Scalar>().front();
}

// A fitted model's version: lloyd-onehot in both precisions, the centers
// once, and what ListModels says of it.
std::shared_ptr<const RegistryEntry> FittedEntry(const v1::ModelFile& file, FittedCenters fitted,
                                                 int64_t version) {
  auto entry = std::make_shared<RegistryEntry>(
      RegistryEntry{.models = {AssignModel<float>(), AssignModel<double>()},
                    .info = {},
                    .version = version,
                    .fitted = std::make_shared<const FittedCenters>(std::move(fitted))});
  v1::ModelInfo& info = entry->info;
  info.set_name(file.name());
  info.set_kind("fitted");
  info.set_description(file.description());
  info.set_embedding(std::string(EmbeddingName(entry->served<float>().embedding())));
  info.set_input_scaling(std::string(InputScalingName(InputScaling::kNone)));
  info.set_d(file.d());
  info.set_k(file.k());
  v1::ModelSize* size = info.add_accepted_sizes();
  size->set_d(file.d());
  size->set_k(file.k());
  info.set_default_init(v1::INIT_GIVEN);
  info.set_accepts_weights(true);
  *info.mutable_provenance() = file.provenance();
  *info.mutable_fitted() = file.fitted();
  info.mutable_fitted()->clear_centers();
  info.mutable_fitted()->clear_offset();
  return entry;
}

// A file to look at: a version directory's model.kmt, or a flat *.kmt.
struct Candidate {
  std::string path;      // as opened
  std::string relative;  // to the model directory, for ListModels
  std::string model;     // the directory's name; empty for a flat file
  int64_t version = 1;
};

// A version directory's name: a positive decimal number.
bool VersionNumber(const std::string& name, int64_t* version) {
  if (name.empty() || name.size() > 18) return false;
  if (!std::all_of(name.begin(), name.end(), [](char c) { return absl::ascii_isdigit(c); })) {
    return false;
  }
  return absl::SimpleAtoi(name, version) && *version > 0;
}

// The directory's candidates, or why it cannot be listed. Names starting
// with a dot are skipped: temporary files and directories being prepared,
// and Kubernetes' `..data` behind a ConfigMap's symlinks.
absl::StatusOr<std::vector<Candidate>> ListDirectory(const std::string& dir) {
  namespace fs = std::filesystem;
  std::vector<Candidate> out;
  // Iterated with increment(error), not a range-for, whose ++ throws when
  // reading a directory fails midway (a volume going away): a scan must not
  // throw, since the poll thread would end the server, and gRPC answers a
  // LoadModel whose handler throws UNIMPLEMENTED with an empty message.
  std::error_code error;
  const fs::directory_iterator end;
  for (fs::directory_iterator entry(dir, error); !error && entry != end; entry.increment(error)) {
    const std::string name = entry->path().filename().string();
    if (name.empty() || name[0] == '.') continue;
    std::error_code ignored;
    if (fs::is_directory(entry->path(), ignored)) {
      // A model directory that cannot be opened offers no version; one
      // whose reading fails midway fails the whole listing, so that the
      // versions not reached are not retired.
      std::error_code inner;
      fs::directory_iterator version(entry->path(), inner);
      const bool opened = !inner;
      for (; !inner && version != end; version.increment(inner)) {
        int64_t number = 0;
        if (!VersionNumber(version->path().filename().string(), &number)) continue;
        const fs::path file = version->path() / kVersionFile;
        if (!fs::exists(file, ignored)) continue;  // a version directory not yet filled
        out.push_back({.path = file.string(),
                       .relative = file.lexically_relative(dir).string(),
                       .model = name,
                       .version = number});
      }
      if (opened && inner) error = inner;
    } else if (entry->path().extension() == ".kmt") {
      out.push_back({.path = entry->path().string(), .relative = name, .model = "", .version = 1});
    }
  }
  if (error) {
    return absl::FailedPreconditionError(
        absl::StrCat("model directory ", dir, ": ", error.message()));
  }
  std::sort(out.begin(), out.end(),
            [](const Candidate& a, const Candidate& b) { return a.path < b.path; });
  return out;
}

FileLook Refused(FileLook look, const char* reason, absl::Status status) {
  look.entry = nullptr;
  look.reason = reason;
  look.status = std::move(status);
  return look;
}

// Looks at one file: the last look again if the file is unchanged, else
// the file read and loaded. `may_wait`: a refused file changed moments ago
// is taken as being written (not at the first scan, which reports every
// refusal).
FileLook Look(const Candidate& c, const FileLook* last, bool may_wait) {
  FileLook look;
  if (last != nullptr) look.name = last->name;
  struct stat st {};
  if (stat(c.path.c_str(), &st) != 0) {
    return Refused(look, "unreadable", absl::NotFoundError(absl::StrCat("cannot open ", c.path)));
  }
  look.identity = absl::StrCat(st.st_dev, ":", st.st_ino, ":", st.st_size, ":", st.st_mtim.tv_sec,
                               ".", st.st_mtim.tv_nsec);
  if (last != nullptr && last->identity == look.identity && last->settled) return *last;
  const auto modified = std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::seconds(st.st_mtim.tv_sec) + std::chrono::nanoseconds(st.st_mtim.tv_nsec)));
  look.settled = !may_wait || std::chrono::system_clock::now() - modified >= kSettle;
  std::ifstream in(c.path, std::ios::binary);
  std::ostringstream bytes;
  if (!in || !(bytes << in.rdbuf())) {
    return Refused(look, "unreadable", absl::NotFoundError(absl::StrCat("cannot read ", c.path)));
  }
  const std::string data = std::move(bytes).str();
  look.content = std::hash<std::string>{}(data);
  if (last != nullptr && last->status.ok() && last->content == look.content) {
    look.entry = last->entry;  // the same bytes under a new identity (a symlink swap)
    look.settled = true;
    return look;
  }
  v1::ModelFile file;
  if (!file.ParseFromString(data)) {
    return Refused(look, "corrupt",
                   absl::DataLossError(
                       absl::StrCat(c.path, " is not a kmt.v1.ModelFile (protobuf parse failed)")));
  }
  // A version directory names its model; the name inside the file is not
  // read, so a file copied from another model's directory serves here.
  if (!c.model.empty()) file.set_name(c.model);
  if (!file.name().empty()) look.name = file.name();
  if (file.has_fitted()) {
    absl::StatusOr<FittedCenters> fitted = FittedFromProto(file);
    if (!fitted.ok()) return Refused(look, "invalid", fitted.status());
    look.entry = FittedEntry(file, *std::move(fitted), c.version);
    look.settled = true;
    look.status = absl::OkStatus();
    return look;
  }
  const char* reason = "";
  absl::StatusOr<ServedModel<float>> model = FileModel<float>(file, &reason);
  if (!model.ok()) return Refused(look, reason, model.status());
  absl::StatusOr<ServedModel<double>> in_double = FileModel<double>(file, &reason);
  if (!in_double.ok()) return Refused(look, reason, in_double.status());
  auto entry = std::make_shared<RegistryEntry>(RegistryEntry{
      .models = {*std::move(model), *std::move(in_double)}, .info = {}, .version = c.version});
  entry->info = Info(entry->served<float>());
  *entry->info.mutable_provenance() = file.provenance();
  look.entry = std::move(entry);
  look.settled = true;
  look.status = absl::OkStatus();
  return look;
}

std::string VersionName(absl::string_view name, int64_t version) {
  return absl::StrCat(name, " version ", version);
}

}  // namespace

absl::string_view VersionStateName(v1::ModelVersionState state) {
  switch (state) {
    case v1::MODEL_VERSION_LOADING:
      return "loading";
    case v1::MODEL_VERSION_AVAILABLE:
      return "available";
    case v1::MODEL_VERSION_FAILED:
      return "failed";
    case v1::MODEL_VERSION_RETIRED:
      return "retired";
    default:
      return "unspecified";
  }
}

absl::Status CheckModelDirectory(const std::string& dir) {
  if (dir.empty()) return absl::OkStatus();
  std::error_code error;
  std::filesystem::directory_iterator listing(dir, error);
  if (!error) return absl::OkStatus();
  std::error_code ignored;
  const std::string path = std::filesystem::absolute(dir, ignored).lexically_normal().string();
  if (error == std::errc::no_such_file_or_directory) {
    return absl::NotFoundError(absl::StrCat(path, " does not exist"));
  }
  if (error == std::errc::not_a_directory) {
    return absl::FailedPreconditionError(absl::StrCat(path, " is not a directory"));
  }
  return absl::FailedPreconditionError(absl::StrCat("cannot list ", path, ": ", error.message()));
}

ModelRegistry::ModelRegistry(std::string dir, int keep_versions)
    : dir_(std::move(dir)),
      keep_versions_(keep_versions),
      scan_mu_(std::make_unique<std::mutex>()),
      scan_(std::make_unique<RegistryScanState>()),
      mu_(std::make_unique<std::mutex>()) {
  auto snapshot = std::make_shared<RegistrySnapshot>();
  std::vector<ServedModel<float>> exact = ExactModels<float>();
  std::vector<ServedModel<double>> exact_in_double = ExactModels<double>();
  for (size_t i = 0; i < exact.size(); ++i) {
    v1::ModelInfo info = Info(exact[i]);
    const std::string name = info.name();
    auto entry = std::make_shared<const RegistryEntry>(
        RegistryEntry{.models = {std::move(exact[i]), std::move(exact_in_double[i])},
                      .info = std::move(info),
                      .version = 1});
    RegistrySnapshot::Model m{.name = name, .kind = "exact", .versions = {}};
    m.versions[1] = {.version = 1,
                     .state = v1::MODEL_VERSION_AVAILABLE,
                     .reason = "",
                     .path = "",
                     .entry = std::move(entry)};
    scan_->exact.push_back(m);
    scan_->known.insert(name);
    snapshot->models.push_back(std::move(m));
  }
  snapshot->known = scan_->known;
  snapshot_ = std::move(snapshot);
}

ModelRegistry::ModelRegistry(ModelRegistry&&) noexcept = default;
ModelRegistry::~ModelRegistry() = default;

ModelRegistry ModelRegistry::Load(const std::string& dir, std::vector<std::string>* refused,
                                  int keep_versions) {
  ModelRegistry registry(dir, keep_versions);
  for (const auto& [line, reason] : registry.Scan().refused) refused->push_back(line);
  return registry;
}

std::shared_ptr<const RegistrySnapshot> ModelRegistry::snapshot() const {
  std::lock_guard<std::mutex> lock(*mu_);
  return snapshot_;
}

ScanReport ModelRegistry::Scan() {
  std::lock_guard<std::mutex> lock(*scan_mu_);
  return ScanLocked();
}

ScanReport ModelRegistry::ScanLocked() {
  ScanReport report;
  if (dir_.empty()) return report;
  absl::StatusOr<std::vector<Candidate>> candidates = ListDirectory(dir_);
  if (!candidates.ok()) {
    // A directory that cannot be listed now (a volume being remounted)
    // retires nothing: what serves goes on serving.
    report.refused.emplace_back(std::string(candidates.status().message()), "unreadable");
    return report;
  }
  RegistryScanState& state = *scan_;
  const std::shared_ptr<const RegistrySnapshot> last = snapshot();

  // Each file looked at; what it offers, by model and version.
  std::map<std::string, FileLook> looks;
  struct Offer {
    const Candidate* candidate;
  };
  // A version directory's file is read only when the version policy keeps
  // it: versions below the latest keep_versions_ available are not read.
  auto look_at = [&](const Candidate& c) -> FileLook& {
    auto looked = looks.find(c.path);
    if (looked != looks.end()) return looked->second;
    auto last_look = state.looks.find(c.path);
    return looks[c.path] = Look(c, last_look == state.looks.end() ? nullptr : &last_look->second,
                                state.scanned);
  };
  std::map<std::string, std::map<int64_t, Offer>> offers;
  std::set<std::string> exact;
  for (const RegistrySnapshot::Model& m : state.exact) exact.insert(m.name);
  auto refuse = [&](FileLook* look, const std::string& relative) {
    if (look->reported || !look->settled) return;
    look->reported = true;
    report.refused.emplace_back(absl::StrCat((std::filesystem::path(dir_) / relative).string(),
                                             ": ", look->status.message()),
                                look->reason);
  };
  // A file whose model name is taken, or whose path is not UTF-8, is
  // refused for as long as it is; the look stays the file's own, so it
  // serves once the name is free.
  std::set<std::string> conflicts;
  auto conflict = [&](const Candidate& c, const std::string& why, const char* reason = "conflict") {
    conflicts.insert(c.path);
    if (state.conflicts.count(c.path)) return;
    const std::string path = (std::filesystem::path(dir_) / c.relative).string();
    report.refused.emplace_back(absl::StrCat(AsUtf8(path), ": ", why), reason);
  };
  // Version directories first: a directory claims its name.
  for (const bool flat : {false, true}) {
    for (const Candidate& c : *candidates) {
      if (c.model.empty() != flat) continue;
      if (!IsUtf8(c.relative)) {
        conflict(c, "its path is not UTF-8, which ListModels cannot carry: rename it", "invalid");
        continue;
      }
      std::string name = c.model;
      if (flat) {
        const FileLook& look = look_at(c);
        name = look.name.empty() ? std::filesystem::path(c.path).stem().string() : look.name;
      }
      if (exact.count(name)) {
        conflict(c, absl::StrCat("'", name, "' is an exact model, built in"));
        continue;
      }
      if (flat && offers.count(name)) {
        const Offer& other = offers[name].begin()->second;
        conflict(c, absl::StrCat("a model named '", name, "' is already served from ",
                                 other.candidate->relative));
        continue;
      }
      if (flat) {
        FileLook& look = look_at(c);
        if (!look.status.ok()) refuse(&look, c.relative);
      }
      offers[name][c.version] = {&c};
    }
  }

  auto snapshot = std::make_shared<RegistrySnapshot>();
  snapshot->models = state.exact;
  auto unloaded = [&](const std::string& name, int64_t version) {
    return state.unloaded.count({name, 0}) || state.unloaded.count({name, version});
  };
  std::set<std::string> names;
  for (const auto& [name, versions] : offers) names.insert(name);
  for (const RegistrySnapshot::Model& m : last->models) {
    if (!exact.count(m.name)) names.insert(m.name);
  }
  for (const std::string& name : names) {
    const RegistrySnapshot::Model* before = last->Get(name);
    RegistrySnapshot::Model m{.name = name, .kind = "learned", .versions = {}};
    const auto offered = offers.find(name);
    if (offered != offers.end()) {
      int kept = 0;  // versions available so far, newest first
      for (auto newest = offered->second.rbegin(); newest != offered->second.rend(); ++newest) {
        const auto& [number, offer] = *newest;
        const RegistrySnapshot::Version* was = nullptr;
        if (before != nullptr) {
          auto it = before->versions.find(number);
          if (it != before->versions.end()) was = &it->second;
        }
        RegistrySnapshot::Version v{.version = number,
                                    .state = v1::MODEL_VERSION_AVAILABLE,
                                    .reason = "",
                                    .path = offer.candidate->relative,
                                    .entry = nullptr};
        if (unloaded(name, number)) {
          // Unloading frees the weights: LoadModel reads the file again.
          looks.erase(offer.candidate->path);
          v.state = v1::MODEL_VERSION_RETIRED;
          v.reason = "unloaded (UnloadModel)";
          if (was != nullptr && was->entry != nullptr) {
            report.retired.push_back(VersionName(name, number));
          }
        } else if (keep_versions_ > 0 && kept >= keep_versions_) {
          v.state = v1::MODEL_VERSION_RETIRED;
          v.reason = absl::StrCat("older than the latest ", keep_versions_,
                                  " available (--keep_versions)");
          if (was != nullptr && was->entry != nullptr) {
            report.retired.push_back(VersionName(name, number));
          }
        } else {
          FileLook& look = look_at(*offer.candidate);
          if (look.status.ok()) {
            v.entry = look.entry;
            if (was == nullptr || was->entry != look.entry) {
              report.loaded.push_back(
                  absl::StrCat(VersionName(name, number), " (", offer.candidate->relative, ")"));
            }
          } else {
            refuse(&look, offer.candidate->relative);
            if (was != nullptr && was->entry != nullptr) {
              // A good version stays until a file that loads replaces it.
              v.entry = was->entry;
              v.reason = absl::StrCat(
                  look.settled ? "" : "(still being written?) ",
                  "the file is refused, the version loaded before serves: ", look.status.message());
            } else {
              v.state = look.settled ? v1::MODEL_VERSION_FAILED : v1::MODEL_VERSION_LOADING;
              v.reason = std::string(look.status.message());
            }
          }
          kept += v.entry != nullptr;
        }
        m.versions[number] = std::move(v);
      }
    }
    if (before != nullptr) {
      // Versions whose file is gone: retired, and remembered as such.
      for (const auto& [number, v] : before->versions) {
        if (m.versions.count(number)) continue;
        if (v.entry == nullptr && v.state != v1::MODEL_VERSION_RETIRED) continue;
        if (v.entry != nullptr) report.retired.push_back(VersionName(name, number));
        RegistrySnapshot::Version retired = v;
        retired.entry = nullptr;
        retired.state = v1::MODEL_VERSION_RETIRED;
        if (v.entry != nullptr) retired.reason = "its file was removed";
        m.versions[number] = std::move(retired);
      }
    }
    if (m.versions.empty()) continue;
    if (const std::shared_ptr<const RegistryEntry> served = m.Default()) {
      m.kind = served->info.kind();
    } else if (before != nullptr) {
      m.kind = before->kind;
    }
    snapshot->models.push_back(std::move(m));
    state.known.insert(name);
  }
  snapshot->known = state.known;
  state.looks = std::move(looks);
  state.conflicts = std::move(conflicts);
  state.scanned = true;
  std::lock_guard<std::mutex> lock(*mu_);
  snapshot_ = std::move(snapshot);
  return report;
}

std::shared_ptr<const RegistryEntry> ModelRegistry::Find(absl::string_view name,
                                                         int64_t version) const {
  const std::shared_ptr<const RegistrySnapshot> s = snapshot();
  const RegistrySnapshot::Model* m = s->Get(name);
  if (m == nullptr) return nullptr;
  if (version == 0) return m->Default();
  auto v = m->versions.find(version);
  return v == m->versions.end() ? nullptr : v->second.entry;
}

absl::StatusOr<std::shared_ptr<const RegistryEntry>> ModelRegistry::Resolve(absl::string_view name,
                                                                            int64_t version) const {
  const std::shared_ptr<const RegistrySnapshot> s = snapshot();
  const RegistrySnapshot::Model* m = s->Get(name);
  if (m == nullptr) {
    size_t served = 0;
    for (const RegistrySnapshot::Model& any : s->models) served += any.Default() != nullptr;
    return absl::NotFoundError(absl::StrCat("unknown model '", name, "'; ListModels names the ",
                                            served, " models served"));
  }
  if (version < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("model_version = ", version, "; 0 asks for the default version"));
  }
  std::shared_ptr<const RegistryEntry> entry;
  if (version == 0) {
    entry = m->Default();
  } else if (auto v = m->versions.find(version); v != m->versions.end()) {
    entry = v->second.entry;
  }
  if (entry != nullptr) return entry;
  std::vector<std::string> available, others;
  for (const auto& [number, v] : m->versions) {
    if (v.entry != nullptr) {
      available.push_back(absl::StrCat(number));
    } else if (version == 0 || number == version) {
      others.push_back(
          absl::StrCat(number, " ", VersionStateName(v.state), ": ", Utf8Prefix(v.reason, 200)));
    }
  }
  std::string message =
      version == 0 ? absl::StrCat("model '", name, "' has no version available")
                   : absl::StrCat("model '", name, "' has no version ", version, " available");
  if (!available.empty())
    absl::StrAppend(&message, "; available: ", absl::StrJoin(available, ", "));
  if (!others.empty()) absl::StrAppend(&message, "; ", absl::StrJoin(others, "; "));
  return absl::NotFoundError(message);
}

bool ModelRegistry::Known(absl::string_view name) const {
  return snapshot()->known.count(std::string(name)) > 0;
}

std::vector<std::shared_ptr<const RegistryEntry>> ModelRegistry::models() const {
  std::vector<std::shared_ptr<const RegistryEntry>> out;
  const std::shared_ptr<const RegistrySnapshot> s = snapshot();
  for (const RegistrySnapshot::Model& m : s->models) {
    if (std::shared_ptr<const RegistryEntry> entry = m.Default()) out.push_back(std::move(entry));
  }
  return out;
}

namespace {

v1::ModelInfo Described(const RegistrySnapshot::Model& m) {
  v1::ModelInfo info;
  const std::shared_ptr<const RegistryEntry> served = m.Default();
  if (served != nullptr) {
    info = served->info;
    info.set_default_version(served->version);
  } else {
    info.set_name(m.name);
    info.set_kind(m.kind);
  }
  for (const auto& [number, v] : m.versions) {
    v1::ModelVersion* out = info.add_versions();
    out->set_version(number);
    out->set_state(v.state);
    out->set_reason(v.reason);
    out->set_path(v.path);
  }
  return info;
}

}  // namespace

v1::ListModelsResponse ModelRegistry::List() const {
  v1::ListModelsResponse response;
  const std::shared_ptr<const RegistrySnapshot> s = snapshot();
  for (const RegistrySnapshot::Model& m : s->models) {
    *(m.Default() != nullptr ? response.add_models() : response.add_unavailable()) = Described(m);
  }
  return response;
}

absl::StatusOr<v1::ModelInfo> ModelRegistry::Describe(absl::string_view name) const {
  const std::shared_ptr<const RegistrySnapshot> s = snapshot();
  const RegistrySnapshot::Model* m = s->Get(name);
  if (m == nullptr) return absl::NotFoundError(absl::StrCat("unknown model '", name, "'"));
  return Described(*m);
}

std::map<v1::ModelVersionState, int> ModelRegistry::VersionCounts() const {
  std::map<v1::ModelVersionState, int> counts;
  const std::shared_ptr<const RegistrySnapshot> s = snapshot();
  for (const RegistrySnapshot::Model& m : s->models) {
    if (m.kind == "exact") continue;
    for (const auto& [number, v] : m.versions) ++counts[v.state];
  }
  return counts;
}

absl::Status ModelRegistry::UnloadModel(const std::string& name, int64_t version,
                                        ScanReport* report) {
  std::lock_guard<std::mutex> lock(*scan_mu_);
  const std::shared_ptr<const RegistrySnapshot> s = snapshot();
  const RegistrySnapshot::Model* m = s->Get(name);
  if (m == nullptr) return absl::NotFoundError(absl::StrCat("unknown model '", name, "'"));
  if (m->kind == "exact") {
    return absl::FailedPreconditionError(
        absl::StrCat("'", name, "' is an exact model, built in: it cannot be unloaded"));
  }
  if (version < 0 || (version > 0 && !m->versions.count(version))) {
    return absl::NotFoundError(absl::StrCat("model '", name, "' has no version ", version));
  }
  scan_->unloaded.insert({name, version});
  *report = ScanLocked();
  return absl::OkStatus();
}

absl::Status ModelRegistry::LoadModel(const std::string& name, int64_t version,
                                      ScanReport* report) {
  std::lock_guard<std::mutex> lock(*scan_mu_);
  if (version < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("version = ", version, "; 0 asks for every version"));
  }
  for (const RegistrySnapshot::Model& m : scan_->exact) {
    if (m.name == name) {
      return absl::FailedPreconditionError(
          absl::StrCat("'", name, "' is an exact model, built in: it is always loaded"));
    }
  }
  auto& unloaded = scan_->unloaded;
  for (auto it = unloaded.begin(); it != unloaded.end();) {
    const bool match =
        it->first == name && (version == 0 || it->second == 0 || it->second == version);
    it = match ? unloaded.erase(it) : std::next(it);
  }
  *report = ScanLocked();
  const std::shared_ptr<const RegistrySnapshot> s = snapshot();
  const RegistrySnapshot::Model* m = s->Get(name);
  if (m == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("the model directory holds no model named '", name, "'"));
  }
  for (const auto& [number, v] : m->versions) {
    if ((version == 0 || number == version) && v.entry == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(VersionName(name, number), " is ",
                                                        VersionStateName(v.state), ": ", v.reason));
    }
  }
  if (version > 0 && !m->versions.count(version)) {
    return absl::NotFoundError(
        absl::StrCat("the model directory holds no version ", version, " of '", name, "'"));
  }
  return absl::OkStatus();
}

}  // namespace kmt
