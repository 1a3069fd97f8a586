#include "model/shared_expert.h"

#include <cmath>

#include "quant/ggml_type.h"

namespace moetier::model {

SharedExpertWeights bind_shared_expert(const gguf::TensorBinder& bind, const gguf::GgufModel& file, int64_t il,
                                       int64_t n_embd, int64_t n_ff) {
  using gguf::block_tensor;
  SharedExpertWeights w;
  w.ffn.gate = bind.matrix(block_tensor(il, "ffn_gate_shexp.weight"), n_embd, n_ff);
  w.ffn.up = bind.matrix(block_tensor(il, "ffn_up_shexp.weight"), n_embd, n_ff);
  w.ffn.down = bind.matrix(block_tensor(il, "ffn_down_shexp.weight"), n_ff, n_embd);
  // Converters write the gate as a vector [n_embd] or as a one-row matrix [n_embd, 1]: the same weights.
  const std::string gate = block_tensor(il, "ffn_gate_inp_shexp.weight");
  const gguf::TensorInfo* t = file.find(gate);
  if (t != nullptr && t->n_dims == 1) {
    const gguf::TensorInfo& v = bind.tensor(gate, {n_embd});
    w.gate_inp = quant::WeightView{v.type, v.data, 1, n_embd, quant::row_bytes(v.type, n_embd)};
  } else {
    w.gate_inp = bind.matrix(gate, n_embd, 1);
  }
  return w;
}

SharedExpert::SharedExpert(int64_t n_ff, int64_t max_tok)
    : ffn_(n_ff, max_tok, GluConfig{}), gate_(static_cast<size_t>(max_tok)) {}

void SharedExpert::forward(const SharedExpertWeights& w, const float* x, int64_t n_tok, float* out,
                           compute::Backend& be) {
  ffn_.forward(w.ffn, x, n_tok, out, be);
  be.matmul(w.gate_inp, x, gate_.data(), n_tok);
  const int64_t D = w.ffn.down.rows;
  for (int64_t t = 0; t < n_tok; ++t) {
    const float s = 1.0f / (1.0f + std::exp(-gate_[static_cast<size_t>(t)]));
    for (int64_t i = 0; i < D; ++i) out[t * D + i] *= s;
  }
}

}  // namespace moetier::model
