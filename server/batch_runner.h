// One batch, request to response: validation against the limits and the
// model, initialisation, the model run, and the translation back. Failures
// become the response's error (its code and a message naming the problem);
// they never end the stream.
#ifndef KMT_SERVER_BATCH_RUNNER_H_
#define KMT_SERVER_BATCH_RUNNER_H_

#include "core/init.h"
#include "proto/kmeans_transformer.pb.h"
#include "server/limits.h"
#include "server/model_registry.h"

namespace kmt {

// `check` (if set) is called between layers and initialisation steps; a non-OK
// status (deadline, cancellation) stops the batch with that status.
v1::ClusterResponse RunBatch(const ModelRegistry& registry, const Limits& limits,
                             const v1::ClusterRequest& request, const StopCheck& check);

// A response that carries only an error for this request.
v1::ClusterResponse ErrorResponse(const v1::ClusterRequest& request, const absl::Status& status);

}  // namespace kmt

#endif  // KMT_SERVER_BATCH_RUNNER_H_
