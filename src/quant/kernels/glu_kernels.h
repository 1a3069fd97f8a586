// Gated linear unit kernels (Highway, dispatched at run time like the matmul kernels); the formulas and their
// constants are model/glu.h's, which calls these.
//   swiglu:      h = silu(gate) * up,  silu(x) = x / (1 + e^-x)
//   swiglu_oai:  g = min(gate, limit); u = clamp(up, -limit, limit); h = g * sigmoid(alpha * g) * (u + 1)
//
// Vectorised because at decode the whole layer waits for them on the calling thread (they run between the
// experts' gate/up and down products, 8 x 768 elements per layer for Qwen3-30B-A3B): with std::exp they took
// 19% of the decode profile on a 2.1 GHz Xeon (perf, cpu-clock, 64 tokens at -t 2) while the other thread idled.
//
// e^x is hwy/contrib/math's Exp (max error 1 ULP against std::exp), so h is within a few ULP of the formula
// evaluated with std::exp (tests/model/glu_test.cpp). The last n % lanes elements go through a zero-padded
// vector, so an element's result does not depend on n or on its position.
#pragma once

#include <cstdint>

namespace moetier::quant::kernels {

// h[i] for i < n from gate[i] and up[i], all float32 arrays of n elements; h may alias gate or up.
void swiglu(const float* gate, const float* up, float* h, int64_t n);
void swiglu_oai(const float* gate, const float* up, float* h, int64_t n, float alpha, float limit);

}  // namespace moetier::quant::kernels
