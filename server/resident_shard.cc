#include "server/resident_shard.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "core/assign.h"
#include "core/cluster_sums.h"
#include "core/empty_clusters.h"
#include "core/validation.h"
#include "proto/raw_payload.h"

namespace kmt {
namespace {

// What the assign steps' bounds hold per point: a label and a lower bound
// (BoundedAssignment<float>).
constexpr int64_t kBoundsBytesPerPoint = sizeof(int) + sizeof(double);

// k*d or m*d row-major values as a d x m matrix of centers; m from the count.
absl::StatusOr<Matrix<float>> Centers(const google::protobuf::RepeatedField<float>& values,
                                      int64_t d, const char* what) {
  if (values.size() % d != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " has ", values.size(), " values, not a multiple of d = ", d));
  }
  return Eigen::Map<const Matrix<float>>(values.data(), d, values.size() / d);
}

// The same from either the repeated field or its float32 bytes.
absl::StatusOr<Matrix<float>> Centers(const google::protobuf::RepeatedField<float>& values,
                                      const std::string& bytes, int64_t d, const char* what) {
  if (bytes.empty()) return Centers(values, d, what);
  if (!values.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " and ", what, "_f32 are both set; send one of them"));
  }
  if (bytes.size() % (4 * d) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, "_f32 has ", bytes.size(), " bytes, not a multiple of 4 * d = ", 4 * d));
  }
  Matrix<float> centers(d, static_cast<Eigen::Index>(bytes.size() / (4 * d)));
  DecodeFloat32(bytes, centers.data());
  return centers;
}

}  // namespace

ResidentShard::~ResidentShard() {
  if (reserved_ > 0) memory_->Release(reserved_);
}

int64_t ResidentShard::Bytes(int64_t n, int64_t d, bool weighted, bool count_label_changes) {
  const int64_t per_point = 4 * d + 2 * 4 + kBoundsBytesPerPoint +
                            SeedingShard<float>::kBytesPerPoint + (weighted ? 4 : 0) +
                            (count_label_changes ? 4 : 0);
  if (n > std::numeric_limits<int64_t>::max() / per_point) return 0;
  return n * per_point;
}

absl::Status ResidentShard::Load(const v1::ShardChunk& chunk, v1::JobResponse* out) {
  const int64_t n = chunk.n(), d = chunk.d();
  const bool has_weights = chunk.weights_size() > 0 || !chunk.weights_f32().empty();
  if (reserved_ == 0) {
    if (n < 1 || d < 1 || d > limits_.max_d) {
      return absl::InvalidArgumentError(absl::StrCat(
          "shard of n = ", n, ", d = ", d, ": needs n >= 1 and 1 <= d <= ", limits_.max_d));
    }
    const int64_t bytes = Bytes(n, d, has_weights, chunk.count_label_changes());
    if (bytes == 0) {
      return absl::ResourceExhaustedError(
          absl::StrCat("shard of n = ", n, " points in d = ", d, " overflows a byte count"));
    }
    if (absl::Status s = memory_->Reserve(bytes); !s.ok()) {
      return absl::ResourceExhaustedError(
          absl::StrCat("shard of n = ", n, " points in d = ", d, ": ", s.message()));
    }
    reserved_ = bytes;
    points_.resize(d, n);
    if (has_weights) weights_.resize(n);
    count_label_changes_ = chunk.count_label_changes();
  } else if (n != points_.cols() || d != points_.rows()) {
    return absl::InvalidArgumentError(absl::StrCat("a chunk says n = ", n, ", d = ", d,
                                                   ", the shard's first said n = ", points_.cols(),
                                                   ", d = ", points_.rows()));
  } else if (chunk.count_label_changes() != count_label_changes_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a chunk says count_label_changes = ", chunk.count_label_changes() ? "true" : "false",
        ", the shard's first said ", count_label_changes_ ? "true" : "false"));
  }
  const bool raw = !chunk.points_f32().empty();
  if (raw && chunk.points_size() > 0) {
    return absl::InvalidArgumentError("points and points_f32 are both set; send one of them");
  }
  if (raw && chunk.points_f32().size() % 4 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("points_f32 has ", chunk.points_f32().size(),
                                                   " bytes, not a whole number of float32 values"));
  }
  const int64_t values = raw ? chunk.points_f32().size() / 4 : chunk.points_size();
  if (values % d != 0 || values / d > n - received_) {
    return absl::InvalidArgumentError(
        absl::StrCat("a chunk of ", values, " values after ", received_, " of n = ", n,
                     " points: needs a multiple of d = ", d, " and at most the points left"));
  }
  const int64_t count = values / d;
  // A weighted shard (its first chunk carried weights) takes a weight with
  // every point, an unweighted one none.
  const bool weighted = weights_.size() > 0;
  const bool raw_weights = !chunk.weights_f32().empty();
  if (has_weights && !weighted) {
    return absl::InvalidArgumentError(
        "a chunk carries weights, but the shard's first chunk had none: weights come in every "
        "chunk or in none");
  }
  if (weighted) {
    if (raw_weights && chunk.weights_size() > 0) {
      return absl::InvalidArgumentError("weights and weights_f32 are both set; send one of them");
    }
    if (chunk.weights_f32().size() % 4 != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("weights_f32 has ", chunk.weights_f32().size(),
                       " bytes, not a whole number of float32 values"));
    }
    const int64_t weights = raw_weights ? chunk.weights_f32().size() / 4 : chunk.weights_size();
    if (weights != count) {
      return absl::InvalidArgumentError(
          absl::StrCat("a chunk of ", count, " points has ", weights,
                       " weights; a weighted shard takes one with every point"));
    }
  }
  float* const at = points_.data() + received_ * d;
  if (raw) {
    DecodeFloat32(chunk.points_f32(), at);
  } else if (values > 0) {
    std::memcpy(at, chunk.points().data(), values * sizeof(float));
  }
  if (weighted && raw_weights) {
    DecodeFloat32(chunk.weights_f32(), weights_.data() + received_);
  } else if (weighted && count > 0) {
    std::memcpy(weights_.data() + received_, chunk.weights().data(), count * sizeof(float));
  }
  received_ += count;
  // Checked once, when complete: a NaN in the shard ends the job. One shard
  // may weigh 0 in all; the job's coordinator checks the dataset's sum.
  if (complete()) {
    if (absl::Status s = ValidatePoints(points_); !s.ok()) return s;
    if (weighted) {
      if (absl::Status s = ValidateWeights(weights_, n, /*zero_sum_allowed=*/true); !s.ok()) {
        return s;
      }
    }
  }
  out->set_points_loaded(received_);
  return absl::OkStatus();
}

