// Mini-batch k-means' state (core/minibatch.h) on the wire and back: what a
// job's driver hands a shard that runs the steps itself, and what the shard
// answers.
#ifndef KMT_PROTO_MINIBATCH_STATE_H_
#define KMT_PROTO_MINIBATCH_STATE_H_

#include "absl/status/statusor.h"
#include "core/minibatch.h"
#include "proto/kmeans_transformer.pb.h"

namespace kmt {

void PutMiniBatchState(const MiniBatchState& state, v1::MiniBatchState* out);

// The state of k centers in d dimensions; INVALID_ARGUMENT naming what does
// not fit.
absl::StatusOr<MiniBatchState> GetMiniBatchState(const v1::MiniBatchState& in, int d, int k);

}  // namespace kmt

#endif  // KMT_PROTO_MINIBATCH_STATE_H_
