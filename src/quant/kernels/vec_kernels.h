// Vector kernels of attention over the KV cache (Highway, dispatched at run time like the matmul kernels): the
// dot product of a query head with a cached key row, and the weighted accumulation of a cached value row, for
// F16 rows (the default cache, converted with F16C/NEON where the CPU has it) and F32 rows. The sums run in
// float32 lanes, so results differ from a sequential sum only by association (each product and conversion is
// exact or correctly rounded).
#pragma once

#include <cstdint>

namespace moetier::quant::kernels {

// sum_i q[i] * k[i]; q: [n] float, k: [n] binary16 (as uint16_t bits) or float.
float dot_f16(const float* q, const uint16_t* k, int64_t n);
float dot_f32(const float* q, const float* k, int64_t n);

// acc[i] += a * v[i] for i < n; v: [n] binary16 (as uint16_t bits) or float.
void axpy_f16(float a, const uint16_t* v, float* acc, int64_t n);
void axpy_f32(float a, const float* v, float* acc, int64_t n);

}  // namespace moetier::quant::kernels
