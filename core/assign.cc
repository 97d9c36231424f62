#include "core/assign.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/distances.h"
#include "core/narrow_float.h"
#include "core/simd.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

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

// The blocks' sizes (AssignmentBlockSize) are whole groups of lanes at every
// level.
static_assert(kAssignmentBlockMultiple % kLanes<float> == 0 &&
              kAssignmentBlockMultiple % kLanes<double> == 0);

// The most centers whose float32 scores a scan holds at once (more are
// taken a tile at a time), and the points a scan takes at once where that
// makes blocks small.
constexpr Eigen::Index kProductTileCenters = 1024, kSpanRows = 512;
// Through tiles, the points near a tie whose scores of every center one
// product computes again (Finish): 32 points' scores of 65,536 centers take
// 8 MiB in float32.
constexpr Eigen::Index kNearBatch = 32;

// For kLanes points (rows of a block's scores `score`, leading dimension ld),
// the largest and second largest score over the centers and the lowest index
// of the largest.
// The scores are those of centers `first` to `first + k - 1`; with
// `resume`, the outputs hold the running values over the centers before.
template <typename Scalar>
void ScanLanes(const Scalar* score, Eigen::Index ld, Eigen::Index k, Scalar* best_out,
               Scalar* second_out, Scalar* arg_out, Eigen::Index first = 0, bool resume = false) {
  namespace simd = Eigen::internal;
  using P = Packet<Scalar>;
  constexpr int kPackets = kPacketsPerScan;
  constexpr int kSize = kPacketSize<Scalar>;
  P best[kPackets], second[kPackets], arg[kPackets];
  for (int v = 0; v < kPackets; ++v) {
    if (resume) {
      best[v] = simd::ploadu<P>(best_out + v * kSize);
      second[v] = simd::ploadu<P>(second_out + v * kSize);
      arg[v] = simd::ploadu<P>(arg_out + v * kSize);
    } else {
      best[v] = second[v] = simd::pset1<P>(-std::numeric_limits<Scalar>::infinity());
      arg[v] = simd::pset1<P>(0);
    }
  }
  for (Eigen::Index j = 0; j < k; ++j) {
    const P index = simd::pset1<P>(static_cast<Scalar>(first + j));
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

// A packet's lanes looked up by a packet of labels (Scalars holding small
// integers): lane p of Lookup<kTables>(row, IndexOf(labels)) is entry
// labels[p] of the kTables packets from `row` (one or two), by in-register
// permutation. Where the level has none (below AVX2, and doubles with
// AVX2), kAvailable is false.
template <typename Scalar>
struct LaneTable {
  static constexpr bool kAvailable = false;
};
#if defined(__AVX512F__) && defined(__AVX512DQ__)
template <>
struct LaneTable<float> {
  static constexpr bool kAvailable = true;
  using Index = __m512i;
  static Index IndexOf(__m512 labels) { return _mm512_cvttps_epi32(labels); }
  template <int kTables>
  static __m512 Lookup(const float* row, Index index) {
    if constexpr (kTables == 1) return _mm512_permutexvar_ps(index, _mm512_loadu_ps(row));
    return _mm512_permutex2var_ps(_mm512_loadu_ps(row), index, _mm512_loadu_ps(row + 16));
  }
  // The labels as ints, and a bit per lane where a <= b.
  static void StoreLabels(int* out, Index index) { _mm512_storeu_si512(out, index); }
  static unsigned LessOrEqual(__m512 a, __m512 b) { return _mm512_cmp_ps_mask(a, b, _CMP_LE_OQ); }
};
template <>
struct LaneTable<double> {
  static constexpr bool kAvailable = true;
  using Index = __m512i;
  static Index IndexOf(__m512d labels) { return _mm512_cvttpd_epi64(labels); }
  template <int kTables>
  static __m512d Lookup(const double* row, Index index) {
    if constexpr (kTables == 1) return _mm512_permutexvar_pd(index, _mm512_loadu_pd(row));
    return _mm512_permutex2var_pd(_mm512_loadu_pd(row), index, _mm512_loadu_pd(row + 8));
  }
  static void StoreLabels(int* out, Index index) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm512_cvtepi64_epi32(index));
  }
  static unsigned LessOrEqual(__m512d a, __m512d b) { return _mm512_cmp_pd_mask(a, b, _CMP_LE_OQ); }
};
#elif defined(__AVX2__)
template <>
struct LaneTable<float> {
  static constexpr bool kAvailable = true;
  using Index = __m256i;
  static Index IndexOf(__m256 labels) { return _mm256_cvttps_epi32(labels); }
  template <int kTables>
  static __m256 Lookup(const float* row, Index index) {
    // The permutation reads an index's low three bits: with two packets,
    // both are permuted and the one an index of 8 or more names is taken.
    const __m256 low = _mm256_permutevar8x32_ps(_mm256_loadu_ps(row), index);
    if constexpr (kTables == 1) return low;
    const __m256 high = _mm256_permutevar8x32_ps(_mm256_loadu_ps(row + 8), index);
    const __m256i upper = _mm256_cmpgt_epi32(index, _mm256_set1_epi32(7));
    return _mm256_blendv_ps(low, high, _mm256_castsi256_ps(upper));
  }
  static void StoreLabels(int* out, Index index) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), index);
  }
  static unsigned LessOrEqual(__m256 a, __m256 b) {
    return static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(a, b, _CMP_LE_OQ)));
  }
};
#endif

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

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__x86_64__)
// The low-precision filter (NearestCenterScan::FilterBlock) at this level:
// bfloat16 products on AMX tiles, configured as eight tiles of 16 rows of
// 64 bytes. One product takes 32 points by 32 centers (two tiles each, four
// tiles of float32 scores) a step of 32 coordinates at a time.
#define KMT_NARROW_FILTER 1
constexpr Eigen::Index kNarrowGroup = 32;  // points or centers of one product
constexpr Eigen::Index kNarrowChunk = 32;  // coordinates of one step
// The centers whose scores are scanned at once: 32 points' scores stay
// within 512 KiB, in the second-level cache, and up to this many centers
// the points in doubt take their candidates from them.
constexpr Eigen::Index kNarrowTileCenters = 4096;
constexpr Eigen::Index kNarrowScoreFloats = kNarrowGroup * kNarrowTileCenters;
// The shapes it takes: below these the float32 scan costs little more than
// the conversion and the scan of the narrow scores.
constexpr Eigen::Index kNarrowMinDimension = 64, kNarrowMinCenters = 32;

struct alignas(64) TileConfig {
  uint8_t palette, start_row, reserved[14];
  uint16_t bytes_per_row[16];
  uint8_t rows[16];
};

__attribute__((target("amx-tile"))) void ConfigureTiles() {
  // ldtilecfg's operand is 64 bytes, here aligned to them.
  static const TileConfig config = [] {
    TileConfig c{};
    c.palette = 1;
    for (int t = 0; t < 8; ++t) {
      c.rows[t] = 16;
      c.bytes_per_row[t] = 64;
    }
    return c;
  }();
  _tile_loadconfig(&config);
}

__attribute__((target("amx-tile"))) void ReleaseTiles() { _tile_release(); }

// scores (32 x 32, row p point p, row stride ld floats) = the 32 points
// from `points` (bfloat16 rows of `stride` values) by the group of 32
// centers `centers` (NearestCenterScan::narrow_centers_'s layout), over
// `chunks` steps of 32 coordinates, accumulated in float32.
__attribute__((target("amx-tile,amx-bf16"))) void NarrowProduct(const uint16_t* points,
                                                                Eigen::Index stride,
                                                                const uint16_t* centers,
                                                                Eigen::Index chunks, float* scores,
                                                                Eigen::Index ld) {
  const long a_stride = static_cast<long>(stride * sizeof(uint16_t));
  const long c_stride = static_cast<long>(ld * sizeof(float));
  const uint16_t* second_points = points + 16 * stride;
  _tile_zero(4);
  _tile_zero(5);
  _tile_zero(6);
  _tile_zero(7);
  for (Eigen::Index q = 0; q < chunks; ++q) {
    const uint16_t* group = centers + q * 2 * 512;
    _tile_loadd(0, points + q * kNarrowChunk, a_stride);
    _tile_loadd(1, second_points + q * kNarrowChunk, a_stride);
    _tile_loadd(2, group, 64);
    _tile_loadd(3, group + 512, 64);
    _tile_dpbf16ps(4, 0, 2);
    _tile_dpbf16ps(5, 0, 3);
    _tile_dpbf16ps(6, 1, 2);
    _tile_dpbf16ps(7, 1, 3);
  }
  _tile_stored(4, scores, c_stride);
  _tile_stored(5, scores + 16, c_stride);
  _tile_stored(6, scores + 16 * ld, c_stride);
  _tile_stored(7, scores + 16 * ld + 16, c_stride);
}

