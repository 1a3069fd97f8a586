#include "moe/resident_experts.h"

#include <cassert>
#include <utility>

#include <fmt/ranges.h>

#include "gguf/tensor_binder.h"
#include "moe/expert_layout.h"
#include "quant/repack.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace moetier::moe {

ResidentExperts::ResidentExperts(const gguf::GgufModel& model, const ExpertShape& shape,
                                 quant::RepackedMatrices* repack, bool evict)
    : shape_(shape) {
  shape_.moe_layers.clear();
  const ExpertLayout layout = ExpertLayout::from_model(model);
  for (const LayerExperts& le : layout.layers()) shape_.moe_layers.push_back(le.layer);
  if (static_cast<int64_t>(shape_.moe_layers.size()) != shape.n_moe_layers ||
      (!shape.moe_layers.empty() && shape.moe_layers != shape_.moe_layers)) {
    fail("{}: the blocks with routed experts (blk.N.ffn_*_exps tensors) are [{}], the model expects {} MoE layers "
         "[{}]",
         model.path().string(), fmt::join(shape_.moe_layers, ", "), shape.n_moe_layers,
         fmt::join(shape.moe_layers, ", "));
  }
  const gguf::TensorBinder bind(model);
  const int64_t E = shape.n_expert, D = shape.n_embd, F = shape.n_ff;
  layers_.resize(static_cast<size_t>(shape.n_moe_layers));
  batch_.resize(static_cast<size_t>(E));
  for (size_t m = 0; m < layers_.size(); ++m) {
    const int64_t il = shape_.moe_layers[m];  // block index
    Layer& l = layers_[m];
    if (shape.merged_gate_up) {
      l.gate = bind.matrix_stack(gguf::block_tensor(il, "ffn_gate_up_exps.weight"), D, 2 * F, E);
    } else {
      l.gate = bind.matrix_stack(gguf::block_tensor(il, "ffn_gate_exps.weight"), D, F, E);
      l.up = bind.matrix_stack(gguf::block_tensor(il, "ffn_up_exps.weight"), D, F, E);
    }
    l.down = bind.matrix_stack(gguf::block_tensor(il, "ffn_down_exps.weight"), F, D, E);
    if (shape.has_bias) {
      l.gate_bias = bind.f32_in_place(gguf::block_tensor(il, "ffn_gate_exps.bias"), {F, E});
      l.up_bias = bind.f32_in_place(gguf::block_tensor(il, "ffn_up_exps.bias"), {F, E});
      l.down_bias = bind.f32_in_place(gguf::block_tensor(il, "ffn_down_exps.bias"), {D, E});
    }
    if (repack != nullptr) {
      // An expert's slice (and Gemma 4's up half of it) must start at a group: rows per expert a multiple of 16.
      for (auto [v, rows_per_expert] : {std::pair{&l.gate, F}, std::pair{&l.up, F}, std::pair{&l.down, D}}) {
        if (v->empty() || rows_per_expert % quant::kRows16 != 0 || !quant::RepackedMatrices::takes(*v)) continue;
        const quant::WeightView file_view = *v;
        *v = repack->add(file_view);
        // A refusal (locked pages) leaves them mapped: more resident memory, the same results.
        (void)release_pages(file_view.data, static_cast<uint64_t>(file_view.rows) * file_view.row_bytes, evict);
        ++repacked_stacks_;
      }
    }
  }
}

namespace {

// Expert e's rows of a stack whose experts each own `rows` consecutive rows.
quant::WeightView slice(const quant::WeightView& stack, int64_t e, int64_t rows) {
  assert(stack.layout == quant::WeightLayout::gguf || rows % quant::kRows16 == 0);  // rows16: whole groups
  quant::WeightView v = stack;
  v.data = stack.row(e * rows);
  v.rows = rows;
  return v;
}

}  // namespace

ExpertWeights ResidentExperts::expert(int64_t layer, int32_t e) const {
  assert(layer >= 0 && layer < shape_.n_moe_layers && e >= 0 && e < shape_.n_expert);
  const Layer& l = layers_[static_cast<size_t>(layer)];
  const int64_t D = shape_.n_embd, F = shape_.n_ff;
  ExpertWeights w;
  if (shape_.merged_gate_up) {
    const quant::WeightView both = slice(l.gate, e, 2 * F);
    w.gate = slice(both, 0, F);
    w.up = slice(both, 1, F);
  } else {
    w.gate = slice(l.gate, e, F);
    w.up = slice(l.up, e, F);
  }
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
