#include "proto/minibatch_state.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "proto/raw_payload.h"

namespace kmt {

void PutMiniBatchState(const MiniBatchState& state, v1::MiniBatchState* out) {
  EncodeFloat64(absl::MakeConstSpan(state.centers.data(), state.centers.size()),
                out->mutable_centers_f64());
  out->mutable_counts()->Assign(state.counts.begin(), state.counts.end());
  out->set_has_ewa(state.has_ewa);
  out->set_ewa_inertia(state.ewa_inertia);
  out->set_ewa_inertia_min(state.ewa_inertia_min);
  out->set_no_improvement(state.no_improvement);
  out->set_since_reassign(state.since_reassign);
  out->mutable_random_key()->Assign(state.random.key().begin(), state.random.key().end());
  out->set_random_pos(state.random.pos());
  out->set_steps_run(state.steps_run);
  out->set_reassigned(state.reassigned);
}

absl::StatusOr<MiniBatchState> GetMiniBatchState(const v1::MiniBatchState& in, int d, int k) {
  absl::StatusOr<Matrix<double>> centers =
      RawMatrix<double>({"centers", "k", k, "d", d}, 0, in.centers_f64());
  if (!centers.ok()) return centers.status();
  if (in.counts_size() != k) {
    return absl::InvalidArgumentError(
        absl::StrCat("a mini-batch state has ", in.counts_size(), " counts for k = ", k));
  }
  absl::StatusOr<NumpyRandomState> random = NumpyRandomState::FromState(
      std::vector<uint32_t>(in.random_key().begin(), in.random_key().end()), in.random_pos());
  if (!random.ok()) return random.status();
  MiniBatchState state;
  state.centers = *std::move(centers);
  state.counts.assign(in.counts().begin(), in.counts().end());
  state.has_ewa = in.has_ewa();
  state.ewa_inertia = in.ewa_inertia();
  state.ewa_inertia_min = in.ewa_inertia_min();
  state.no_improvement = in.no_improvement();
  state.since_reassign = in.since_reassign();
  state.random = *random;
  state.steps_run = in.steps_run();
  state.reassigned = in.reassigned();
  return state;
}

}  // namespace kmt
