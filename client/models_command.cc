// kmt models: the served models, one entry each.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/cli_flags.h"
#include "client/cluster_client.h"
#include "client/commands.h"
#include "core/init.h"
#include "proto/init_method.h"

namespace kmt {
namespace {

std::string InitName(int init) {
  absl::StatusOr<InitMethod> method = InitFromProto(init);
  return method.ok() ? std::string(InitMethodName(*method)) : std::to_string(init);
}

// "init=kmeans++", and for a learned model what it was trained from, from
// which layer on Lloyd's steps take over and the smaller sizes it serves.
std::string Inits(const v1::ModelInfo& m) {
  std::string out = "init=" + InitName(m.default_init());
  for (int i = 0; i < m.trained_inits_size(); ++i) {
    out += (i == 0 ? " trained-from=" : ",") + InitName(m.trained_inits(i));
  }
  if (m.lloyd_after() > 0) out += " lloyd-after=" + std::to_string(m.lloyd_after());
  // Beyond its own size, those a learned model serves by padding.
  for (int i = 1; i < m.accepted_sizes_size(); ++i) {
    out += (i == 1 ? " padded-sizes=" : ",") + std::to_string(m.accepted_sizes(i).d()) + "x" +
           std::to_string(m.accepted_sizes(i).k());
  }
  return out;
}

// A range's end: "inf" and "-inf" for the open ends.
std::string Bound(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char text[32];
  std::snprintf(text, sizeof(text), "%g", v);
  return text;
}

}  // namespace

absl::Status RunModels() {
  absl::StatusOr<ClientOptions> options = Options();
  if (!options.ok()) return options.status();
  Client client(*options);
  absl::StatusOr<std::vector<v1::ModelInfo>> models = client.ListModels();
  if (!models.ok()) return models.status();
  // The name column as wide as the longest name, so the columns align.
  int width = 24;
  for (const v1::ModelInfo& m : *models) width = std::max(width, static_cast<int>(m.name().size()));
  for (const v1::ModelInfo& m : *models) {
    std::printf("%-*s %-8s %-7s d=%s k=%s scaling=%s %s\n  %s\n", width, m.name().c_str(),
                m.kind().c_str(), m.embedding().c_str(),
                m.d() ? std::to_string(m.d()).c_str() : "any",
                m.k() ? std::to_string(m.k()).c_str() : "any", m.input_scaling().c_str(),
                Inits(m).c_str(), m.description().c_str());
    const auto& metrics = m.provenance().final_metrics();
    if (metrics.count("validation_ahead") > 0) {
      // What kmt-train --data measured on the dataset's validation rows; a
      // figure the file lacks reads nan.
      const auto metric = [&](const std::string& name) {
        const auto found = metrics.find(name);
        return found == metrics.end() ? std::nan("") : found->second;
      };
      std::string gains;
      for (const int init : m.trained_inits()) {
        const std::string name = InitName(init);
        if (metrics.count("validation_gain_" + name) == 0) continue;
        absl::StrAppend(&gains, gains.empty() ? "" : ", ",
                        absl::StrFormat("%s %+.4f +- %.4f", name, metric("validation_gain_" + name),
                                        metric("validation_se_" + name)));
      }
      std::printf(
          "  validation (rows %.0f:%.0f, %.0f tasks, %.0f steps, log objective against "
          "Lloyd's): %s; %s\n",
          metric("validation_first_row"), metric("validation_end_row"), metric("validation_tasks"),
          metric("validation_steps"), gains.c_str(),
          metric("validation_ahead") > 0
              ? "ahead by two standard errors"
              : "NOT ahead of Lloyd's (written with --write_behind_lloyd)");
    }
    if (m.kind() == "fitted") {
      // Where the centers came from, as the file records it.
      const v1::FittedCenters& f = m.fitted();
      std::vector<std::pair<std::string, std::string>> parameters(f.parameters().begin(),
                                                                  f.parameters().end());
      std::sort(parameters.begin(), parameters.end());
      std::string listed;
      for (const auto& [name, value] : parameters) {
        absl::StrAppend(&listed, listed.empty() ? "" : ",", name, "=", value);
      }
      std::printf(
          "  fitted: version %lld, %s, n=%lld inertia=%.17g iterations=%d algorithm=%s "
          "parameters=%s data=%s created=%s by=%s\n",
          static_cast<long long>(m.default_version()),
          f.precision() == v1::FittedCenters::PRECISION_FLOAT64 ? "float64" : "float32",
          static_cast<long long>(f.n()), f.inertia(), f.iterations(), f.algorithm().c_str(),
          listed.c_str(), f.data_fingerprint().c_str(), m.provenance().created().c_str(),
          m.provenance().trainer().c_str());
    }
    for (const v1::ModelParameter& p : m.parameters()) {
      // As typed: --parameters=name=value (several separated by commas).
      std::printf("  --parameters=%s=VALUE: %s; default %g, range %s%s, %s%s\n", p.name().c_str(),
                  p.description().c_str(), p.default_value(),
                  p.min_exclusive() || std::isinf(p.min()) ? "(" : "[", Bound(p.min()).c_str(),
                  Bound(p.max()).c_str(), std::isinf(p.max()) ? ")" : "]");
    }
  }
  return absl::OkStatus();
}

}  // namespace kmt
