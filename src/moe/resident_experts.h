// ExpertSource over a fully mapped model file: expert e of a stacked tensor ffn_*_exps is the e-th slice of
// rows (e * rows_per_expert * row_bytes bytes in), so views point straight into the mapping.
#pragma once

#include <vector>

#include "gguf/gguf.h"
#include "moe/expert_source.h"

namespace moetier::moe {

class ResidentExperts final : public ExpertSource {
 public:
  // Binds blk.N.ffn_{gate,up,down}_exps.weight (ffn_gate_up_exps.weight and ffn_down_exps.weight when
  // shape.merged_gate_up; and .bias when shape.has_bias) of every MoE layer, the blocks
  // ExpertLayout::from_model finds routed experts in, checking each shape against `shape`; throws
  // moetier::Error naming the tensor with expected and found shapes, or naming the file when its MoE layers are
  // not shape.n_moe_layers or (when given) not shape.moe_layers. shape().moe_layers is the file's.
  // `model` must outlive this object. Every `layer` below is a MoE ordinal in [0, n_moe_layers).
  ResidentExperts(const gguf::GgufModel& model, const ExpertShape& shape);

  const ExpertShape& shape() const override { return shape_; }
  void fetch(int64_t layer, std::span<const int32_t> experts, ExpertConsumer& consumer) override;
  // Views of one expert (no delivery protocol; for tests and tools).
  ExpertWeights expert(int64_t layer, int32_t expert) const;

 private:
  struct Layer {
    // [n_expert * n_ff, n_embd]: expert index first; merged_gate_up: [n_expert * 2 n_ff, n_embd], each expert's
    // gate rows then its up rows, and `up` empty
    quant::WeightView gate;
    quant::WeightView up;    // [n_expert * n_ff, n_embd]
    quant::WeightView down;  // [n_expert * n_embd, n_ff]
    const float* gate_bias = nullptr;  // [n_expert, n_ff]
    const float* up_bias = nullptr;    // [n_expert, n_ff]
    const float* down_bias = nullptr;  // [n_expert, n_embd]
  };
  ExpertShape shape_;
  std::vector<Layer> layers_;  // [n_moe_layers]
  std::vector<ExpertWeights> batch_;  // [n_expert]: the views of one fetch, delivered as one batch
};

}  // namespace moetier::moe
