// A seeded generator whose draws are the same on every platform (the standard
// library's distributions are not), so a seed always names the same result.
#ifndef KMT_CORE_RANDOM_H_
#define KMT_CORE_RANDOM_H_

#include <cmath>
#include <cstdint>
#include <random>

namespace kmt {

class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}

  // Uniform on [0, 1) with 53 random bits.
  double Uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }

  // Uniform integer in [0, n), n > 0, without modulo bias.
  uint64_t Below(uint64_t n) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t r;
    do {
      r = engine_();
    } while (r >= limit);
    return r % n;
  }

  // Standard normal by Box-Muller; one draw per call.
  double Normal() {
    double u1;
    do {
      u1 = Uniform();
    } while (u1 <= 0.0);
    const double u2 = Uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  }

 private:
  std::mt19937_64 engine_;
};

}  // namespace kmt

#endif  // KMT_CORE_RANDOM_H_
