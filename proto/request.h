// A ClusterRequest as the engine's batch, and a run as the response's fields:
// the one translation between the wire and the engine, used by the server's
// workers and by `kmt bench --in_process`, so both run a batch alike.
#ifndef KMT_PROTO_REQUEST_H_
#define KMT_PROTO_REQUEST_H_

#include "absl/status/statusor.h"
#include "core/batch.h"
#include "core/transformer.h"
#include "proto/kmeans_transformer.pb.h"

namespace kmt {

// The request's points, k, initialisation and options, validated once
// (Batch::Validate). Points and centers come from their repeated fields or
// their raw float32 bytes (proto/raw_payload.h); the shape fields n, d and k
// are checked against the values carried.
absl::StatusOr<Batch<float>> BatchFromRequest(const v1::ClusterRequest& request);

// Labels (unless omitted) and centers, as raw bytes if the request asked for
// a raw response; objective, layer objectives (if asked), layers run,
// empty-cluster events and cluster sums (if asked).
void FillResponse(const v1::ClusterRequest& request, const RunResult<float>& run,
                  v1::ClusterResponse* response);

}  // namespace kmt

#endif  // KMT_PROTO_REQUEST_H_
