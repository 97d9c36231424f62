// A ClusterRequest as the engine's batch, and a run as the response's fields:
// the one translation between the wire and the engine, used by the server's
// workers and by `kmt bench --in_process`, so both run a batch alike.
#ifndef KMT_PROTO_REQUEST_H_
#define KMT_PROTO_REQUEST_H_

#include "absl/status/statusor.h"
#include "core/batch.h"
#include "core/fitted_centers.h"
#include "core/sparse.h"
#include "core/transformer.h"
#include "proto/kmeans_transformer.pb.h"

namespace kmt {

// The element type of a request's payloads: float32 (the repeated fields
// and the _f32 bytes) or float64 (the _f64 bytes), run by the engine in float
// and in double. A request that sets payloads of both is INVALID_ARGUMENT,
// naming one of each.
enum class PayloadType { kFloat32, kFloat64 };
absl::StatusOr<PayloadType> RequestPayloadType(const v1::ClusterRequest& request);
// Whether the request sets a float64 payload: the precision to read it in,
// for a caller that leaves the check of its payloads to BatchFromRequest.
bool HasFloat64Payloads(const v1::ClusterRequest& request);

// The request's points, k, initialisation and options, validated once
// (Batch::Validate; reading checks only the payloads' types and counts). Scalar float reads a
// float32 request: points and centers from their repeated fields or their raw float32 bytes
// (proto/raw_payload.h); double reads a float64 request's _f64 bytes. A request of the other
// payload type, or of mixed ones, is INVALID_ARGUMENT. The shape fields n, d and k are checked
// against the values carried.
template <typename Scalar = float>
absl::StatusOr<Batch<Scalar>> BatchFromRequest(const v1::ClusterRequest& request);

// The most bytes of distances a response carries with DISTANCES_ALL (n * k
// values of the batch's precision): protobuf serialises at most 2 GiB a
// message, and the server holds the values twice while it answers. A
// request that asks for more is INVALID_ARGUMENT before anything is read.
inline constexpr int64_t kMaxAllDistancesBytes = int64_t{1} << 30;

// A request to the fitted model `fitted`: the batch of a request that sends
// its centers (minus its offset) with INIT_GIVEN and its offset as
// points_offset, converted to Scalar if the fit's precision is the other.
// The request itself sets no init, no centers and no offset, its d is the
// model's and its k the model's or 0; otherwise INVALID_ARGUMENT naming the
// field and the model (request.model).
template <typename Scalar>
absl::StatusOr<Batch<Scalar>> BatchFromRequest(const v1::ClusterRequest& request,
                                               const FittedCenters& fitted);

// A request whose points come as points_csr (HasSparsePoints): the points
// held sparse, the centers every step starts from and what it asks. Exact
// Lloyd's alone: `iterations` steps from given centers (INIT_GIVEN, or a
// fitted model's, its offset added back: sparse points are never shifted),
// stopped by tol and with empty clusters as a dense batch, weights if sent, and the labels, the
// distances (nearest or all) and the objective under the last centers.
template <typename Scalar>
struct SparseBatch {
  CsrMatrix<Scalar> points;  ///< n x d
  Matrix<Scalar> centers;    ///< d x k
  Vector<Scalar> weights;    ///< n, or empty: 1 each
  int iterations = 0;
  EmptyClusterPolicy empty_clusters = EmptyClusterPolicy::kKeep;
};

inline bool HasSparsePoints(const v1::ClusterRequest& request) { return request.has_points_csr(); }

// The sparse batch of a request (to the fitted model `fitted`, if not
// null), every field checked: INVALID_ARGUMENT naming the field for a dense
// points field beside points_csr, a points_offset, n or d that disagree
// with the arrays, a start other than given centers (k-means++ and
// restarts over sparse points run as a resident job), cluster sums, n_init or guard (not served for
// sparse points), or any payload a dense request would be refused for.
template <typename Scalar>
absl::StatusOr<SparseBatch<Scalar>> SparseBatchFromRequest(const v1::ClusterRequest& request,
                                                           const FittedCenters* fitted);

// The contract's reason for the engine's convergence, and back.
v1::ConvergenceReason ConvergenceReasonOf(Convergence why);
Convergence ConvergenceOf(v1::ConvergenceReason reason);

// Labels (unless omitted) and centers, as raw bytes if the request asked for
// a raw response (float64 bytes for a double run, else float32); objective,
// layer objectives (if asked), layers run, empty-cluster events and cluster
// sums (if asked).
template <typename Scalar>
void FillResponse(const v1::ClusterRequest& request, const RunResult<Scalar>& run,
                  v1::ClusterResponse* response);

}  // namespace kmt

#endif  // KMT_PROTO_REQUEST_H_
