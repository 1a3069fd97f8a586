// xoshiro256** (Blackman & Vigna, "Scrambled linear pseudorandom number generators", 2021): fast enough to
// fill gigabytes of synthetic weights at memory speed, seeded reproducibly through splitmix64.
#pragma once

#include <bit>
#include <cstdint>

namespace moetier::synth {

class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (auto& w : s_) {  // splitmix64 expands one seed into four non-zero words
      seed += 0x9e3779b97f4a7c15ULL;
      uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
      w = z ^ (z >> 31);
    }
  }
  uint64_t next() {
    const uint64_t result = std::rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = std::rotl(s_[3], 45);
    return result;
  }
  // Uniform in [-1, 1), 24 bits of resolution.
  float uniform_pm1() { return static_cast<float>(next() >> 40) * (2.0f / 16777216.0f) - 1.0f; }

 private:
  uint64_t s_[4];
};

}  // namespace moetier::synth
