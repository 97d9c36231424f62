#include "client/pass_shards.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <mutex>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/cluster_sums.h"
#include "proto/batch_error.h"
#include "proto/raw_payload.h"

namespace kmt {
namespace {

using Clock = std::chrono::steady_clock;

// Progress on stderr at most once a second.
class Progress {
 public:
  void Report(const std::string& what) {
    const auto now = Clock::now();
    if (now - last_ < std::chrono::seconds(1)) return;
    last_ = now;
    std::fprintf(stderr, "\r%s   ", what.c_str());
    shown_ = true;
  }
  ~Progress() {
    if (shown_) std::fprintf(stderr, "\n");
  }

 private:
  Clock::time_point last_ = Clock::now();
  bool shown_ = false;
};

}  // namespace

absl::Status Pass(Client& client, PointReader& reader, const v1::ClusterRequest& base,
                  const std::string& label, int64_t batch_size, const BatchSink& sink,
                  const std::vector<float>* weights, PointMoments* moments) {
  if (absl::Status s = reader.Rewind(); !s.ok()) return s;
  batch_size = std::max<int64_t>(1, batch_size);
  int64_t batches = 0, points = 0;
  absl::Status read_status;
  Progress progress;
  // The next batch's points, read one batch ahead to see whether the one
  // after it is short.
  std::vector<float> ahead;
  int64_t ahead_n = -1;  // -1: not read yet
  std::mutex mu;
  std::deque<Rows> sent;
  const auto read = [&](std::vector<float>* values) -> int64_t {
    absl::StatusOr<int64_t> n = reader.Read(batch_size, values);
    if (!n.ok()) {
      read_status = n.status();
      return 0;
    }
    return *n;
  };
  const RequestSource source = [&](v1::ClusterRequest* r) {
    std::vector<float> values;
    int64_t n = ahead_n < 0 ? read(&values) : ahead_n;
    if (ahead_n >= 0) values.swap(ahead);
    ahead.clear();
    ahead_n = n > 0 ? read(&ahead) : 0;
    if (ahead_n > 0 && ahead_n < base.k()) {
      values.insert(values.end(), ahead.begin(), ahead.end());
      n += ahead_n;
      ahead.clear();
      ahead_n = read(&ahead);
    }
    if (!read_status.ok() || n == 0) return false;
    if (weights != nullptr && points + n > static_cast<int64_t>(weights->size())) {
      read_status = absl::InvalidArgumentError(absl::StrCat(
          "--weights_in has ", weights->size(), " weights, fewer than the points of the input"));
      return false;
    }
    *r = base;
    r->set_request_id(absl::StrCat(label, "-", batches++));
    r->set_n(n);
    r->mutable_points()->Add(values.begin(), values.end());
    if (weights != nullptr) {
      r->mutable_weights()->Add(weights->begin() + points, weights->begin() + points + n);
    }
    if (moments != nullptr) moments->Add(values.data(), n, reader.d());
    {
      std::lock_guard<std::mutex> lock(mu);
      sent.push_back({points, n});
    }
    points += n;
    progress.Report(absl::StrCat(label, ": ", batches, " batches, ",
                                 static_cast<int>(100 * reader.progress()), "%"));
    return true;
  };
  absl::Status status = client.Cluster(source, [&](v1::ClusterResponse&& r) {
    Rows rows;
    {
      std::lock_guard<std::mutex> lock(mu);
      rows = sent.front();
      sent.pop_front();
    }
    sink(std::move(r), rows);
  });
  if (!read_status.ok()) return read_status;
  if (status.ok() && weights != nullptr && points != static_cast<int64_t>(weights->size())) {
    return absl::InvalidArgumentError(absl::StrCat("--weights_in has ", weights->size(),
                                                   " weights for the input's ", points, " points"));
  }
  return status;
}

std::string FileRowError(const std::string& message, const std::function<int64_t(int64_t)>& row_of,
                         const std::string& what, const std::string& input) {
  return RenamePoint(message, [&](int64_t i) {
    return absl::StrCat("row ", row_of(i), " of ", input, " (point ", i, " of ", what, ")");
  });
}

std::string RowError(const std::string& message, const Rows& rows, int64_t batch,
                     const std::string& input) {
  const std::string named = FileRowError(
      message, [&](int64_t i) { return rows.first + i; }, absl::StrCat("batch ", batch), input);
  if (!named.empty()) return named;
  return absl::StrCat("batch ", batch, " (rows ", rows.first, " to ", rows.first + rows.n - 1,
                      " of ", input, "): ", message);
}

absl::StatusOr<std::vector<v1::JobResponse>> PassShards::Round(
    const std::vector<std::optional<v1::JobRequest>>& requests) {
  if (requests.size() != 1 || !requests[0] || !requests[0]->has_assign() ||
      requests[0]->assign().farthest() > 0) {
    return absl::UnimplementedError(
        "a job by passes over the file takes Lloyd's steps only: its initial centers come from "
        "a sample, and relocating empty clusters needs resident shards (--resident)");
  }
  const v1::AssignStep& step = requests[0]->assign();
  const int d = reader_.d(), k = step.k();
  v1::ClusterRequest request = base_;
  request.set_k(k);
  std::vector<float> centers(static_cast<size_t>(k) * d);
  DecodeFloat32(step.centers_f32(), centers.data());
  request.mutable_centers()->Assign(centers.begin(), centers.end());
  request.set_omit_labels(!step.return_labels());
  ClusterSums sums(d, k);
  v1::JobResponse answer;
  absl::Status failure;
  const absl::Status status = Pass(
      client_, reader_, request, step.return_labels() ? "labels" : absl::StrCat("pass ", ++passes_),
      batch_size_,
      [&, batch = int64_t{0}](v1::ClusterResponse&& r, const Rows& rows) mutable {
        if (const absl::Status error = FromBatchError(r.error()); !error.ok()) {
          if (failure.ok()) {
            failure = absl::Status(error.code(),
                                   RowError(std::string(error.message()), rows, batch, input_));
          }
          ++batch;
          return;
        }
        ++batch;
        answer.set_objective(answer.objective() + r.objective());
        answer.mutable_labels()->Add(r.labels().begin(), r.labels().end());
        for (int j = 0; j < r.center_counts_size(); ++j) {
          sums.counts[j] += r.center_counts(j);
          if (r.center_weights_size() > 0) sums.weights[j] += r.center_weights(j);
          for (int l = 0; l < d; ++l) sums.sums(l, j) += r.center_sums(j * d + l);
        }
      },
      weights_);
  if (!status.ok()) return status;
  if (!failure.ok()) return failure;
  answer.mutable_center_counts()->Add(sums.counts.begin(), sums.counts.end());
  answer.mutable_center_sums()->Add(sums.sums.data(), sums.sums.data() + sums.sums.size());
  if (weights_ != nullptr) {
    answer.mutable_center_weights()->Add(sums.weights.begin(), sums.weights.end());
  }
  return std::vector<v1::JobResponse>{std::move(answer)};
}

}  // namespace kmt
