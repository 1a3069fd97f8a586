#include "model/glu.h"

#include "quant/kernels/glu_kernels.h"

namespace moetier::model {

void glu(const GluConfig& cfg, const float* gate, const float* up, float* h, int64_t n) {
  switch (cfg.kind) {
    case GluConfig::Kind::swiglu:
      quant::kernels::swiglu(gate, up, h, n);
      break;
    case GluConfig::Kind::swiglu_oai:
      quant::kernels::swiglu_oai(gate, up, h, n, cfg.alpha, cfg.limit);
      break;
    case GluConfig::Kind::geglu:
      quant::kernels::geglu(gate, up, h, n);
      break;
  }
}

}  // namespace moetier::model
