// Passes over a file of points as Cluster requests, the points sent again
// at every pass (kmt cluster's per-batch mode, and its whole mode where the
// replicas hold no resident shard): one pass, its responses in order with
// the rows each batch held, the errors named by the file's rows, and
// PassShards, the whole file as a ShardSet whose assign step is one pass.
#ifndef KMT_CLIENT_PASS_SHARDS_H_
#define KMT_CLIENT_PASS_SHARDS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/cluster_client.h"
#include "client/shard_set.h"
#include "core/point_moments.h"
#include "io/point_reader.h"
#include "proto/kmeans_transformer.pb.h"

namespace kmt {

// The rows of the file one batch holds.
struct Rows {
  int64_t first = 0;
  int64_t n = 0;
};

// Receives each response, in request order, with the rows its batch held.
using BatchSink = std::function<void(v1::ClusterResponse&&, const Rows&)>;

// One pass over the file: batches of `batch_size` points built from `base`
// plus the points (and their `weights`, if given), each response handed to
// `sink` in order; a last batch of fewer than k points joins the one before,
// as no batch can have fewer points than clusters. The points read are added
// to `moments`, if given. Progress goes to stderr at most once a second.
absl::Status Pass(Client& client, PointReader& reader, const v1::ClusterRequest& base,
                  const std::string& label, int64_t batch_size, const BatchSink& sink,
                  const std::vector<float>* weights = nullptr, PointMoments* moments = nullptr);

// An error about "point i" of a request, its point made row `row_of(i)` of
// the file `input`: "row 5000 of F (point 904 of <what>)". Empty where it
// names no point.
std::string FileRowError(const std::string& message, const std::function<int64_t(int64_t)>& row_of,
                         const std::string& what, const std::string& input);

// A batch's error, naming the file's row where it names a point, else the
// batch's rows.
std::string RowError(const std::string& message, const Rows& rows, int64_t batch,
                     const std::string& input);

// The dataset as one shard that holds nothing (client/shard_set.h), for
// replicas without room for resident shards: an assign step is one pass
// over the file, every batch assigned to the step's centers and summed by
// the server (a Cluster request without iterations, weighted with
// `weights`), the answers added up in file order. The resident-job driver
// (client/resident_job.h) runs its Lloyd's iterations and stopping rules
// on it as on resident shards. Seeding steps are not passes (the initial
// centers come from a sample instead), nor is relocation, which needs the
// shards' farthest points.
class PassShards : public ShardSet {
 public:
  PassShards(Client& client, PointReader& reader, const v1::ClusterRequest& base,
             const std::vector<float>* weights, int64_t n, int64_t batch_size, std::string input)
      : client_(client),
        reader_(reader),
        base_(base),
        weights_(weights),
        n_(n),
        batch_size_(batch_size),
        input_(std::move(input)) {
    base_.set_init(v1::INIT_GIVEN);
    base_.set_iterations(0);
    base_.set_return_cluster_sums(true);
  }

  std::vector<int64_t> Sizes() const override { return {n_}; }

  // An assign step (Lloyd's): one pass, its batches' sums added in order.
  absl::StatusOr<std::vector<v1::JobResponse>> Round(
      const std::vector<std::optional<v1::JobRequest>>& requests) override;

  absl::Status Restart() override { return absl::OkStatus(); }
  int moves() const override { return 0; }

 private:
  Client& client_;
  PointReader& reader_;
  v1::ClusterRequest base_;
  const std::vector<float>* weights_;
  int64_t n_;
  int64_t batch_size_;
  std::string input_;
  int passes_ = 0;
};
}  // namespace kmt

#endif  // KMT_CLIENT_PASS_SHARDS_H_
