#include "model/glu.h"

#include "quant/kernels/glu_kernels.h"

namespace moetier::model {

void glu(const GluConfig& cfg, const float* gate, const float* up, float* h, int64_t n) {
  if (cfg.kind == GluConfig::Kind::swiglu) {
    quant::kernels::swiglu(gate, up, h, n);
  } else {
    quant::kernels::swiglu_oai(gate, up, h, n, cfg.alpha, cfg.limit);
  }
}

}  // namespace moetier::model
