#include "moe/resident_experts.h"

#include <cassert>

#include "model/tensor_binding.h"

namespace moetier::moe {

ResidentExperts::ResidentExperts(const gguf::GgufModel& model, const ExpertShape& shape) : shape_(shape) {
  const model::TensorBinder bind(model);
  const int64_t E = shape.n_expert, D = shape.n_embd, F = shape.n_ff;
  layers_.resize(static_cast<size_t>(shape.n_layer));
  batch_.resize(static_cast<size_t>(E));
  for (int64_t il = 0; il < shape.n_layer; ++il) {
    Layer& l = layers_[static_cast<size_t>(il)];
    l.gate = bind.matrix_stack(model::block_tensor(il, "ffn_gate_exps.weight"), D, F, E);
    l.up = bind.matrix_stack(model::block_tensor(il, "ffn_up_exps.weight"), D, F, E);
    l.down = bind.matrix_stack(model::block_tensor(il, "ffn_down_exps.weight"), F, D, E);
    if (shape.has_bias) {
      l.gate_bias = bind.f32_in_place(model::block_tensor(il, "ffn_gate_exps.bias"), {F, E});
      l.up_bias = bind.f32_in_place(model::block_tensor(il, "ffn_up_exps.bias"), {F, E});
      l.down_bias = bind.f32_in_place(model::block_tensor(il, "ffn_down_exps.bias"), {D, E});
    }
  }
}

namespace {

// Expert e's rows of a stack whose experts each own `rows` consecutive rows.
quant::WeightView slice(const quant::WeightView& stack, int64_t e, int64_t rows) {
  quant::WeightView v = stack;
  v.data = stack.row(e * rows);
  v.rows = rows;
  return v;
}

}  // namespace

ExpertWeights ResidentExperts::expert(int64_t layer, int32_t e) const {
  assert(layer >= 0 && layer < shape_.n_layer && e >= 0 && e < shape_.n_expert);
  const Layer& l = layers_[static_cast<size_t>(layer)];
  const int64_t D = shape_.n_embd, F = shape_.n_ff;
  ExpertWeights w;
  w.gate = slice(l.gate, e, F);
  w.up = slice(l.up, e, F);
  w.down = slice(l.down, e, D);
  if (shape_.has_bias) {
    w.gate_bias = l.gate_bias + e * F;
    w.up_bias = l.up_bias + e * F;
    w.down_bias = l.down_bias + e * D;
  }
  return w;
}

void ResidentExperts::fetch(int64_t layer, std::span<const int32_t> experts, ExpertConsumer& consumer) {
  if (experts.empty()) return;
  for (size_t i = 0; i < experts.size(); ++i) batch_[i] = expert(layer, experts[i]);
  consumer.on_experts(experts, std::span<const ExpertWeights>(batch_.data(), experts.size()));
}

}  // namespace moetier::moe
