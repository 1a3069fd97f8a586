#include "model/glu.h"

#include <cmath>

#include "quant/kernels/glu_kernels.h"

namespace moetier::model {

namespace {

// GEGLU with the tanh form of GELU; sqrt(2/pi) and 0.044715 as ggml's ggml_gelu_f32 writes them.
void geglu(const float* gate, const float* up, float* h, int64_t n) {
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  constexpr float kCoefA = 0.044715f;
  for (int64_t i = 0; i < n; ++i) {
    const float x = gate[i];
    h[i] = 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCoefA * x * x))) * up[i];
  }
}

}  // namespace

void glu(const GluConfig& cfg, const float* gate, const float* up, float* h, int64_t n) {
  switch (cfg.kind) {
    case GluConfig::Kind::swiglu:
      quant::kernels::swiglu(gate, up, h, n);
      break;
    case GluConfig::Kind::swiglu_oai:
      quant::kernels::swiglu_oai(gate, up, h, n, cfg.alpha, cfg.limit);
      break;
    case GluConfig::Kind::geglu:
      geglu(gate, up, h, n);
      break;
  }
}

}  // namespace moetier::model
