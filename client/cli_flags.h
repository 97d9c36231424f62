// The flags several kmt subcommands share, and what is built from them: the
// client's options and the request fields every batch shares. Flags that one
// subcommand alone reads are defined in that subcommand's file.
#ifndef KMT_CLIENT_CLI_FLAGS_H_
#define KMT_CLIENT_CLI_FLAGS_H_

#include <cstdint>
#include <string>

#include "absl/flags/declare.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/cluster_client.h"
#include "proto/kmeans_transformer.pb.h"

ABSL_DECLARE_FLAG(int, d);
ABSL_DECLARE_FLAG(int, iterations);
ABSL_DECLARE_FLAG(std::string, model);
ABSL_DECLARE_FLAG(uint64_t, seed);
ABSL_DECLARE_FLAG(std::string, server);
ABSL_DECLARE_FLAG(int, streams);
ABSL_DECLARE_FLAG(int, max_attempts);
ABSL_DECLARE_FLAG(absl::Duration, timeout);

namespace kmt {

// The client's options from --server, --lb, --max_attempts, --window,
// --streams, --batches_per_stream, --timeout and the --tls flags (whose
// files are read here: one that cannot be is an error).
absl::StatusOr<ClientOptions> Options();

// The request fields every batch of `d`-dimensional points shares: model,
// k, iterations, seed, guard, the algorithm's parameters, initialisation (and the --centers_in
// centers for --init=given). --init=kmeans|| (k-means‖) is the resident job's own
// and refused unless `resident_job`; the template then leaves init unset.
absl::StatusOr<v1::ClusterRequest> Template(int d, bool resident_job = false);

// Whether --init names k-means‖.
bool InitIsKMeansParallel();

}  // namespace kmt

#endif  // KMT_CLIENT_CLI_FLAGS_H_
