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

// A counter-based draw: the same (seed, layer, cluster, index) gives the same
// value wherever and in whatever order it is computed, so a sampled result
// does not depend on the thread count. Uniform on (0, 1), never 0 or 1.
inline double CounterUniform(uint64_t seed, uint64_t layer, uint64_t cluster, uint64_t index) {
  // splitmix64's finalizer over the counters, each folded in turn.
  const auto mix = [](uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  uint64_t h = mix(seed + 0x9e3779b97f4a7c15ull);
  h = mix(h ^ (layer + 0x9e3779b97f4a7c15ull));
  h = mix(h ^ (cluster + 0x7f4a7c159e3779b9ull));
  h = mix(h ^ (index + 0x3c6ef372fe94f82bull));
  return (static_cast<double>(h >> 11) + 0.5) * 0x1.0p-53;
}

// Standard Gumbel noise, -log(-log(U)), from the same counters: the argmax of
// score + noise over a set of keys is a key drawn with probability
// proportional to exp(score) (the Gumbel-max trick).
inline double CounterGumbel(uint64_t seed, uint64_t layer, uint64_t cluster, uint64_t index) {
  return -std::log(-std::log(CounterUniform(seed, layer, cluster, index)));
}

}  // namespace kmt

#endif  // KMT_CORE_RANDOM_H_