// NarrowProduct's scores by AVX512-BF16's dot products: the same 32 points
// by 32 centers from the same layouts, eight points at a time, each
// coordinate pair of a point broadcast against a row of a tile of centers
// (the pair's coordinates of 16 centers). Each score is a float32 sum of
// the same exact products as on the tiles (in another order, within the
// same bound), inputs and results below float32's normal range taken as
// zero as there.
__attribute__((target("avx512bf16"))) void NarrowDotProduct(const uint16_t* points,
                                                            Eigen::Index stride,
                                                            const uint16_t* centers,
                                                            Eigen::Index chunks, float* scores,
                                                            Eigen::Index ld) {
  constexpr int kRows = 8;
  for (int first = 0; first < kNarrowGroup; first += kRows) {
    __m512 sum[kRows][2];
    for (auto& s : sum) s[0] = s[1] = _mm512_setzero_ps();
    for (Eigen::Index q = 0; q < chunks; ++q) {
      const uint16_t* group = centers + q * 2 * 512;
      for (int r = 0; r < 16; ++r) {
        const __m512bh c0 = reinterpret_cast<__m512bh>(_mm512_loadu_si512(group + r * 32));
        const __m512bh c1 = reinterpret_cast<__m512bh>(_mm512_loadu_si512(group + 512 + r * 32));
        for (int p = 0; p < kRows; ++p) {
          uint32_t pair;
          std::memcpy(&pair, points + (first + p) * stride + q * kNarrowChunk + 2 * r,
                      sizeof(pair));
          const __m512bh x = reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(pair)));
          sum[p][0] = _mm512_dpbf16_ps(sum[p][0], x, c0);
          sum[p][1] = _mm512_dpbf16_ps(sum[p][1], x, c1);
        }
      }
    }
    for (int p = 0; p < kRows; ++p) {
      _mm512_storeu_ps(scores + (first + p) * ld, sum[p][0]);
      _mm512_storeu_ps(scores + (first + p) * ld + 16, sum[p][1]);
    }
  }
}

// bfloat16's bits of 16 floats in the low halves of 32-bit lanes: rounded
// to nearest, ties to even (finite values beyond bfloat16's largest round to
// infinity).
inline __m512i NarrowBits(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  return _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff))),
                           16);
}

// A point's d coordinates less `shift` (float32 differences, x') into
// `out` in bfloat16 (x~), padded with zeros to `padded`, and the float32
// sums of the squares of x~ and of x' - x~ (exact in float32).
void NarrowPoint(const float* x, const float* shift, Eigen::Index d, Eigen::Index padded,
                 uint16_t* out, float* rounded_sq, float* residual_sq) {
  __m512 rounded_sum = _mm512_setzero_ps(), residual_sum = _mm512_setzero_ps();
  for (Eigen::Index l = 0; l < padded; l += 16) {
    const __mmask16 mask = l + 16 <= d ? 0xffff
                           : l < d     ? static_cast<__mmask16>((1u << (d - l)) - 1)
                                       : 0;
    const __m512 v =
        _mm512_sub_ps(_mm512_maskz_loadu_ps(mask, x + l), _mm512_maskz_loadu_ps(mask, shift + l));
    const __m512i bits = NarrowBits(v);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + l), _mm512_cvtepi32_epi16(bits));
    const __m512 rounded = _mm512_castsi512_ps(_mm512_slli_epi32(bits, 16));
    const __m512 residual = _mm512_sub_ps(v, rounded);
    rounded_sum = _mm512_fmadd_ps(rounded, rounded, rounded_sum);
    residual_sum = _mm512_fmadd_ps(residual, residual, residual_sum);
  }
  *rounded_sq = _mm512_reduce_add_ps(rounded_sum);
  *residual_sq = _mm512_reduce_add_ps(residual_sum);
}

// A point's candidates among its scores of `count` centers (a multiple of
// 16) from center `first` (scores plus `offset`, both from that center),
// added to its list (`index` and narrow score `kept`, `n` of them, at most
// `most`, in increasing order) where at or above `threshold`, the list
// first rid of those now below it when it is full; false if it overflows.
bool NarrowKeep(const float* score, const float* offset, Eigen::Index first, Eigen::Index count,
                float threshold, int most, int* index, float* kept, int* n) {
  const __m512 bar = _mm512_set1_ps(threshold);
  for (Eigen::Index j = 0; j < count; j += 16) {
    const __m512 s = _mm512_add_ps(_mm512_loadu_ps(score + j), _mm512_loadu_ps(offset + j));
    for (unsigned m = _mm512_cmp_ps_mask(s, bar, _CMP_GE_OQ); m != 0; m &= m - 1) {
      if (*n == most) {
        int left = 0;
        for (int t = 0; t < *n; ++t) {
          if (kept[t] >= threshold) {
            index[left] = index[t];
            kept[left++] = kept[t];
          }
        }
        *n = left;
        if (left == most) return false;
      }
      const int lane = __builtin_ctz(m);
      index[*n] = static_cast<int>(first + j) + lane;
      kept[(*n)++] = score[j + lane] + offset[j + lane];
    }
  }
  return true;
}

// Merges one point's scores against `count` centers (a multiple of 16)
// from center `first` (scores plus `offset`, both from that center) into
// its running best, second best and label, ties to the lowest index, as
// ScanLanes takes them.
void NarrowScanRow(const float* score, const float* offset, Eigen::Index first, Eigen::Index count,
                   float* best_out, float* second_out, int* arg_out) {
  const __m512 none = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 best = none, second = none;
  __m512i arg = _mm512_setzero_si512();
  __m512i index =
      _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(first)),
                       _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
  const __m512i step = _mm512_set1_epi32(16);
  for (Eigen::Index j = 0; j < count; j += 16) {
    const __m512 s = _mm512_add_ps(_mm512_loadu_ps(score + j), _mm512_loadu_ps(offset + j));
    const __mmask16 ahead = _mm512_cmp_ps_mask(s, best, _CMP_GT_OQ);
    second = _mm512_max_ps(second, _mm512_min_ps(best, s));
    best = _mm512_max_ps(best, s);
    arg = _mm512_mask_mov_epi32(arg, ahead, index);
    index = _mm512_add_epi32(index, step);
  }
  // Across the lanes: the best, its lowest index, and the second best (the
  // other lanes' best and every lane's second).
  const float top = _mm512_reduce_max_ps(best);
  const __mmask16 at_top = _mm512_cmp_ps_mask(best, _mm512_set1_ps(top), _CMP_EQ_OQ);
  const int label = _mm512_mask_reduce_min_epi32(at_top, arg);
  const __mmask16 chosen = _mm512_mask_cmpeq_epi32_mask(at_top, arg, _mm512_set1_epi32(label));
  const float runner = std::max(_mm512_reduce_max_ps(second),
                                _mm512_mask_reduce_max_ps(static_cast<__mmask16>(~chosen), best));
  if (top > *best_out) {
    *second_out = std::max(*best_out, runner);
    *best_out = top;
    *arg_out = label;
  } else {
    *second_out = std::max(*second_out, std::max(top, runner));
  }
}
#endif

// Where a lower bound lands after one more rounding of a positive value:
// below the exact result (one rounding moves it by at most eps / 2 of it).
double Below(double x) { return x * (1 - 2 * std::numeric_limits<double>::epsilon()); }
double Above(double x) { return x * (1 + 2 * std::numeric_limits<double>::epsilon()); }

}  // namespace

