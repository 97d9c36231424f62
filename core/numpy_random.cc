#include "core/numpy_random.h"

#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"

namespace kmt {

NumpyRandomState::NumpyRandomState(uint32_t seed) {
  key_[0] = seed;
  for (int i = 1; i < kWords; ++i) {
    key_[i] = 1812433253u * (key_[i - 1] ^ (key_[i - 1] >> 30)) + static_cast<uint32_t>(i);
  }
  pos_ = kWords;
}

absl::StatusOr<NumpyRandomState> NumpyRandomState::FromState(const std::vector<uint32_t>& key,
                                                             int pos) {
  if (key.size() != static_cast<size_t>(kWords) || pos < 0 || pos > kWords) {
    return absl::InvalidArgumentError(
        absl::StrCat("an MT19937 state of ", key.size(), " words at position ", pos, ": expected ",
                     kWords, " words and a position in [0, ", kWords, "]"));
  }
  NumpyRandomState state;
  std::copy(key.begin(), key.end(), state.key_.begin());
  state.pos_ = pos;
  return state;
}

void NumpyRandomState::Twist() {
  constexpr int kShift = 397;
  constexpr uint32_t kMatrix = 0x9908b0dfu, kUpper = 0x80000000u, kLower = 0x7fffffffu;
  // key_[i] from key_[i + 1] and key_[i + kShift], indices mod kWords, in
  // increasing i: in three runs without the modulus, which the compiler
  // vectorises (the third's last word reads key_[0], already new).
  const auto next = [&](int i, int at_1, int at_shift) {
    const uint32_t y = (key_[i] & kUpper) | (key_[at_1] & kLower);
    key_[i] = key_[at_shift] ^ (y >> 1) ^ ((y & 1u) ? kMatrix : 0u);
  };
  int i = 0;
  for (; i < kWords - kShift; ++i) next(i, i + 1, i + kShift);
  for (; i < kWords - 1; ++i) next(i, i + 1, i + kShift - kWords);
  next(kWords - 1, 0, kShift - 1);
  pos_ = 0;
}

uint32_t NumpyRandomState::NextUint32() {
  if (pos_ == kWords) Twist();
  return Temper(key_[pos_++]);
}

uint64_t NumpyRandomState::NextUint64() {
  const uint64_t high = NextUint32();
  return (high << 32) | NextUint32();
}

uint64_t NumpyRandomState::Interval(uint64_t max) {
  if (max == 0) return 0;
  uint64_t mask = max;
  for (int shift = 1; shift <= 32; shift *= 2) mask |= mask >> shift;
  uint64_t value;
  if (max <= 0xffffffffu) {
    while ((value = NextUint32() & mask) > max) {
    }
  } else {
    while ((value = NextUint64() & mask) > max) {
    }
  }
  return value;
}

std::vector<int64_t> NumpyRandomState::RandInt(int64_t low, int64_t high, int64_t count) {
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low) - 1;
  std::vector<int64_t> out(static_cast<size_t>(count));
  if (range == 0 || range > 0xffffffffu) {  // no draw for one value (Interval(0))
    for (int64_t& value : out) value = low + static_cast<int64_t>(Interval(range));
    return out;
  }
  // Interval's draws, its mask computed once and the words tempered here.
  uint32_t mask = static_cast<uint32_t>(range);
  for (int shift = 1; shift <= 16; shift *= 2) mask |= mask >> shift;
  for (int64_t& value : out) {
    uint32_t drawn;
    do {
      if (pos_ == kWords) Twist();
      drawn = Temper(key_[pos_++]) & mask;
    } while (drawn > range);
    value = low + static_cast<int64_t>(drawn);
  }
  return out;
}

std::vector<int64_t> NumpyRandomState::ChoiceWithoutReplacement(int64_t population, int64_t size) {
  std::vector<int64_t> order(static_cast<size_t>(population));
  std::iota(order.begin(), order.end(), int64_t{0});
  for (int64_t i = population - 1; i >= 1; --i) {
    std::swap(order[i], order[Interval(static_cast<uint64_t>(i))]);
  }
  order.resize(static_cast<size_t>(size));
  return order;
}

}  // namespace kmt
