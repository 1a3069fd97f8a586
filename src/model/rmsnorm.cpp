#include "model/rmsnorm.h"

#include <cmath>

namespace moetier::model {

void rms_norm(const float* x, const float* w, float* y, int64_t n_rows, int64_t n, float eps) {
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    // Eight partial sums in double, which the compiler keeps in vector lanes (a single sum is one long chain of
    // dependent additions: the norms took ~1% of the decode thread's time).
    double part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      for (int k = 0; k < 8; ++k) part[k] += static_cast<double>(xr[i + k]) * xr[i + k];
    }
    for (; i < n; ++i) part[0] += static_cast<double>(xr[i]) * xr[i];
    const double sum = ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
    const float mean = static_cast<float>(sum / static_cast<double>(n));
    const float scale = 1.0f / std::sqrt(mean + eps);
    for (int64_t j = 0; j < n; ++j) yr[j] = xr[j] * scale * w[j];
  }
}

}  // namespace moetier::model
