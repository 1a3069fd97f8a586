#include "model/ffn.h"

namespace moetier::model {

DenseFfn::DenseFfn(int64_t n_ff, int64_t max_tok, GluConfig glu)
    : glu_(glu), n_ff_(n_ff), gate_(static_cast<size_t>(n_ff * max_tok)), up_(static_cast<size_t>(n_ff * max_tok)) {}

void DenseFfn::forward(const FfnWeights& w, const float* x, int64_t n_tok, float* out, compute::Backend& be) {
  be.matmul(w.gate, x, gate_.data(), n_tok);
  be.matmul(w.up, x, up_.data(), n_tok);
  glu(glu_, gate_.data(), up_.data(), gate_.data(), n_tok * n_ff_);
  be.matmul(w.down, gate_.data(), out, n_tok);
}

}  // namespace moetier::model
