// Gated linear unit activations of the feed-forward blocks.
//   SwiGLU (Shazeer 2020, "GLU Variants Improve Transformer"):  h = silu(gate) * up,  silu(x) = x / (1 + e^-x)
//   gpt-oss clamped SwiGLU (gpt-oss model card / reference implementation, ggml's swiglu_oai):
//     g = min(gate, limit); u = clamp(up, -limit, limit); h = g * sigmoid(alpha * g) * (u + 1)
//   with alpha = 1.702 and limit = 7.0 for gpt-oss.
#pragma once

#include <cstdint>

namespace moetier::model {

struct GluConfig {
  enum class Kind { swiglu, swiglu_oai } kind = Kind::swiglu;
  float alpha = 1.702f;  // swiglu_oai only
  float limit = 7.0f;    // swiglu_oai only
};

// h[n] = glu(gate[n], up[n]); h may alias gate or up. Vectorised (quant/kernels/glu_kernels.h: Highway, dispatched
// at run time): e^x is hwy/contrib/math's Exp (max error 1 ULP against std::exp), so h is within a few ULP of the
// formula evaluated with std::exp (tests/model/glu_test.cpp), and an element's result does not depend on n or on
// its position.
void glu(const GluConfig& cfg, const float* gate, const float* up, float* h, int64_t n);

}  // namespace moetier::model