absl::Status ResidentShard::CheckComplete() const {
  if (complete()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "the shard has ", received_, " of its ", points_.cols(), " points; steps need all of them"));
}

absl::Status ResidentShard::Assign(const v1::AssignStep& step, v1::JobResponse* out) {
  if (absl::Status s = CheckComplete(); !s.ok()) return s;
  const int d = static_cast<int>(points_.rows());
  if (step.k() < 1 || step.k() > limits_.max_k) {
    return absl::InvalidArgumentError(
        absl::StrCat("k = ", step.k(), ", must be between 1 and ", limits_.max_k));
  }
  if (step.farthest() < 0 || step.farthest() > step.k()) {
    return absl::InvalidArgumentError(
        absl::StrCat("farthest = ", step.farthest(), ", must be between 0 and k = ", step.k(),
                     " (relocation takes at most one point per empty cluster)"));
  }
  absl::StatusOr<Matrix<float>> centers =
      step.centers_f32().empty()
          ? CentersFromRowMajor<float>(step.centers(), step.k(), d)
          : RawMatrix({"centers", "k", step.k(), "d", d}, step.centers_size(), step.centers_f32());
  if (!centers.ok()) return centers.status();
  if (absl::Status s = ValidateCenterValues(*centers, d); !s.ok()) return s;
  Labels labels;
  ClusterSums sums(d, step.k());
  const Vector<float>* weights = weights_.size() > 0 ? &weights_ : nullptr;
  // The steps of a job assign the same points to centers that move a little
  // each time: the bounds keep most points' labels without their distances
  // to the other centers, with the labels, objective and sums of
  // AssignNearest to the last bit. A step of another k starts them afresh.
  if (assignment_ == nullptr || assignment_k_ != step.k()) {
    assignment_ =
        std::make_unique<BoundedAssignment<float>>(points_, weights, AssignmentPath::kAuto);
    assignment_k_ = step.k();
  }
  out->set_objective(assignment_->Assign(*centers, &labels, &sums));
  if (assignment_->stats().back().bounded) {
    out->set_points_settled_by_bounds(assignment_->stats().back().settled);
  }
  out->mutable_center_counts()->Add(sums.counts.begin(), sums.counts.end());
  out->mutable_center_sums()->Add(sums.sums.data(), sums.sums.data() + sums.sums.size());
  if (weights != nullptr) {
    out->mutable_center_weights()->Add(sums.weights.begin(), sums.weights.end());
  }
  if (count_label_changes_ && last_labels_.size() == labels.size()) {
    int64_t changed = 0;
    for (size_t i = 0; i < labels.size(); ++i) changed += labels[i] != last_labels_[i];
    out->set_labels_changed(changed);
    out->set_labels_compared(true);
  }
  if (step.farthest() > 0) {
    std::vector<float> distances;
    const std::vector<int64_t> far =
        FarthestPoints(points_, weights, labels, *centers, step.farthest(), &distances);
    std::vector<float> rows;
    rows.reserve(far.size() * d);
    for (const int64_t i : far) {
      out->add_far_indices(i);
      out->add_far_labels(labels[i]);
      out->add_far_weights(weights != nullptr ? (*weights)[i] : 1.0);
      rows.insert(rows.end(), points_.col(i).data(), points_.col(i).data() + d);
    }
    out->mutable_far_distances()->Add(distances.begin(), distances.end());
    EncodeFloat32(rows, out->mutable_far_points_f32());
  }
  if (step.return_labels()) out->mutable_labels()->Add(labels.begin(), labels.end());
  if (count_label_changes_) last_labels_ = std::move(labels);
  return absl::OkStatus();
}