template <typename Scalar>
void NearestCenterScan<Scalar>::Init() {
  const Matrix<Scalar>& centers = centers_;
  block_ = AssignmentBlockSize<Scalar>(centers.cols());
  // Many centers make small blocks: a scan then takes several at once, so
  // that each product has rows enough to pay for packing its centers.
  span_ =
      centers.cols() > kProductTileCenters ? std::max(block_, kSpanRows / block_ * block_) : block_;
  const Eigen::Index d = centers.rows(), k = centers.cols();
  const Vector<Scalar> center_sq = SquaredNorms<Scalar>(centers);
  const Scalar center_sq_max = k > 0 ? center_sq.maxCoeff() : Scalar(0);
  // Every block's scores start from this row (exact: a power of two).
  offset_ = Scalar(-0.5) * center_sq.transpose();
  // Twice the scores' round-off bound for a point at squared distance sq from
  // its center j, with its norm bounded by SquaredNormBound: both bounds are
  // linear, so it is slack_per_sq * sq + slack_of[j].
  slack_per_sq_ = 2 * ScoreRoundOff<Scalar>(d, SquaredNormBound<Scalar>(d, 1, 0), 0);
  // With a bound b on the point's squared norm instead, every score's
  // round-off is within ScoreRoundOff(d, b, center_sq_max) / 2 whatever the
  // label.
  slack_per_norm_ = 2 * ScoreRoundOff<Scalar>(d, 1, 0);
  slack_base_ = 2 * ScoreRoundOff<Scalar>(d, 0, center_sq_max);
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
    constexpr Eigen::Index kSize = kPacketSize<Scalar>;
    if (LaneTable<Scalar>::kAvailable && k <= 2 * kSize) {
      lane_tables_ = k <= kSize ? 1 : 2;
      const Eigen::Index width = lane_tables_ * kSize;
      center_lanes_ = Vector<Scalar>::Zero(d * width);
      for (Eigen::Index l = 0; l < d; ++l) {
        for (Eigen::Index j = 0; j < k; ++j) center_lanes_[l * width + j] = centers(l, j);
      }
      slack_lanes_ = Vector<Scalar>::Zero(width);
      slack_lanes_.head(k) = slack_of_;
    }
  }
#if KMT_NARROW_FILTER
  if constexpr (std::is_same_v<Scalar, float>) {
    if (transposed_.size() == 0 && d >= kNarrowMinDimension && k >= kNarrowMinCenters &&
        ActiveLowPrecisionFilter() != LowPrecisionFilter::kNone) {
      narrow_filter_ = ActiveLowPrecisionFilter();
      InitNarrow();
    }
  }
#endif
}

template <typename Scalar>
void NearestCenterScan<Scalar>::InitNarrow() {
#if KMT_NARROW_FILTER
  if constexpr (std::is_same_v<Scalar, float>) {
    const Matrix<float>& centers = centers_;
    const Eigen::Index d = centers.rows(), k = centers.cols();
    narrow_d_ = (d + kNarrowChunk - 1) / kNarrowChunk * kNarrowChunk;
    narrow_k_ = (k + kNarrowGroup - 1) / kNarrowGroup * kNarrowGroup;
    const Eigen::Index chunks = narrow_d_ / kNarrowChunk;
    const Vector<double> mean = centers.template cast<double>().rowwise().mean();
    narrow_shift_.assign(narrow_d_, 0);
    for (Eigen::Index l = 0; l < d; ++l) narrow_shift_[l] = static_cast<float>(mean[l]);
    narrow_centers_.assign(narrow_k_ * narrow_d_, 0);
    narrow_offset_.assign(narrow_k_, -std::numeric_limits<float>::infinity());
    // |c'|^2, |c~|^2, |c' - c~|^2: each center's, their largest.
    double most0 = 0, most1 = 0, most2 = 0;
#pragma omp parallel if (k * d > (1 << 17))
    {
      std::vector<uint16_t> bits(d);
#pragma omp for schedule(static) reduction(max : most0, most1, most2)
      for (Eigen::Index j = 0; j < k; ++j) {
        // The shifted coordinates, their roundings and the roundings'
        // errors, exact in double, their squares summed in lanes of
        // kLanes (any order of the additions is within the bound below).
        constexpr int kLanes = 8;
        double sums[3][kLanes] = {};
        const float* c = centers.col(j).data();
        const float* shift = narrow_shift_.data();
        Eigen::Index l = 0;
        const auto add = [&](Eigen::Index at, int lane) {
          const double shifted = static_cast<double>(c[at]) - shift[at];
          const uint16_t b = NarrowBFloat16(static_cast<float>(shifted));
          bits[at] = b;
          const double rounded = WidenBFloat16(b), residual = shifted - rounded;
          sums[0][lane] += shifted * shifted;
          sums[1][lane] += rounded * rounded;
          sums[2][lane] += residual * residual;
        };
        for (; l + kLanes <= d; l += kLanes) {
          for (int lane = 0; lane < kLanes; ++lane) add(l + lane, lane);
        }
        for (; l < d; ++l) add(l, 0);
        double sum[3] = {};
        for (int t = 0; t < 3; ++t) {
          for (int lane = 0; lane < kLanes; ++lane) sum[t] += sums[t][lane];
        }
        // Group j / 32, tile (j % 32) / 16: in each step's 512 values, row r
        // holds coordinates 2r and 2r + 1 of the tile's 16 centers in turn.
        uint16_t* group = narrow_centers_.data() + (j / kNarrowGroup) * chunks * 1024 +
                          ((j % kNarrowGroup) / 16) * 512 + (j % 16) * 2;
        for (l = 0; l < d; ++l) {
          group[(l / kNarrowChunk) * 1024 + ((l % kNarrowChunk) / 2) * 32 + l % 2] = bits[l];
        }
        narrow_offset_[j] = static_cast<float>(-sum[0] / 2);
        most0 = std::max(most0, sum[0]);
        most1 = std::max(most1, sum[1]);
        most2 = std::max(most2, sum[2]);
      }
    }
    const double most[3] = {most0, most1, most2};
    // The double sums of d squares are within d eps of the exact ones (eps
    // = 2^-53, d far below 10^6): 1e-9 more covers them and the square
    // roots.
    constexpr double kAbove = 1 + 1e-9;
    auto norm = [&](double sq) { return std::sqrt(sq * kAbove) * kAbove; };
    narrow_center_norm_ = norm(most[0]);
    narrow_rounded_norm_ = norm(most[1]);
    narrow_residual_norm_ = norm(most[2]);
    double shift_sq = 0;
    for (float m : narrow_shift_) shift_sq += static_cast<double>(m) * m;
    narrow_shift_norm_ = norm(shift_sq);
    narrow_slack_of_ = k > 0 ? static_cast<double>(slack_of_.maxCoeff()) : 0;
    if (!(narrow_rounded_norm_ * narrow_rounded_norm_ < 1e37) ||
        !(narrow_center_norm_ * narrow_center_norm_ < 1e37)) {
      // Scores that could overflow float32: no filter.
      narrow_centers_.clear();
    }
  }
#endif
}

template <typename Scalar>
template <typename CenterOf, typename ScoreOf>
void NearestCenterScan<Scalar>::FinishAmong(const Scalar* xi, Eigen::Index count,
                                            CenterOf center_of, ScoreOf score_of, Scalar best,
                                            Scalar second, int label, Scalar sq, int* label_out,
                                            Scalar* sq_out, double* gap) const {
  const Eigen::Index d = centers_.rows();
  const Scalar slack = Slack(label, sq);
  const bool near_tie = best - second <= slack;
  if (near_tie) {
    // A near tie: decided again on directly computed distances.
    Scalar exact = std::numeric_limits<Scalar>::infinity();
    for (Eigen::Index t = 0; t < count; ++t) {
      if (score_of(t) < best - slack) continue;
      const Eigen::Index j = center_of(t);
      const Scalar s = DirectSquaredDistance(xi, centers_.col(j).data(), d);
      if (s < exact) {
        exact = s;
        label = static_cast<int>(j);
      }
    }
    sq = AssignedSquaredDistance(xi, centers_.col(label).data(), d);
  }
  *label_out = label;
  *sq_out = sq;
  if (gap != nullptr) *gap = near_tie ? 0 : GapOf(best, second, slack);
}

