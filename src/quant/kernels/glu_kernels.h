// Gated linear unit kernels, and the logit soft-cap that shares their tanh (Highway, dispatched at run time like the
// matmul kernels); model/glu.h (the GLUs, with their sources) and model/decoder.cpp (the soft-cap) call these.
//   swiglu:      h = silu(gate) * up,  silu(x) = x / (1 + e^-x)
//   swiglu_oai:  g = min(gate, limit); u = clamp(up, -limit, limit); h = g * sigmoid(alpha * g) * (u + 1)
//   geglu:       h = gelu(gate) * up,  gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) x (1 + 0.044715 x^2)))
//   soft_cap:    v = cap * tanh(v / cap)
//
// Vectorised because at decode the whole layer waits for them on the calling thread (they run between the
// experts' gate/up and down products, 8 x 768 elements per layer for Qwen3-30B-A3B): with std::exp they took
// 19% of the decode profile on a 2.1 GHz Xeon (perf, cpu-clock, 64 tokens at -t 2) while the other thread idled.
//
// e^x is hwy/contrib/math's Exp (max error 1 ULP against std::exp), so h is within a few ULP of the formula
// evaluated with std::exp (tests/model/glu_test.cpp). tanh is its Tanh (max error 4 ULP against std::tanh), which
// GEGLU's 1 + tanh turns into an absolute error near 1 + tanh = 0 (large negative gates): there h is within a few ULP
// of x up / 2, not of h. With std::tanh, libm's tanhf and expm1f took 3.1% of the samples of a gemma-4-26b-a4b
// Q4_K_M profile (its load included; ~230k GEGLU elements and 262k logits a token); vectorised, decode went 10.55 ->
// 11.39 tok/s (2-vCPU AMD EPYC, Zen 4, -t 2, 6 alternating pairs, medians, faster in 5; runs vary by +-5%, so the
// gain is not known closer than that). The last n % lanes elements go through a zero-padded vector, so an element's
// result does not depend on n or on its position.
#pragma once

#include <cstdint>

namespace moetier::quant::kernels {

// GELU's constants, sqrt(2/pi) and 0.044715, as ggml's ggml_gelu_f32 writes them.
inline constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
inline constexpr float kGeluCoefA = 0.044715f;

// h[i] for i < n from gate[i] and up[i], all float32 arrays of n elements; h may alias gate or up.
void swiglu(const float* gate, const float* up, float* h, int64_t n);
void swiglu_oai(const float* gate, const float* up, float* h, int64_t n, float alpha, float limit);
void geglu(const float* gate, const float* up, float* h, int64_t n);

// v[i] = cap * tanh(v[i] * (1 / cap)) for i < n, in place (the reference engine's order: the reciprocal's
// product, tanh, the product); cap > 0.
void soft_cap(float* v, int64_t n, float cap);

}  // namespace moetier::quant::kernels
