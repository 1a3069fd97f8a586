// Gated linear unit activations of the feed-forward blocks.
//   SwiGLU (Shazeer 2020, "GLU Variants Improve Transformer"):  h = silu(gate) * up,  silu(x) = x / (1 + e^-x)
//   gpt-oss clamped SwiGLU (gpt-oss model card / reference implementation, ggml's swiglu_oai):
//     g = min(gate, limit); u = clamp(up, -limit, limit); h = g * sigmoid(alpha * g) * (u + 1)
//   with alpha = 1.702 and limit = 7.0 for gpt-oss.
//   GEGLU (Shazeer 2020; Gemma's FFNs, ggml's geglu): h = gelu(gate) * up with the tanh form of GELU (Hendrycks &
//     Gimpel 2016): gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) x (1 + 0.044715 x^2))).
#pragma once

#include <cstdint>

namespace moetier::model {

struct GluConfig {
  enum class Kind { swiglu, swiglu_oai, geglu } kind = Kind::swiglu;
  float alpha = 1.702f;  // swiglu_oai only
  float limit = 7.0f;    // swiglu_oai only
};

// h[n] = glu(gate[n], up[n]); h may alias gate or up. Vectorised (quant/kernels/glu_kernels.h: Highway, dispatched
// at run time): e^x and tanh are hwy/contrib/math's Exp and Tanh (max error 1 and 4 ULP against std::exp and
// std::tanh), so h is within a few ULP of the formula evaluated with them (GEGLU: of x up / 2 where 1 + tanh
// cancels; tests/model/glu_test.cpp), and an element's result does not depend on n or on its position.
void glu(const GluConfig& cfg, const float* gate, const float* up, float* h, int64_t n);

}  // namespace moetier::model
