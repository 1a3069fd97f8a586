#include "model/glu.h"

#include <algorithm>
#include <cmath>

namespace moetier::model {

void glu(const GluConfig& cfg, const float* gate, const float* up, float* h, int64_t n) {
  if (cfg.kind == GluConfig::Kind::swiglu) {
    for (int64_t i = 0; i < n; ++i) h[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const float g = std::min(gate[i], cfg.limit);
    const float u = std::clamp(up[i], -cfg.limit, cfg.limit);
    h[i] = g / (1.0f + std::exp(-cfg.alpha * g)) * (u + 1.0f);
  }
}

}  // namespace moetier::model
