#include "client/cli_flags.h"

#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/request_parameters.h"
#include "client/resident_job.h"
#include "core/empty_clusters.h"
#include "core/init.h"
#include "io/point_reader.h"
#include "proto/enum_names.h"
#include "proto/init_method.h"

ABSL_FLAG(std::string, server, kmt::ClientOptions{}.target,
          "server address; several as ipv4:127.0.0.1:P1,127.0.0.1:P2 or dns:///host:port");
ABSL_FLAG(std::string, lb, kmt::ClientOptions{}.load_balancing,
          "load balancing over the addresses: round_robin or pick_first");
ABSL_FLAG(std::string, model, "lloyd-onehot", "model name (kmt models lists them)");
ABSL_FLAG(int, k, kmt::ResidentJobOptions{}.k, "clusters");
ABSL_FLAG(int, iterations, kmt::ResidentJobOptions{}.iterations,
          "layers, i.e. Lloyd's iterations for exact models; kmt cluster in whole mode: most "
          "iterations, 300 (scikit-learn's max_iter) unless given");
ABSL_FLAG(std::string, init, "",
          "initial centers: kmeans++ or k-means++ (greedy), plain-kmeans++, random, two-level "
          "(sqrt(k) coarse clusters, then fine ones in each: for large k; in whole mode on a "
          "sample of --sample_size points), given (--centers_in) or, in whole mode, kmeans|| or "
          "k-means|| (a few sampling rounds over the shards, quoted in a shell); empty: given "
          "with --centers_in, else the model's default (`kmt models`; greedy k-means++ for the "
          "exact models)");
ABSL_FLAG(std::string, centers_in, "",
          "the k initial centers (implies --init=given): CSV, one per line, or a float32 or "
          "float64 .npy of shape (k, d); a file --centers_out wrote is read back, the centers "
          "of one batch");
ABSL_FLAG(uint64_t, seed, kmt::ResidentJobOptions{}.seed,
          "seed of the initialisation (and of kmedoids' draws)");
ABSL_FLAG(int, n_init, 1,
          "exact models: runs from seeds --seed, --seed + 1, ...; the lowest objective is kept "
          "(scikit-learn's n_init)");
ABSL_FLAG(std::string, empty_clusters, "keep",
          "exact models: what a center whose cluster is empty becomes: keep (it stays), "
          "relocate-farthest (scikit-learn's: the points farthest from their centers) or, per "
          "batch only, split-largest (FAISS's)");
ABSL_FLAG(std::string, parameters, "",
          "the algorithm's parameters, name=value separated by commas (e.g. beta=2 for "
          "soft-kmeans); a name left out takes the model's default (kmt models lists each "
          "model's parameters, defaults and ranges)");
ABSL_FLAG(bool, guard, false,
          "learned models: run guarded, each layer the learned step or an exact Lloyd's step "
          "from the same centers, whichever gives the lower objective");
ABSL_FLAG(int, d, 0, "dimensions of a float32 input; bench: dimensions of the generated batches");
ABSL_FLAG(int, window, kmt::ClientOptions{}.window, "batches in flight on one stream");
ABSL_FLAG(int, batches_per_stream, kmt::ClientOptions{}.batches_per_stream,
          "batches one stream carries before a new one is opened (and balanced anew)");
ABSL_FLAG(int, streams, kmt::ClientOptions{}.streams,
          "cluster: streams at once (round-robin spreads them over the --server addresses); "
          "whole mode: shards (and streams) per replica");
ABSL_FLAG(int, max_attempts, kmt::ClientOptions{}.max_attempts,
          "sends of a batch answered UNAVAILABLE, the first included; whole mode: moves of "
          "each shard whose replica failed or drained");
ABSL_FLAG(absl::Duration, timeout, kmt::ClientOptions{}.stream_timeout, "deadline of each stream");
ABSL_FLAG(bool, tls, kmt::ClientTls{}.enabled,
          "connect with TLS, trusting the system's CAs (implied by --tls_ca)");
ABSL_FLAG(std::string, tls_ca, "", "PEM file of the CA to trust for the server's certificate");
ABSL_FLAG(std::string, tls_cert, "", "PEM client certificate, for servers that require one");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert");
ABSL_FLAG(std::string, tls_server_name, "",
          "name to verify in the server's certificate, if not the --server host");

namespace kmt {
namespace {

// --init's name for k-means||, as scikit-learn's users spell it too.
bool IsKMeansParallel(const std::string& init) {
  return init == kKMeansParallelName || init == "k-means||";
}

// --init, or "given" where it is empty and --centers_in names a file.
std::string InitSetting() {
  const std::string init = absl::GetFlag(FLAGS_init);
  return init.empty() && !absl::GetFlag(FLAGS_centers_in).empty() ? "given" : init;
}

// Unset: the request leaves init unset, for the model's default.
absl::StatusOr<std::optional<v1::Init>> InitFlag(bool resident_job) {
  const std::string init = InitSetting();
  if (init.empty()) return std::nullopt;
  if (init != "given" && !absl::GetFlag(FLAGS_centers_in).empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--centers_in gives the initial centers, and --init=", init,
                     " would choose others; drop --init, or say --init=given"));
  }
  if (IsKMeansParallel(init)) {
    if (resident_job) return std::nullopt;
    return absl::InvalidArgumentError(
        absl::StrCat("--init=", init,
                     " runs in whole mode's resident job only (kmt cluster "
                     "--mode=whole)"));
  }
  if (init == "given") {
    if (absl::GetFlag(FLAGS_centers_in).empty()) {
      return absl::InvalidArgumentError("--init=given needs --centers_in, the file of centers");
    }
    return v1::INIT_GIVEN;
  }
  absl::StatusOr<InitMethod> method = ParseInitMethod(init);
  if (!method.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown --init '", init,
                     "', expected kmeans++ (or k-means++), plain-kmeans++, random, two-level, "
                     "given (with --centers_in) or, in whole mode, kmeans|| (or k-means||)"));
  }
  return InitToProto(*method);
}