SeedingShard<float>& ResidentShard::Seeding() {
  if (seeding_ == nullptr) {
    seeding_ =
        std::make_unique<SeedingShard<float>>(&points_, weights_.size() > 0 ? &weights_ : nullptr);
  }
  return *seeding_;
}

absl::Status ResidentShard::Seed(const v1::SeedStep& step, v1::JobResponse* out) {
  if (absl::Status s = CheckComplete(); !s.ok()) return s;
  const int64_t d = points_.rows();
  SeedRequest<float> request;
  absl::StatusOr<Matrix<float>> add = Centers(step.add_centers(), d, "add_centers");
  if (!add.ok()) return add.status();
  absl::StatusOr<Matrix<float>> candidates = Centers(step.candidates(), d, "candidates");
  if (!candidates.ok()) return candidates.status();
  request.add = *std::move(add);
  request.candidates = *std::move(candidates);
  request.indices.assign(step.point_indices().begin(), step.point_indices().end());
  request.targets.assign(step.draw_targets().begin(), step.draw_targets().end());
  absl::StatusOr<SeedAnswer<float>> answer = Seeding().Step(request);
  if (!answer.ok()) return answer.status();
  out->set_potential(answer->potential);
  out->mutable_points()->Add(answer->points.data(), answer->points.data() + answer->points.size());
  out->mutable_candidate_potentials()->Add(answer->candidate_potentials.begin(),
                                           answer->candidate_potentials.end());
  return absl::OkStatus();
}

absl::Status ResidentShard::KMeansParallel(const v1::KMeansParallelStep& step,
                                           v1::JobResponse* out) {
  if (absl::Status s = CheckComplete(); !s.ok()) return s;
  absl::StatusOr<Matrix<float>> add =
      Centers(step.add_centers(), step.add_centers_f32(), points_.rows(), "add_centers");
  if (!add.ok()) return add.status();
  // Checked before the distances change, so that a refused step leaves them.
  if (step.oversampling() != 0) {
    if (!std::isfinite(step.oversampling()) || step.oversampling() < 0 ||
        !std::isfinite(step.potential()) || step.potential() < 0 || step.round() < 0 ||
        step.first_point() < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("oversampling ", step.oversampling(), ", potential ", step.potential(),
                       ", round ", step.round(), ", first_point ", step.first_point(),
                       ": oversampling and potential must be finite, none may be negative"));
    }
    if (add->cols() == 0 && !Seeding().seeded()) {
      return absl::FailedPreconditionError(
          "sampling needs a center taken into the distances first (add_centers)");
    }
  }
  absl::StatusOr<double> potential = Seeding().AddCenters(*add);
  if (!potential.ok()) return potential.status();
  out->set_potential(*potential);
  if (step.return_weights()) {
    const std::vector<double> weights = Seeding().TakenCenterWeights();
    out->mutable_candidate_weights()->Add(weights.begin(), weights.end());
  }
  if (step.oversampling() == 0) return absl::OkStatus();
  absl::StatusOr<std::vector<int64_t>> taken = Seeding().Oversample(
      step.oversampling(), step.potential(), step.seed(), step.round(), step.first_point());
  if (!taken.ok()) return taken.status();
  const int64_t d = points_.rows();
  out->mutable_sampled_indices()->Add(taken->begin(), taken->end());
  out->mutable_sampled_points()->Reserve(static_cast<int>(taken->size() * d));
  for (int64_t i : *taken) {
    out->mutable_sampled_points()->Add(points_.col(i).data(), points_.col(i).data() + d);
  }
  return absl::OkStatus();
}

absl::Status ResidentShard::CandidateWeights(const v1::CandidateWeightsStep& step,
                                             v1::JobResponse* out) {
  if (absl::Status s = CheckComplete(); !s.ok()) return s;
  absl::StatusOr<Matrix<float>> candidates =
      Centers(step.candidates(), step.candidates_f32(), points_.rows(), "candidates");
  if (!candidates.ok()) return candidates.status();
  const int64_t most = int64_t{kCandidatesPerCluster} * limits_.max_k;
  if (candidates->cols() < 1 || candidates->cols() > most) {
    return absl::InvalidArgumentError(absl::StrCat(candidates->cols(),
                                                   " candidates, must be between 1 and ", most,
                                                   " (", kCandidatesPerCluster, " times max_k)"));
  }
  if (absl::Status s = ValidateCenterValues(*candidates, points_.rows()); !s.ok()) return s;
  const std::vector<double> weights =
      NearestCandidateWeights(points_, weights_.size() > 0 ? &weights_ : nullptr, *candidates);
  out->mutable_candidate_weights()->Add(weights.begin(), weights.end());
  return absl::OkStatus();
}

}  // namespace kmt