template <typename Scalar>
double NearestCenterScan<Scalar>::GapOf(Scalar best, Scalar second, Scalar slack) {
  // Every other score lies at most `second` + slack / 2 and the label's at
  // least best - slack / 2 (each within half the slack of its exact value),
  // and scores are half the squared distances with their sign turned, so
  // the others are farther by at least 2 (best - second - slack). Each
  // double operation is rounded down.
  const double spread = Below(static_cast<double>(best) - second);
  return 2 * std::max(0.0, Below(spread - Above(static_cast<double>(slack))));
}

template <typename Scalar>
void NearestCenterScan<Scalar>::FinishPoint(const Scalar* xi, const Matrix<Scalar>& score,
                                            Eigen::Index i, Scalar best, Scalar second, int label,
                                            Scalar sq, int* label_out, Scalar* sq_out,
                                            double* gap) const {
  FinishAmong(
      xi, centers_.cols(), [](Eigen::Index j) { return j; },
      [&](Eigen::Index j) { return score(i, j); }, best, second, label, sq, label_out, sq_out, gap);
}

template <typename Scalar>
void NearestCenterScan<Scalar>::Finish(const Eigen::Ref<const Matrix<Scalar>>& x,
                                       const Matrix<Scalar>& score, const Scalar* best,
                                       const Scalar* second, const Scalar* arg, int* labels,
                                       Scalar* sq_out, double* gap, Scratch* scratch) const {
  const Eigen::Index d = centers_.rows(), k = centers_.cols(), rows = x.cols();
  const bool tiled = score.cols() < k;
  // 1. Each point's distance to its scanned center, four at once, and the
  // near-tie test: the others are answered, the near ties listed.
  for (Eigen::Index i = 0; i < rows; i += 4) {
    const int count = static_cast<int>(std::min<Eigen::Index>(4, rows - i));
    const Scalar* xs[4];
    const Scalar* cs[4];
    Scalar sq[4];
    for (int p = 0; p < count; ++p) {
      xs[p] = x.col(i + p).data();
      cs[p] = centers_.col(static_cast<Eigen::Index>(arg[i + p])).data();
    }
    AssignedSquaredDistances(xs, cs, count, d, sq);
    for (int p = 0; p < count; ++p) {
      const Eigen::Index r = i + p;
      const int label = static_cast<int>(arg[r]);
      const Scalar slack = Slack(label, sq[p]);
      if (!(best[r] - second[r] <= slack)) {
        labels[r] = label;
        sq_out[r] = sq[p];
        if (gap != nullptr) gap[r] = GapOf(best[r], second[r], slack);
        continue;
      }
      if (tiled) {
        scratch->near_row.push_back(r);
        scratch->near_label.push_back(label);
        scratch->near_floor.push_back(best[r] - slack);
        continue;
      }
      ListTie(
          r, label, k, [](Eigen::Index j) { return static_cast<int>(j); },
          [&](Eigen::Index j) { return score(r, j); }, best[r] - slack, scratch);
    }
  }
  // 2. Through tiles, the scores of the tiles before are gone: the points
  // near a tie get their scores of every center again, kNearBatch at a time
  // in one product (each point's alone would read every center once per
  // point). Any order of the products' additions keeps within the slack.
  const Eigen::Index near = static_cast<Eigen::Index>(scratch->near_row.size());
  for (Eigen::Index first = 0; first < near; first += kNearBatch) {
    const Eigen::Index m = std::min(kNearBatch, near - first);
    scratch->near_points.resize(d, m);
    for (Eigen::Index t = 0; t < m; ++t) {
      scratch->near_points.col(t) = x.col(scratch->near_row[first + t]);
    }
    scratch->near_scores.resize(m, k);
    scratch->near_scores.rowwise() = offset_;
    scratch->near_scores.noalias() += scratch->near_points.transpose() * centers_;
    for (Eigen::Index t = 0; t < m; ++t) {
      ListTie(
          scratch->near_row[first + t], scratch->near_label[first + t], k,
          [](Eigen::Index j) { return static_cast<int>(j); },
          [&](Eigen::Index j) { return scratch->near_scores(t, j); },
          scratch->near_floor[first + t], scratch);
    }
  }
  scratch->near_row.clear();
  scratch->near_label.clear();
  scratch->near_floor.clear();
  // 3. The near ties.
  DecideTies(x, scratch, labels, sq_out, gap);
}

template <typename Scalar>
template <typename CenterOf, typename ScoreOf>
void NearestCenterScan<Scalar>::ListTie(Eigen::Index r, int label, Eigen::Index count,
                                        CenterOf center_of, ScoreOf score_of, Scalar floor,
                                        Scratch* scratch) {
  if (scratch->tie_first.empty()) scratch->tie_first.push_back(0);
  scratch->tie_point.push_back(r);
  scratch->tie_label.push_back(label);
  for (Eigen::Index t = 0; t < count; ++t) {
    if (!(score_of(t) < floor)) scratch->tie_center.push_back(center_of(t));
  }
  scratch->tie_first.push_back(static_cast<Eigen::Index>(scratch->tie_center.size()));
}

template <typename Scalar>
void NearestCenterScan<Scalar>::DecideTies(const Eigen::Ref<const Matrix<Scalar>>& x,
                                           Scratch* scratch, int* labels, Scalar* sq_out,
                                           double* gap) const {
  const Eigen::Index d = centers_.rows();
  const std::vector<Eigen::Index>& tie_point = scratch->tie_point;
  const std::vector<Eigen::Index>& tie_first = scratch->tie_first;
  const std::vector<int>& tie_center = scratch->tie_center;
  const Eigen::Index ties = static_cast<Eigen::Index>(tie_point.size());
  if (ties > 0) {
    // Every candidate's direct distance, kDirectChains at a time.
    const Eigen::Index pairs = static_cast<Eigen::Index>(tie_center.size());
    scratch->tie_distance.resize(pairs);
    for (Eigen::Index first = 0, t = 0; first < pairs; first += kDirectChains) {
      const int count = static_cast<int>(std::min<Eigen::Index>(kDirectChains, pairs - first));
      const Scalar* xs[kDirectChains];
      const Scalar* cs[kDirectChains];
      for (int q = 0; q < count; ++q) {
        while (tie_first[t + 1] <= first + q) ++t;
        xs[q] = x.col(tie_point[t]).data();
        cs[q] = centers_.col(tie_center[first + q]).data();
      }
      DirectSquaredDistancePairs(xs, cs, count, d, scratch->tie_distance.data() + first);
    }
  }
  // Each one's label, the first least, and its distance to it, four at once.
  for (Eigen::Index first = 0; first < ties; first += 4) {
    const int count = static_cast<int>(std::min<Eigen::Index>(4, ties - first));
    const Scalar* xs[4];
    const Scalar* cs[4];
    Scalar sq[4];
    for (int p = 0; p < count; ++p) {
      const Eigen::Index t = first + p, r = tie_point[t];
      Scalar exact = std::numeric_limits<Scalar>::infinity();
      int label = scratch->tie_label[t];
      for (Eigen::Index q = tie_first[t]; q < tie_first[t + 1]; ++q) {
        if (scratch->tie_distance[q] < exact) {
          exact = scratch->tie_distance[q];
          label = tie_center[q];
        }
      }
      labels[r] = label;
      xs[p] = x.col(r).data();
      cs[p] = centers_.col(label).data();
    }
    AssignedSquaredDistances(xs, cs, count, d, sq);
    for (int p = 0; p < count; ++p) {
      const Eigen::Index r = tie_point[first + p];
      sq_out[r] = sq[p];
      if (gap != nullptr) gap[r] = 0;
    }
  }
  scratch->tie_point.clear();
  scratch->tie_label.clear();
  scratch->tie_first.clear();
  scratch->tie_center.clear();
}

