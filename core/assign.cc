#include "core/assign.h"

#include <algorithm>
#include <array>
#include <limits>

#include "core/distances.h"

namespace kmt {
namespace {

// The scan's SIMD packet, and the points it carries at once: their running
// best, second best and label stay in vector registers (four packets each)
// while it walks the centers. Labels are carried as Scalars, exact far
// beyond any k served.
template <typename Scalar>
using Packet = typename Eigen::internal::packet_traits<Scalar>::type;
template <typename Scalar>
constexpr int kPacketSize = Eigen::internal::unpacket_traits<Packet<Scalar>>::size;
constexpr int kPacketsPerScan = 4;
template <typename Scalar>
constexpr Eigen::Index kLanes = kPacketsPerScan* kPacketSize<Scalar>;

// Points per matrix-product block, a multiple of kLanes at every SIMD level
// (64: four AVX-512 packets of floats): the block's products (points x k)
// stay within about 256 KiB so they are scanned while still in the core's
// cache. The blocks, and so the parts the sums are added in, are the same
// at every level.
constexpr Eigen::Index kBlockMultiple = 64;
static_assert(kBlockMultiple % kLanes<float> == 0 && kBlockMultiple % kLanes<double> == 0);

template <typename Scalar>
Eigen::Index BlockSize(Eigen::Index k) {
  const Eigen::Index budget = (256 * 1024) / static_cast<Eigen::Index>(sizeof(Scalar));
  return std::clamp<Eigen::Index>(budget / std::max<Eigen::Index>(k, 1), 64, 4096) &
         ~(kBlockMultiple - 1);
}

// The points are split into at most this many parts of whole blocks, each
// run by one thread with its own objective and sums, merged in part order.
// The split depends only on n, d and k, so neither does the thread count.
constexpr Eigen::Index kMaxParts = 64;
// Bytes of per-part cluster sums allowed before parts are merged into fewer.
constexpr double kPartSumsBytes = 64.0 * 1024 * 1024;

Eigen::Index Parts(Eigen::Index blocks, Eigen::Index d, Eigen::Index k) {
  const double by_memory = kPartSumsBytes / (sizeof(double) * static_cast<double>(d * k));
  return std::clamp<Eigen::Index>(
      std::min<Eigen::Index>(blocks, static_cast<Eigen::Index>(std::min(by_memory, 1e9))), 1,
      kMaxParts);
}

// For kLanes points (rows of a block's scores `score`, leading dimension ld),
// the largest and second largest score over the centers and the lowest index
// of the largest.
template <typename Scalar>
void ScanLanes(const Scalar* score, Eigen::Index ld, Eigen::Index k, Scalar* best_out,
               Scalar* second_out, Scalar* arg_out) {
  namespace simd = Eigen::internal;
  using P = Packet<Scalar>;
  constexpr int kPackets = kPacketsPerScan;
  constexpr int kSize = kPacketSize<Scalar>;
  P best[kPackets], second[kPackets], arg[kPackets];
  for (int v = 0; v < kPackets; ++v) {
    best[v] = second[v] = simd::pset1<P>(-std::numeric_limits<Scalar>::infinity());
    arg[v] = simd::pset1<P>(0);
  }
  for (Eigen::Index j = 0; j < k; ++j) {
    const P index = simd::pset1<P>(static_cast<Scalar>(j));
    for (int v = 0; v < kPackets; ++v) {
      const P s = simd::ploadu<P>(score + j * ld + v * kSize);
      second[v] = simd::pmax(second[v], simd::pmin(best[v], s));
      arg[v] = simd::pselect(simd::pcmp_lt(best[v], s), index, arg[v]);
      best[v] = simd::pmax(best[v], s);
    }
  }
  for (int v = 0; v < kPackets; ++v) {
    simd::pstoreu(best_out + v * kSize, best[v]);
    simd::pstoreu(second_out + v * kSize, second[v]);
    simd::pstoreu(arg_out + v * kSize, arg[v]);
  }
}

// The register kernel: the scores of one packet of points (its lanes)
// against kKernelCenters centers at a time, accumulated in registers over the
// coordinates, each stored to the block's scores and taken into the running
// best, second best and label as ScanLanes takes them. It replaces the
// blocked product and the scan where the centers are few enough to stay in
// the first-level cache, saving the product's packing of the points and a
// pass over the scores.
constexpr int kKernelCenters = 8;
// The most bytes of padded centers the kernel takes (of the first-level
// cache's 32 KiB), and the fewest coordinates: below one packet's worth the
// points' transposition is not done in registers and the product is faster.
constexpr Eigen::Index kKernelMaxCenterBytes = 16 * 1024;

// k centers padded to whole groups of the kernel's.
Eigen::Index KernelPaddedCenters(Eigen::Index k) {
  return (k + kKernelCenters - 1) / kKernelCenters * kKernelCenters;
}

template <typename Scalar>
bool UsesRegisterKernel(Eigen::Index d, Eigen::Index k) {
  constexpr Eigen::Index kSize = kPacketSize<Scalar>;
  return k > 0 && d >= kSize &&
         KernelPaddedCenters(k) * d * static_cast<Eigen::Index>(sizeof(Scalar)) <=
             kKernelMaxCenterBytes;
}

// `lanes` (d x packet size, coordinate-major) holds the packet's points;
// `transposed` the padded centers (transposed_), `offset` their offsets.
template <typename Scalar>
void KernelLanes(const Scalar* lanes, Eigen::Index d, const Matrix<Scalar>& transposed,
                 const Scalar* offset, Eigen::Index k, Scalar* score, Eigen::Index ld,
                 Scalar* best_out, Scalar* second_out, Scalar* arg_out) {
  namespace simd = Eigen::internal;
  using P = Packet<Scalar>;
  constexpr int kSize = kPacketSize<Scalar>;
  const Eigen::Index padded_k = transposed.rows();
  P best = simd::pset1<P>(-std::numeric_limits<Scalar>::infinity());
  P second = best;
  P arg = simd::pset1<P>(0);
  for (Eigen::Index first = 0; first < padded_k; first += kKernelCenters) {
    P acc[kKernelCenters];
    for (int c = 0; c < kKernelCenters; ++c) acc[c] = simd::pset1<P>(offset[first + c]);
    const Scalar* column = transposed.data() + first;
    for (Eigen::Index l = 0; l < d; ++l, column += padded_k) {
      const P x = simd::ploadu<P>(lanes + l * kSize);
      for (int c = 0; c < kKernelCenters; ++c) {
        acc[c] = simd::pmadd(x, simd::pset1<P>(column[c]), acc[c]);
      }
    }
    for (int c = 0; c < kKernelCenters; ++c) {
      const Eigen::Index j = first + c;
      if (j >= k) break;  // padding: its scores are -infinity
      simd::pstoreu(score + j * ld, acc[c]);
      const P index = simd::pset1<P>(static_cast<Scalar>(j));
      second = simd::pmax(second, simd::pmin(best, acc[c]));
      arg = simd::pselect(simd::pcmp_lt(best, acc[c]), index, arg);
      best = simd::pmax(best, acc[c]);
    }
  }
  simd::pstoreu(best_out, best);
  simd::pstoreu(second_out, second);
  simd::pstoreu(arg_out, arg);
}

// The points [first, first + count) of x (count at most one packet) into
// `lanes`, coordinate-major, the missing lanes zero.
template <typename Scalar>
void LoadLanes(const Eigen::Ref<const Matrix<Scalar>>& x, Eigen::Index first, Eigen::Index count,
               Scalar* lanes) {
  namespace simd = Eigen::internal;
  using P = Packet<Scalar>;
  constexpr int kSize = kPacketSize<Scalar>;
  const Eigen::Index d = x.rows();
  Eigen::Index l = 0;
  const Scalar* column = x.data() + first * x.outerStride();
  if (count == kSize) {
    for (; l + kSize <= d; l += kSize) {
      // A square of kSize points by kSize coordinates, transposed in
      // registers. (GCC warns that the packet type's alignment attribute is
      // not part of the template argument; no layout depends on it here.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wignored-attributes"
      simd::PacketBlock<P, kSize> block;
#pragma GCC diagnostic pop
      for (int p = 0; p < kSize; ++p) {
        block.packet[p] = simd::ploadu<P>(column + p * x.outerStride() + l);
      }
      simd::ptranspose(block);
      for (int q = 0; q < kSize; ++q) simd::pstoreu(lanes + (l + q) * kSize, block.packet[q]);
    }
  }
  for (; l < d; ++l) {
    for (int p = 0; p < kSize; ++p) {
      lanes[l * kSize + p] = p < count ? column[p * x.outerStride() + l] : Scalar(0);
    }
  }
}

// Where a lower bound lands after one more rounding of a positive value:
// below the exact result (one rounding moves it by at most eps / 2 of it).
double Below(double x) { return x * (1 - 2 * std::numeric_limits<double>::epsilon()); }
double Above(double x) { return x * (1 + 2 * std::numeric_limits<double>::epsilon()); }

}  // namespace

template <typename Scalar>
void NearestCenterScan<Scalar>::Init() {
  const Matrix<Scalar>& centers = centers_;
  block_ = BlockSize<Scalar>(centers.cols());
  const Eigen::Index d = centers.rows(), k = centers.cols();
  const Vector<Scalar> center_sq = SquaredNorms<Scalar>(centers);
  const Scalar center_sq_max = k > 0 ? center_sq.maxCoeff() : Scalar(0);
  // Every block's scores start from this row (exact: a power of two).
  offset_ = Scalar(-0.5) * center_sq.transpose();
  // Twice the scores' round-off bound for a point at squared distance sq from
  // its center j, with its norm bounded by SquaredNormBound: both bounds are
  // linear, so it is slack_per_sq * sq + slack_of[j].
  slack_per_sq_ = 2 * ScoreRoundOff<Scalar>(d, SquaredNormBound<Scalar>(d, 1, 0), 0);
  slack_of_.resize(k);
  for (Eigen::Index j = 0; j < k; ++j) {
    slack_of_[j] =
        2 * ScoreRoundOff<Scalar>(d, SquaredNormBound<Scalar>(d, 0, center_sq[j]), center_sq_max);
  }
  if (UsesRegisterKernel<Scalar>(d, k)) {
    const Eigen::Index padded = KernelPaddedCenters(k);
    transposed_ = Matrix<Scalar>::Zero(padded, d);
    transposed_.topRows(k) = centers.transpose();
    padded_offset_ = Vector<Scalar>::Constant(padded, -std::numeric_limits<Scalar>::infinity());
    padded_offset_.head(k) = offset_.transpose();
  }
}

template <typename Scalar>
void NearestCenterScan<Scalar>::Finish(const Eigen::Ref<const Matrix<Scalar>>& x,
                                       const Matrix<Scalar>& score, const Scalar* best,
                                       const Scalar* second, const Scalar* arg, int* labels,
                                       Scalar* sq_out, double* gap) const {
  const Eigen::Index d = centers_.rows(), k = centers_.cols(), rows = x.cols();
  for (Eigen::Index i = 0; i < rows; ++i) {
    const Scalar* xi = x.col(i).data();
    int label = static_cast<int>(arg[i]);
    Scalar sq = AssignedSquaredDistance(xi, centers_.col(label).data(), d);
    const Scalar slack = Slack(label, sq);
    const bool near_tie = best[i] - second[i] <= slack;
    if (near_tie) {
      // A near tie: decided again on directly computed distances.
      Scalar exact = std::numeric_limits<Scalar>::infinity();
      for (Eigen::Index j = 0; j < k; ++j) {
        if (score(i, j) < best[i] - slack) continue;
        const Scalar s = DirectSquaredDistance(xi, centers_.col(j).data(), d);
        if (s < exact) {
          exact = s;
          label = static_cast<int>(j);
        }
      }
      sq = AssignedSquaredDistance(xi, centers_.col(label).data(), d);
    }
    labels[i] = label;
    sq_out[i] = sq;
    if (gap != nullptr) {
      // Not a near tie: every other score lies at most `second` + slack / 2
      // and the label's at least best - slack / 2 (each within half the
      // slack of its exact value), and scores are half the squared distances
      // with their sign turned, so the others are farther by at least
      // 2 (best - second - slack). Each double operation is rounded down.
      double lower = 0;
      if (!near_tie) {
        const double spread = Below(static_cast<double>(best[i]) - second[i]);
        lower = std::max(0.0, Below(spread - Above(static_cast<double>(slack))));
      }
      gap[i] = 2 * lower;
    }
  }
}

template <typename Scalar>
void PointLanes<Scalar>::Build(const Matrix<Scalar>& points, Eigen::Index k) {
  constexpr Eigen::Index kSize = kPacketSize<Scalar>;
  packet_ = kSize;
  const Eigen::Index padded = (n_ + kSize - 1) / kSize * kSize;
  if (!UsesRegisterKernel<Scalar>(d_, k) ||
      static_cast<double>(padded * d_) * sizeof(Scalar) > kMaxBytes) {
    return;
  }
  lanes_.resize(padded * d_);
  for (Eigen::Index i = 0; i < n_; i += kSize) {
    LoadLanes<Scalar>(points, i, std::min(kSize, n_ - i), lanes_.data() + i * d_);
  }
}

template <typename Scalar>
void NearestCenterScan<Scalar>::Scan(const Eigen::Ref<const Matrix<Scalar>>& x, Scratch* scratch,
                                     int* labels, Scalar* sq_out, double* gap,
                                     const Scalar* lanes) const {
  constexpr Eigen::Index L = kLanes<Scalar>;
  const Eigen::Index d = centers_.rows(), k = centers_.cols(), rows = x.cols();
  Matrix<Scalar>& score = scratch->score;
  if (score.rows() != block_ || score.cols() != k) {
    score.resize(block_, k);
    scratch->best.resize(block_);
    scratch->second.resize(block_);
    scratch->arg.resize(block_);
  }
  Scalar* best = scratch->best.data();
  Scalar* second = scratch->second.data();
  Scalar* arg = scratch->arg.data();
  if (transposed_.size() > 0) {
    constexpr Eigen::Index kSize = kPacketSize<Scalar>;
    scratch->lanes.resize(d * kSize);
    for (Eigen::Index i = 0; i < rows; i += kSize) {
      const Scalar* packet = scratch->lanes.data();
      if (lanes != nullptr) {
        packet = lanes + i * d;
      } else {
        LoadLanes<Scalar>(x, i, std::min(kSize, rows - i), scratch->lanes.data());
      }
      KernelLanes(packet, d, transposed_, padded_offset_.data(), k, score.data() + i, block_,
                  best + i, second + i, arg + i);
    }
  } else {
    // A last partial group of lanes scans the offsets alone past the block.
    const Eigen::Index scanned = (rows + L - 1) / L * L;
    score.topRows(scanned).rowwise() = offset_;
    score.topRows(rows).noalias() += x.transpose() * centers_;
    for (Eigen::Index i = 0; i < scanned; i += L) {
      ScanLanes(score.data() + i, block_, k, best + i, second + i, arg + i);
    }
  }
  Finish(x, score, best, second, arg, labels, sq_out, gap);
}

template <typename Scalar>
Eigen::Index AssignmentPartSize(Eigen::Index n, Eigen::Index d, Eigen::Index k) {
  const Eigen::Index block = BlockSize<Scalar>(k);
  const Eigen::Index blocks = std::max<Eigen::Index>((n + block - 1) / block, 1);
  const Eigen::Index parts = Parts(blocks, d, k);
  return (blocks + parts - 1) / parts * block;
}

template <typename Scalar>
double AssignNearest(const Matrix<Scalar>& points, const Matrix<Scalar>& centers, Labels* labels,
                     NonDeduced<Vector<Scalar>>* sq_dist, ClusterSums* sums,
                     const NonDeduced<Vector<Scalar>>* weights, const PointLanes<Scalar>* lanes) {
  const Eigen::Index d = points.rows(), n = points.cols(), k = centers.cols();
  if (sq_dist != nullptr) sq_dist->resize(n);
  if (n == 0 || k == 0) {
    labels->assign(n, 0);
    return 0;
  }
  labels->resize(n);  // every label is written below

  const NearestCenterScan<Scalar> scan(centers);
  const Eigen::Index block = scan.block();
  // Blocks start at whole packets, so their lanes are a pointer away.
  const bool use_lanes = lanes != nullptr && lanes->fits(points) &&
                         lanes->packet() == kPacketSize<Scalar> && scan.register_kernel();
  const Eigen::Index part_size = AssignmentPartSize<Scalar>(n, d, k);
  const Eigen::Index parts = (n + part_size - 1) / part_size;
  std::vector<double> part_objective(parts, 0);
  std::vector<ClusterSums> part_sums;
  if (sums != nullptr)
    part_sums.assign(parts, ClusterSums(static_cast<int>(d), static_cast<int>(k)));
  int* out = labels->data();

#pragma omp parallel if (n * k * d > (1 << 18))
  {
    typename NearestCenterScan<Scalar>::Scratch scratch;
    Vector<Scalar> sq(block);
#pragma omp for schedule(dynamic)
    for (Eigen::Index p = 0; p < parts; ++p) {
      double objective = 0;
      ClusterSums* part = sums != nullptr ? &part_sums[p] : nullptr;
      for (Eigen::Index first = p * part_size; first < std::min(n, (p + 1) * part_size);
           first += block) {
        const Eigen::Index rows = std::min(block, n - first);
        scan.Scan(points.middleCols(first, rows), &scratch, out + first, sq.data(), nullptr,
                  use_lanes ? lanes->from(first) : nullptr);
        for (Eigen::Index i = 0; i < rows; ++i) {
          const Scalar* w = weights != nullptr ? &(*weights)[first + i] : nullptr;
          AddAssigned(points.col(first + i), out[first + i], sq[i], w, &objective, part);
          if (sq_dist != nullptr) (*sq_dist)[first + i] = sq[i];
        }
      }
      part_objective[p] = objective;
    }
  }
  double objective = 0;
  for (Eigen::Index p = 0; p < parts; ++p) {
    objective += part_objective[p];
    if (sums != nullptr) sums->Add(part_sums[p]);
  }
  return objective;
}

#define KMT_INSTANTIATE(S)                                                                    \
  template double AssignNearest<S>(const Matrix<S>&, const Matrix<S>&, Labels*, Vector<S>*,   \
                                   ClusterSums*, const Vector<S>*, const PointLanes<S>*);     \
  template void PointLanes<S>::Build(const Matrix<S>&, Eigen::Index);                         \
  template void NearestCenterScan<S>::Init();                                                 \
  template void NearestCenterScan<S>::Scan(const Eigen::Ref<const Matrix<S>>&,                \
                                           typename NearestCenterScan<S>::Scratch*, int*, S*, \
                                           double*, const S*) const;                          \
  template Eigen::Index AssignmentPartSize<S>(Eigen::Index, Eigen::Index, Eigen::Index);
KMT_INSTANTIATE(float)
KMT_INSTANTIATE(double)
#undef KMT_INSTANTIATE

}  // namespace kmt
