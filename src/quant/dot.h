// A float dot product with a fixed association: eight independent partial sums (lanes the compiler vectorises),
// folded pairwise. The same inputs give the same bits on every call, whatever the caller, which the products that
// must be reproducible (the reference float path, the recurrent state's updates) depend on.
#pragma once

#include <cstdint>

namespace moetier::quant {

// sum_i a[i] * b[i], i < n.
inline float dot8(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) acc[k] += a[i + k] * b[i + k];
  }
  for (; i < n; ++i) acc[0] += a[i] * b[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

}  // namespace moetier::quant