template <typename Scalar>
void NearestCenterScan<Scalar>::FinishLanes(const Eigen::Ref<const Matrix<Scalar>>& x,
                                            Eigen::Index first, Eigen::Index count,
                                            const Scalar* lanes, const Matrix<Scalar>& score,
                                            const Scalar* best, const Scalar* second,
                                            const Scalar* arg, int* labels, Scalar* sq_out,
                                            double* gap, const Scalar* norms) const {
  if constexpr (LaneTable<Scalar>::kAvailable) {
    namespace simd = Eigen::internal;
    using P = Packet<Scalar>;
    constexpr int kSize = kPacketSize<Scalar>;
    using Table = LaneTable<Scalar>;
    if (norms != nullptr) {
      // The labels alone: every label stored, then the points whose best two
      // scores lie within the slack of their norm's bound decided again one
      // by one (FinishPoint, from their distance to the label's center; its
      // own test, from that distance, bounds the round-off as well).
      const P slack =
          simd::padd(simd::pmul(simd::pset1<P>(slack_per_norm_), simd::ploadu<P>(norms)),
                     simd::pset1<P>(slack_base_));
      const P spread = simd::psub(simd::ploadu<P>(best + first), simd::ploadu<P>(second + first));
      unsigned near = Table::LessOrEqual(spread, slack);
      if (count == kSize) {
        Table::StoreLabels(labels + first, Table::IndexOf(simd::ploadu<P>(arg + first)));
      } else {
        near &= (1u << count) - 1;
        for (Eigen::Index p = 0; p < count; ++p) {
          labels[first + p] = static_cast<int>(arg[first + p]);
        }
      }
      const Eigen::Index d = centers_.rows();
      for (; near != 0; near &= near - 1) {
        const Eigen::Index i = first + __builtin_ctz(near);
        const Scalar* xi = x.col(i).data();
        Scalar sq;
        FinishPoint(xi, score, i, best[i], second[i], labels[i],
                    AssignedSquaredDistance(xi, centers_.col(labels[i]).data(), d), labels + i, &sq,
                    nullptr);
      }
      return;
    }
    // AssignedSquaredDistance's operations, lane by lane: coordinate l in
    // running sum l mod 8, the sums added pairwise at the end.
    constexpr int kSums = 8;
    const Eigen::Index d = centers_.rows();
    const typename Table::Index label = Table::IndexOf(simd::ploadu<P>(arg + first));
    // The squared distances and the slacks, with the centers' coordinates
    // in one packet or two.
    P sq, slack;
    auto compute = [&](auto tables) {
      constexpr int kTables = decltype(tables)::value;
      const Scalar* table = center_lanes_.data();
      P sum[kSums];
      for (P& s : sum) s = simd::pset1<P>(0);
      auto add = [&](Eigen::Index l, int j) {
        const P c = Table::template Lookup<kTables>(table + l * kTables * kSize, label);
        const P diff = simd::psub(simd::ploadu<P>(lanes + l * kSize), c);
        sum[j] = simd::padd(sum[j], simd::pmul(diff, diff));
      };
      Eigen::Index l = 0;
      for (; l + kSums <= d; l += kSums) {
        for (int j = 0; j < kSums; ++j) add(l + j, j);
      }
      for (int j = 0; l < d; ++l, ++j) add(l, j);
      sq = simd::padd(simd::padd(simd::padd(sum[0], sum[4]), simd::padd(sum[2], sum[6])),
                      simd::padd(simd::padd(sum[1], sum[5]), simd::padd(sum[3], sum[7])));
      slack = simd::padd(simd::pmul(simd::pset1<P>(slack_per_sq_), sq),
                         Table::template Lookup<kTables>(slack_lanes_.data(), label));
    };
    if (lane_tables_ == 1) {
      compute(std::integral_constant<int, 1>());
    } else {
      compute(std::integral_constant<int, 2>());
    }
    if (gap == nullptr && count == kSize) {
      // A whole packet: every label and distance stored, then the near ties
      // (rare) decided again one by one.
      Table::StoreLabels(labels + first, label);
      simd::pstoreu(sq_out + first, sq);
      const P spread = simd::psub(simd::ploadu<P>(best + first), simd::ploadu<P>(second + first));
      for (unsigned near = LaneTable<Scalar>::LessOrEqual(spread, slack); near != 0;
           near &= near - 1) {
        const Eigen::Index i = first + __builtin_ctz(near);
        FinishPoint(x.col(i).data(), score, i, best[i], second[i], labels[i], sq_out[i], labels + i,
                    sq_out + i, nullptr);
      }
      return;
    }
    // A last partial packet, or gaps asked for: each point's test and gap
    // from its distance computed above.
    alignas(sizeof(P)) Scalar sq_of[kSize];
    simd::pstore(sq_of, sq);
    for (Eigen::Index p = 0; p < count; ++p) {
      const Eigen::Index i = first + p;
      FinishPoint(x.col(i).data(), score, i, best[i], second[i], static_cast<int>(arg[i]), sq_of[p],
                  labels + i, sq_out + i, gap != nullptr ? gap + i : nullptr);
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
  // Each computed squared norm is within (d + 1) eps of the exact one; the
  // factor leaves room for that and for its own rounding.
  const Scalar above = 1 + 4 * static_cast<Scalar>(d_ + 2) * std::numeric_limits<Scalar>::epsilon();
  norms_ = Vector<Scalar>::Zero(padded);
  for (Eigen::Index i = 0; i < n_; ++i) norms_[i] = points.col(i).squaredNorm() * above;
}

template <typename Scalar>
void NearestCenterScan<Scalar>::Scan(const Eigen::Ref<const Matrix<Scalar>>& x, Scratch* scratch,
                                     int* labels, Scalar* sq_out, double* gap, const Scalar* lanes,
                                     const Scalar* norms) const {
  const Eigen::Index d = centers_.rows(), k = centers_.cols(), rows = x.cols();
  if (sq_out != nullptr || gap != nullptr || center_lanes_.size() == 0) norms = nullptr;
  if (sq_out == nullptr && norms == nullptr) {
    // The distances are computed whatever the caller asks for.
    scratch->sq.resize(span_);
    sq_out = scratch->sq.data();
  }
  Matrix<Scalar>& score = scratch->score;
  const Eigen::Index score_cols = std::min(k, kProductTileCenters);
  if (score.rows() != span_ || score.cols() != score_cols) {
    score.resize(span_, score_cols);
    scratch->best.resize(span_);
    scratch->second.resize(span_);
    scratch->arg.resize(span_);
  }
  if (transposed_.size() == 0) {
    if (!filtered()) {
      ScanProducts(x, scratch, labels, sq_out, gap);
      return;
    }
    // The filter first, then the points it leaves open through the float32
    // products, gathered.
    scratch->open.clear();
    FilterBlock(x, scratch, labels, sq_out, gap);
    const Eigen::Index m = static_cast<Eigen::Index>(scratch->open.size());
    if (m == 0) return;
    scratch->open_x.resize(d, m);
    scratch->open_labels.resize(m);
    scratch->open_sq.resize(m);
    scratch->open_gap.resize(gap != nullptr ? m : 0);
    for (Eigen::Index t = 0; t < m; ++t) scratch->open_x.col(t) = x.col(scratch->open[t]);
    ScanProducts(scratch->open_x, scratch, scratch->open_labels.data(), scratch->open_sq.data(),
                 gap != nullptr ? scratch->open_gap.data() : nullptr);
    for (Eigen::Index t = 0; t < m; ++t) {
      const Eigen::Index i = scratch->open[t];
      labels[i] = scratch->open_labels[t];
      sq_out[i] = scratch->open_sq[t];
      if (gap != nullptr) gap[i] = scratch->open_gap[t];
    }
    return;
  }
  // The register kernel's scores.
  Scalar* best = scratch->best.data();
  Scalar* second = scratch->second.data();
  Scalar* arg = scratch->arg.data();
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
    if (center_lanes_.size() > 0) {
      FinishLanes(x, i, std::min(kSize, rows - i), packet, score, best, second, arg, labels, sq_out,
                  gap, norms != nullptr ? norms + i : nullptr);
    }
  }
  if (center_lanes_.size() > 0) return;
  Finish(x, score, best, second, arg, labels, sq_out, gap, scratch);
}

template <typename Scalar>
void NearestCenterScan<Scalar>::ScanProducts(const Eigen::Ref<const Matrix<Scalar>>& x,
                                             Scratch* scratch, int* labels, Scalar* sq_out,
                                             double* gap) const {
  constexpr Eigen::Index L = kLanes<Scalar>;
  const Eigen::Index k = centers_.cols(), rows = x.cols();
  Matrix<Scalar>& score = scratch->score;
  Scalar* best = scratch->best.data();
  Scalar* second = scratch->second.data();
  Scalar* arg = scratch->arg.data();
  // A last partial group of lanes scans the offsets alone past the block;
  // the centers are taken a tile (score's columns) at a time.
  const Eigen::Index scanned = (rows + L - 1) / L * L;
  const Eigen::Index tile = score.cols(), ld = score.rows();
  for (Eigen::Index first = 0; first < k; first += tile) {
    const Eigen::Index width = std::min(tile, k - first);
    score.topLeftCorner(scanned, width).rowwise() = offset_.segment(first, width);
    score.topLeftCorner(rows, width).noalias() += x.transpose() * centers_.middleCols(first, width);
    for (Eigen::Index i = 0; i < scanned; i += L) {
      ScanLanes(score.data() + i, ld, width, best + i, second + i, arg + i, first, first > 0);
    }
  }
  Finish(x, score, best, second, arg, labels, sq_out, gap, scratch);
}

template <typename Scalar>
void NearestCenterScan<Scalar>::NarrowPoints(
    [[maybe_unused]] const Eigen::Ref<const Matrix<Scalar>>& x,
    [[maybe_unused]] Scratch* scratch) const {
#if KMT_NARROW_FILTER
  if constexpr (std::is_same_v<Scalar, float>) {
    const Eigen::Index d = x.rows(), rows = x.cols(), padded_d = narrow_d_;
    uint16_t* narrow = scratch->narrow.data();
    // Each point less the shift in bfloat16, and the bound E on its
    // scores' error against the exact shifted scores <x', c'> - |c'|^2 / 2,
    // x' = x - m and c' = c - m (whose gaps are the exact scores' gaps).
    // With x'f the float32 x' and x~, c~ the bfloat16 forms of x'f and c':
    // <x', c'> - <x~, c~> = <x~, c' - c~> + <x' - x~, c'>, within
    // |x~| |c' - c~| + |x' - x~| |c'|, and |x' - x~| <= |x'f - x~| +
    // 2^-24 |x'| (one float32 subtraction). The float32 sum of the products
    // (exact each), the offset and their addition round within
    // 2 gamma (|x~| |c~| + |c'|^2), gamma = (d + 2) 2^-24 / (1 - (d + 2) 2^-24);
    // tiles take subnormal inputs and results as zero, within
    // (d + 2) 2^-120 (1 + |x~|)(1 + |c~|). The sums of squares here are
    // float32 sums of at most d / 16 + 16 terms, within (d + 32) 2^-22 of
    // their value.
    const double sums_above = 1 + static_cast<double>(padded_d + 32) * std::ldexp(1.0, -22);
    const double unit = static_cast<double>(padded_d + 2) * std::ldexp(1.0, -24);
    const double gamma = unit / (1 - unit);
    const double cn = narrow_center_norm_, rn = narrow_rounded_norm_;
    double* error = scratch->narrow_bound.data();
    double* margin = error + rows;
    double* reach = margin + rows;
    for (Eigen::Index i = 0; i < rows; ++i) {
      float rounded_sq, residual_sq;
      NarrowPoint(x.col(i).data(), narrow_shift_.data(), d, padded_d, narrow + i * padded_d,
                  &rounded_sq, &residual_sq);
      const double xr = std::sqrt(rounded_sq * sums_above) * (1 + 1e-15);
      double xe = std::sqrt(residual_sq * sums_above) * (1 + 1e-15);
      xe += std::ldexp(xr + xe, -23);
      const double e =
          (xr * narrow_residual_norm_ + xe * cn + 2 * gamma * (xr * rn + cn * cn) +
           static_cast<double>(padded_d + 2) * std::ldexp(1.0, -120) * (1 + xr) * (1 + rn)) *
          (1 + 1e-12);
      // The float32 scan's slack S for this point (twice its scores' error
      // bound, from a bound on |x|^2), and the most its near-tie test can
      // take (Slack, with |x - c| <= |x'| + |c'|).
      const double norm_x = xr + xe + narrow_shift_norm_;
      const double slack =
          static_cast<double>(slack_per_norm_) * norm_x * norm_x * (1 + 1e-12) + slack_base_;
      const double far = (xr + xe + cn) * (xr + xe + cn) * (1 + 1e-12);
      const double most_slack = static_cast<double>(slack_per_sq_) * far + narrow_slack_of_;
      const bool finite = xr * rn < 1e37;
      error[i] = e;
      // A point is decided here where its best narrow score is ahead of
      // every other by more than 2 E + S: every other center's exact score
      // is then below the best's by more than S, so the float32 scan finds
      // no near tie there either and takes the same label.
      margin[i] = finite ? Above(2 * e + Above(slack)) : std::numeric_limits<double>::infinity();
      // Its candidates otherwise: every center within 2 E + 2 (S + the
      // most slack) of the best narrow score, which holds every center the
      // float32 scan could label it with or weigh in a near tie.
      reach[i] = finite ? Above(2 * e + 2 * Above(slack + most_slack))
                        : std::numeric_limits<double>::infinity();
    }
  }
#endif
}

template <typename Scalar>
void NearestCenterScan<Scalar>::FilterBlock(
    [[maybe_unused]] const Eigen::Ref<const Matrix<Scalar>>& x, [[maybe_unused]] Scratch* scratch,
    [[maybe_unused]] int* labels, [[maybe_unused]] Scalar* sq_out,
    [[maybe_unused]] double* gap) const {
#if KMT_NARROW_FILTER
  if constexpr (std::is_same_v<Scalar, float>) {
    const Eigen::Index d = x.rows(), rows = x.cols(), padded_d = narrow_d_;
    const Eigen::Index padded_rows = (rows + kNarrowGroup - 1) / kNarrowGroup * kNarrowGroup;
    const Eigen::Index chunks = padded_d / kNarrowChunk;
    const Eigen::Index tile = std::min(narrow_k_, kNarrowTileCenters);
    // With every center's scores in one tile, the points left in doubt take
    // their candidates from it at the end; with several, each point keeps
    // its candidates tile by tile. At most this many, else every center (the
    // candidates' scores come one dot product at a time, a share of the
    // centers' is cheaper through the products).
    const bool one_tile = tile == narrow_k_;
    const int most = static_cast<int>(std::clamp<Eigen::Index>(narrow_k_ / 8, 8, 64));
    scratch->narrow.resize(padded_rows * padded_d);
    scratch->narrow_score.resize(std::max(kNarrowScoreFloats, kNarrowGroup * tile));
    scratch->narrow_best.assign(padded_rows, -std::numeric_limits<float>::infinity());
    scratch->narrow_second.assign(padded_rows, -std::numeric_limits<float>::infinity());
    scratch->narrow_arg.assign(padded_rows, 0);
    scratch->narrow_bound.resize(3 * rows);
    uint16_t* narrow = scratch->narrow.data();
    NarrowPoints(x, scratch);
    const double* error = scratch->narrow_bound.data();
    const double* margin = error + rows;
    const double* reach = margin + rows;
    std::fill(narrow + rows * padded_d, narrow + padded_rows * padded_d, uint16_t{0});
    const bool tiles = narrow_filter_ == LowPrecisionFilter::kAmxBf16;
    if (tiles) ConfigureTiles();
    float* score = scratch->narrow_score.data();
    // Up to `stack` groups of points at once, each group of centers taken
    // for all of them while it is in the first-level cache: the scores of a
    // stack stay within kNarrowScoreFloats.
    const Eigen::Index stack =
        std::max<Eigen::Index>(1, kNarrowScoreFloats / (kNarrowGroup * tile));
    // The decided points' distances to their centers, four at once.
    const float* xs[4];
    const float* cs[4];
    Eigen::Index at[4];
    int pending = 0;
    auto settle = [&] {
      float sq[4];
      AssignedSquaredDistances(xs, cs, pending, d, sq);
      for (int q = 0; q < pending; ++q) sq_out[at[q]] = sq[q];
      pending = 0;
    };
    scratch->kept_index.resize(stack * kNarrowGroup * most);
    scratch->kept_score.resize(stack * kNarrowGroup * most);
    for (Eigen::Index p = 0; p < padded_rows; p += stack * kNarrowGroup) {
      const Eigen::Index stacked = std::min(stack * kNarrowGroup, padded_rows - p);
      const Eigen::Index count = std::min(stacked, rows - p);
      scratch->kept_count.assign(count, 0);
      for (Eigen::Index first = 0; first < narrow_k_; first += tile) {
        const Eigen::Index span = std::min(tile, narrow_k_ - first);
        for (Eigen::Index g = 0; g < span; g += kNarrowGroup) {
          const uint16_t* group =
              narrow_centers_.data() + ((first + g) / kNarrowGroup) * chunks * 1024;
          for (Eigen::Index q = 0; q < stacked; q += kNarrowGroup) {
            (tiles ? NarrowProduct : NarrowDotProduct)(narrow + (p + q) * padded_d, padded_d, group,
                                                       chunks, score + q * tile + g, tile);
          }
        }
        for (Eigen::Index r = 0; r < count; ++r) {
          const Eigen::Index i = p + r;
          NarrowScanRow(score + r * tile, narrow_offset_.data() + first, first, span,
                        &scratch->narrow_best[i], &scratch->narrow_second[i],
                        &scratch->narrow_arg[i]);
          // With several tiles, each point's candidates so far, against
          // its best so far (a higher bar at the end keeps fewer).
          int* n = &scratch->kept_count[r];
          if (one_tile || *n < 0) continue;
          const double bar = Below(scratch->narrow_best[i] - reach[i]);
          if (!std::isfinite(bar) ||
              !NarrowKeep(score + r * tile, narrow_offset_.data() + first, first, span,
                          std::nextafter(static_cast<float>(bar), -INFINITY), most,
                          &scratch->kept_index[r * most], &scratch->kept_score[r * most], n)) {
            *n = -1;
          }
        }
      }
      for (Eigen::Index r = 0; r < count; ++r) {
        const Eigen::Index i = p + r;
        const double best = scratch->narrow_best[i], second = scratch->narrow_second[i];
        const double spread = Below(best - second);
        const float* xi = x.col(i).data();
        if (spread > margin[i] && std::isfinite(best)) {
          const int label = scratch->narrow_arg[i];
          labels[i] = label;
          if (gap != nullptr) gap[i] = 2 * std::max(0.0, Below(spread - Above(2 * error[i])));
          // Its distance with three other points' (settle).
          xs[pending] = xi;
          cs[pending] = centers_.col(label).data();
          at[pending] = i;
          if (++pending == 4) settle();
          continue;
        }
        ++scratch->reopened;
        // The threshold in float32, rounded down.
        const double bar = Below(best - reach[i]);
        const float bar_down = std::nextafter(static_cast<float>(bar), -INFINITY);
        int* index = &scratch->kept_index[r * most];
        float* kept = &scratch->kept_score[r * most];
        int n = scratch->kept_count[r];
        if (one_tile && n == 0 && std::isfinite(best) && std::isfinite(bar) &&
            !NarrowKeep(score + r * tile, narrow_offset_.data(), 0, narrow_k_, bar_down, most,
                        index, kept, &n)) {
          n = -1;
        }
        // Against the final bar (several tiles' lists were kept against the
        // best so far).
        int listed = 0;
        for (int t = 0; t < n; ++t) {
          if (kept[t] < bar_down) continue;
          index[listed] = index[t];
          kept[listed++] = kept[t];
        }
        if (std::isfinite(best) && std::isfinite(bar) && listed > 0) {
          // A near tie among them is decided with the block's others, its
          // gap 0.
          if (FinishCandidates(xi, i, index, listed, scratch, labels + i, sq_out + i,
                               gap != nullptr ? gap + i : nullptr)) {
            continue;
          }
          if (gap != nullptr) {
            // A center left out has an exact shifted score below bar + E,
            // the label's is above its narrow score less E.
            const double own = kept[std::find(index, index + listed, labels[i]) - index];
            gap[i] =
                std::min(gap[i], 2 * std::max(0.0, Below(Below(own - bar) - Above(2 * error[i]))));
          }
          continue;
        }
        ++scratch->full;
        scratch->open.push_back(i);
      }
    }
    if (tiles) ReleaseTiles();
    if (pending > 0) settle();
    DecideTies(x, scratch, labels, sq_out, gap);
    scratch->filtered += rows;
  }
#endif
}

template <typename Scalar>
bool NearestCenterScan<Scalar>::FinishCandidates(const Scalar* xi, Eigen::Index i,
                                                 const int* candidates, Eigen::Index count,
                                                 Scratch* scratch, int* label_out, Scalar* sq_out,
                                                 double* gap) const {
  const Eigen::Index d = centers_.rows();
  const Eigen::Map<const Vector<Scalar>> x(xi, d);
  std::vector<Scalar>& score = scratch->candidate_score;
  score.resize(count);
  Scalar best = -std::numeric_limits<Scalar>::infinity(), second = best;
  int label = candidates[0];
  for (Eigen::Index t = 0; t < count; ++t) {
    const int j = candidates[t];
    const Scalar s = offset_[j] + x.dot(centers_.col(j));
    score[t] = s;
    if (s > best) {
      second = best;
      best = s;
      label = j;
    } else if (s > second) {
      second = s;
    }
  }
  // FinishPoint's rule, on the candidates' scores.
  const Scalar sq = AssignedSquaredDistance(xi, centers_.col(label).data(), d);
  const Scalar slack = Slack(label, sq);
  if (best - second <= slack) {
    ListTie(
        i, label, count, [&](Eigen::Index t) { return candidates[t]; },
        [&](Eigen::Index t) { return score[t]; }, best - slack, scratch);
    return true;
  }
  *label_out = label;
  *sq_out = sq;
  if (gap != nullptr) *gap = GapOf(best, second, slack);
  return false;
}

namespace {

// A block's points grouped by label, for AddBlockToSums: the points of
// cluster j are order[start[j]], ..., order[start[j + 1] - 1], in index
// order.
struct LabelGroups {
  std::vector<int> order, start;

  void Group(const int* labels, int rows, int k) {
    start.assign(k + 1, 0);
    order.resize(rows);
    for (int i = 0; i < rows; ++i) ++start[labels[i] + 1];
    for (int j = 0; j < k; ++j) start[j + 1] += start[j];
    next_.assign(start.begin(), start.end() - 1);
    for (int i = 0; i < rows; ++i) order[next_[labels[i]]++] = i;
  }

 private:
  std::vector<int> next_;  // each cluster's next place in `order`
};

// A packet of doubles loaded from Scalars (floats widened, exactly), where
// the level loads and widens in one or two instructions; kAvailable is
// false elsewhere (below AVX2).
template <typename Scalar>
struct Widened {
  static constexpr bool kAvailable = false;
};
#if defined(__AVX512F__)
template <>
struct Widened<float> {
  static constexpr bool kAvailable = true;
  using P = __m512d;
  static P Load(const float* x) { return _mm512_cvtps_pd(_mm256_loadu_ps(x)); }
};
template <>
struct Widened<double> {
  static constexpr bool kAvailable = true;
  using P = __m512d;
  static P Load(const double* x) { return _mm512_loadu_pd(x); }
};
#elif defined(__AVX2__)
template <>
struct Widened<float> {
  static constexpr bool kAvailable = true;
  using P = __m256d;
  static P Load(const float* x) { return _mm256_cvtps_pd(_mm_loadu_ps(x)); }
};
template <>
struct Widened<double> {
  static constexpr bool kAvailable = true;
  using P = __m256d;
  static P Load(const double* x) { return _mm256_loadu_pd(x); }
};
#endif

// Adds the `rows` points of a block (columns of x) of labels `labels` and
// weights w (null: 1) to a part's sums with AddToSums's additions in
// AddToSums's order for each cluster (its points in index order), so to
// the same bits, but a cluster at a time: each cluster's running sums of
// kChunk coordinates stay in vector registers over its points, where one
// point at a time would load and store them for every point. Taken where
// the level widens in registers (Widened) and the block has at least a few
// points per cluster, which pays for grouping them.
template <typename Scalar>
void AddBlockToSums(const Eigen::Ref<const Matrix<Scalar>>& x, const int* labels, const Scalar* w,
                    LabelGroups* groups, ClusterSums* part) {
  if constexpr (Widened<Scalar>::kAvailable) {
    namespace simd = Eigen::internal;
    using P = typename Widened<Scalar>::P;
    constexpr int kSize = sizeof(P) / sizeof(double), kChunk = 32, kVectors = kChunk / kSize;
    const Eigen::Index d = x.rows();
    const int rows = static_cast<int>(x.cols()), k = static_cast<int>(part->counts.size());
    groups->Group(labels, rows, k);
    for (int j = 0; j < k; ++j) {
      const int* member = groups->order.data() + groups->start[j];
      const int m = groups->start[j + 1] - groups->start[j];
      if (m == 0) continue;
      part->counts[j] += m;
      double* sum = part->sums.col(j).data();
      Eigen::Index c = 0;
      for (; c + kChunk <= d; c += kChunk) {
        P acc[kVectors];
        for (int v = 0; v < kVectors; ++v) acc[v] = simd::ploadu<P>(sum + c + v * kSize);
        if (w == nullptr) {
          for (int t = 0; t < m; ++t) {
            const Scalar* values = x.col(member[t]).data() + c;
            for (int v = 0; v < kVectors; ++v) {
              acc[v] = simd::padd(acc[v], Widened<Scalar>::Load(values + v * kSize));
            }
          }
        } else {
          for (int t = 0; t < m; ++t) {
            const Scalar* values = x.col(member[t]).data() + c;
            const P weight = simd::pset1<P>(static_cast<double>(w[member[t]]));
            for (int v = 0; v < kVectors; ++v) {
              acc[v] =
                  simd::padd(acc[v], simd::pmul(weight, Widened<Scalar>::Load(values + v * kSize)));
            }
          }
        }
        for (int v = 0; v < kVectors; ++v) simd::pstoreu(sum + c + v * kSize, acc[v]);
      }
      for (int t = 0; c < d && t < m; ++t) {
        const Scalar* values = x.col(member[t]).data();
        // A weight of 1 multiplies exactly: the unweighted additions' bits.
        const double weight = w != nullptr ? static_cast<double>(w[member[t]]) : 1;
        for (Eigen::Index l = c; l < d; ++l) sum[l] += weight * static_cast<double>(values[l]);
      }
      if (w == nullptr) {
        part->weights[j] += m;  // m additions of 1, exact
      } else {
        for (int t = 0; t < m; ++t) part->weights[j] += w[member[t]];
      }
    }
  }
}

}  // namespace

template <typename Scalar>
double AssignNearest(const Matrix<Scalar>& points, const Matrix<Scalar>& centers, Labels* labels,
                     NonDeduced<Vector<Scalar>>* sq_dist, ClusterSums* sums,
                     const NonDeduced<Vector<Scalar>>* weights, const PointLanes<Scalar>* lanes,
                     bool objective) {
  const Eigen::Index d = points.rows(), n = points.cols(), k = centers.cols();
  if (sq_dist != nullptr) sq_dist->resize(n);
  if (n == 0 || k == 0) {
    labels->assign(n, 0);
    return objective ? 0 : std::numeric_limits<double>::quiet_NaN();
  }
  labels->resize(n);  // every label is written below

  const NearestCenterScan<Scalar> scan(centers);
  const Eigen::Index block = scan.block(), span = scan.span();
  // Blocks start at whole packets, so their lanes are a pointer away.
  const bool use_lanes = lanes != nullptr && lanes->fits(points) &&
                         lanes->packet() == kPacketSize<Scalar> && scan.register_kernel();
  // Without the objective or the distances, the scan need not compute the
  // distances where the lanes bound the points' norms.
  const bool distances = objective || sq_dist != nullptr || !use_lanes;
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
    Vector<Scalar> scanned(span);
    LabelGroups groups;
#pragma omp for schedule(dynamic)
    for (Eigen::Index p = 0; p < parts; ++p) {
      double part_total = 0;
      ClusterSums* part = sums != nullptr ? &part_sums[p] : nullptr;
      const Eigen::Index end = std::min(n, (p + 1) * part_size);
      for (Eigen::Index start = p * part_size; start < end; start += span) {
        const Eigen::Index scan_rows = std::min(span, end - start);
        scan.Scan(points.middleCols(start, scan_rows), &scratch, out + start,
                  distances ? scanned.data() : nullptr, nullptr,
                  use_lanes ? lanes->from(start) : nullptr,
                  distances ? nullptr : lanes->norms_from(start));
        if (sq_dist != nullptr) sq_dist->segment(start, scan_rows) = scanned.head(scan_rows);
        // The objective and sums a block at a time, in order.
        for (Eigen::Index first = start; first < start + scan_rows; first += block) {
          const Eigen::Index rows = std::min(block, start + scan_rows - first);
          const Scalar* sq = scanned.data() + (first - start);
          const Scalar* w = weights != nullptr ? weights->data() + first : nullptr;
          // The running objective in a register (not behind a pointer that
          // escapes the loop).
          double block_objective = part_total;
          if (part != nullptr && Widened<Scalar>::kAvailable && rows >= 4 * k) {
            // AddAssigned's additions, the objective's and the sums' apart:
            // grouping the block by label pays from a few points per cluster.
            for (Eigen::Index i = 0; objective && i < rows; ++i) {
              block_objective =
                  WithObjective(block_objective, sq[i], w != nullptr ? w + i : nullptr);
            }
            AddBlockToSums<Scalar>(points.middleCols(first, rows), out + first, w, &groups, part);
          } else if (!objective) {
            for (Eigen::Index i = 0; part != nullptr && i < rows; ++i) {
              AddToSums(points.col(first + i), out[first + i], w != nullptr ? w + i : nullptr,
                        part);
            }
          } else {
            for (Eigen::Index i = 0; i < rows; ++i) {
              AddAssigned(points.col(first + i), out[first + i], sq[i],
                          w != nullptr ? w + i : nullptr, &block_objective, part);
            }
          }
          part_total = block_objective;
        }
      }
      part_objective[p] = part_total;
    }
  }
  double total = 0;
  for (Eigen::Index p = 0; p < parts; ++p) {
    total += part_objective[p];
    if (sums != nullptr) sums->Add(part_sums[p]);
  }
  return objective ? total : std::numeric_limits<double>::quiet_NaN();
}

#define KMT_INSTANTIATE(S)                                                                      \
  template double AssignNearest<S>(const Matrix<S>&, const Matrix<S>&, Labels*, Vector<S>*,     \
                                   ClusterSums*, const Vector<S>*, const PointLanes<S>*, bool); \
  template void PointLanes<S>::Build(const Matrix<S>&, Eigen::Index);                           \
  template void NearestCenterScan<S>::Init();                                                   \
  template void NearestCenterScan<S>::Scan(const Eigen::Ref<const Matrix<S>>&,                  \
                                           typename NearestCenterScan<S>::Scratch*, int*, S*,   \
                                           double*, const S*, const S*) const;
KMT_INSTANTIATE(float)
KMT_INSTANTIATE(double)
#undef KMT_INSTANTIATE

}  // namespace kmt