// The k x d centers of --centers_in: CSV (a header line is skipped), a file
// --centers_out wrote in per-batch mode (batch,cluster,x0,... rows) if it
// holds one batch, or a .npy of shape (k, d).
absl::StatusOr<std::vector<float>> ReadCenters(const std::string& path, int d, int k) {
  std::ifstream text(path);
  std::string first;
  std::getline(text, first);
  // Per-batch centers carry the batch and the cluster before the values.
  const int skip = absl::StartsWith(first, "batch,cluster") ? 2 : 0;
  absl::StatusOr<std::unique_ptr<PointReader>> file =
      PointReader::Open(path, skip ? "csv" : "", d + skip);
  if (!file.ok()) return file.status();
  std::vector<float> rows;
  absl::StatusOr<int64_t> n = (*file)->Read(INT64_MAX / 2 / (d + skip), &rows);
  if (!n.ok()) return n.status();
  std::vector<float> values;
  for (int64_t j = 0; j < *n; ++j) {
    const float* row = rows.data() + j * (d + skip);
    if (skip && row[0] != rows[0]) {
      return absl::InvalidArgumentError(absl::StrCat(
          path,
          " holds the centers of more than one batch; --centers_in takes the k centers of "
          "one"));
    }
    values.insert(values.end(), row + skip, row + skip + d);
  }
  if (*n != k) {
    return absl::InvalidArgumentError(absl::StrCat(path, " has ", *n, " centers, --k is ", k));
  }
  return values;
}

}  // namespace

bool InitIsKMeansParallel() { return IsKMeansParallel(absl::GetFlag(FLAGS_init)); }

absl::StatusOr<ClientOptions> Options() {
  const ClientTls tls{.enabled = absl::GetFlag(FLAGS_tls) || !absl::GetFlag(FLAGS_tls_ca).empty() ||
                                 !absl::GetFlag(FLAGS_tls_cert).empty(),
                      .ca_file = absl::GetFlag(FLAGS_tls_ca),
                      .cert_file = absl::GetFlag(FLAGS_tls_cert),
                      .key_file = absl::GetFlag(FLAGS_tls_key),
                      .server_name = absl::GetFlag(FLAGS_tls_server_name)};
  absl::StatusOr<ChannelSecurity> security = ClientSecurity(tls);
  if (!security.ok()) return security.status();
  return ClientOptions{.target = absl::GetFlag(FLAGS_server),
                       .load_balancing = absl::GetFlag(FLAGS_lb),
                       .max_attempts = absl::GetFlag(FLAGS_max_attempts),
                       .window = absl::GetFlag(FLAGS_window),
                       .streams = absl::GetFlag(FLAGS_streams),
                       .batches_per_stream = absl::GetFlag(FLAGS_batches_per_stream),
                       .stream_timeout = absl::GetFlag(FLAGS_timeout),
                       .security = *std::move(security)};
}

absl::StatusOr<v1::ClusterRequest> Template(int d, bool resident_job) {
  v1::ClusterRequest r;
  r.set_model(absl::GetFlag(FLAGS_model));
  r.set_d(d);
  r.set_k(absl::GetFlag(FLAGS_k));
  r.set_iterations(absl::GetFlag(FLAGS_iterations));
  r.set_seed(absl::GetFlag(FLAGS_seed));
  r.set_guard(absl::GetFlag(FLAGS_guard));
  if (absl::GetFlag(FLAGS_n_init) < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--n_init=", absl::GetFlag(FLAGS_n_init), ": must be at least 1"));
  }
  r.set_n_init(absl::GetFlag(FLAGS_n_init));
  absl::StatusOr<EmptyClusterPolicy> empty =
      ParseEmptyClusterPolicy(absl::GetFlag(FLAGS_empty_clusters));
  if (!empty.ok()) return empty.status();
  r.set_empty_clusters(ProtoValue<v1::EmptyClusters>(EmptyClusterPolicyName(*empty)));
  absl::StatusOr<std::map<std::string, double>> parameters =
      ParseParameters(absl::GetFlag(FLAGS_parameters));
  if (!parameters.ok()) return parameters.status();
  r.mutable_parameters()->insert(parameters->begin(), parameters->end());
  absl::StatusOr<std::optional<v1::Init>> init = InitFlag(resident_job);
  if (!init.ok()) return init.status();
  if (*init) r.set_init(**init);
  if (*init == v1::INIT_GIVEN) {
    absl::StatusOr<std::vector<float>> centers =
        ReadCenters(absl::GetFlag(FLAGS_centers_in), d, r.k());
    if (!centers.ok()) return centers.status();
    r.mutable_centers()->Add(centers->begin(), centers->end());
  }
  return r;
}

}  // namespace kmt
