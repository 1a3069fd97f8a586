// RMSNorm (Zhang & Sennrich 2019, "Root Mean Square Layer Normalization"):
//   y = x / sqrt(mean(x^2) + eps) * w
// The mean of squares is accumulated in double (eight partial sums), as ggml does in one, so long rows lose
// nothing to summation order.
#pragma once

#include <cstdint>

namespace moetier::model {

// y[n_rows, n] = rmsnorm(x[n_rows, n]) * w[n]; y may alias x.
void rms_norm(const float* x, const float* w, float* y, int64_t n_rows, int64_t n, float eps);

}  // namespace moetier::model
