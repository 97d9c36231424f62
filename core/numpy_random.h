// numpy's legacy RandomState (MT19937, numpy/random/mtrand.pyx) for the
// draws scikit-learn's MiniBatchKMeans makes: its mini-batches
// (randint(0, n, batch_size)) and its reassignments' new centers
// (choice(batch_size, replace=False, size=m)). A driver given the state
// RandomState.get_state() reports continues the same stream, so a fit
// draws the batches scikit-learn draws for the same random_state.
#ifndef KMT_CORE_NUMPY_RANDOM_H_
#define KMT_CORE_NUMPY_RANDOM_H_

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace kmt {

class NumpyRandomState {
 public:
  static constexpr int kWords = 624;  ///< MT19937's state, get_state()[1]

  // RandomState(seed): MT19937's init_genrand, as std::mt19937(seed).
  explicit NumpyRandomState(uint32_t seed);
  NumpyRandomState() : NumpyRandomState(5489) {}  ///< std::mt19937's default seed
  // The state get_state() gives: its 624 words and its position (0 to
  // 624; 624: the next draw twists first).
  static absl::StatusOr<NumpyRandomState> FromState(const std::vector<uint32_t>& key, int pos);

  const std::array<uint32_t, kWords>& key() const { return key_; }
  int pos() const { return pos_; }

  // MT19937's next tempered word (numpy's next_uint32), and two of them as
  // numpy's next_uint64 joins them (the first the high half).
  uint32_t NextUint32();
  uint64_t NextUint64();

  // A value in [0, max] by numpy's masked rejection: draws masked to the
  // smallest all-ones mask >= max until one is <= max; 32-bit draws where
  // max < 2^32, 64-bit ones above (random_interval, and each value of
  // random_bounded_uint64_fill with use_masked).
  uint64_t Interval(uint64_t max);

  // randint(low, high, count) of the default int64 dtype: count values of
  // [low, high), low < high; none drawn where high - low is 1.
  std::vector<int64_t> RandInt(int64_t low, int64_t high, int64_t count);

  // choice(population, replace=False, size=size): the first `size` of
  // permutation(population), whose shuffle swaps element i with element
  // Interval(i) for i from population - 1 down to 1.
  std::vector<int64_t> ChoiceWithoutReplacement(int64_t population, int64_t size);

 private:
  void Twist();
  // MT19937's output of a state word.
  static uint32_t Temper(uint32_t y) {
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    return y ^ (y >> 18);
  }

  std::array<uint32_t, kWords> key_;
  int pos_ = kWords;
};

}  // namespace kmt

#endif  // KMT_CORE_NUMPY_RANDOM_H_
