// ExpertSource over a fully mapped model file: expert e of a stacked tensor ffn_*_exps is the e-th slice of
// rows (e * rows_per_expert * row_bytes bytes in), so views point straight into the mapping.
#pragma once

#include <vector>

#include "gguf/gguf.h"
#include "moe/expert_source.h"
#include "quant/repacked_matrices.h"

namespace moetier::moe {

class ResidentExperts final : public ExpertSource {
 public:
  // Binds blk.N.ffn_{gate,up,down}_exps.weight (ffn_gate_up_exps.weight and ffn_down_exps.weight when
  // shape.merged_gate_up; and .bias when shape.has_bias) of every MoE layer, the blocks
  // ExpertLayout::from_model finds routed experts in, checking each shape against `shape`; throws
  // moetier::Error naming the tensor with expected and found shapes, or naming the file when its MoE layers are
  // not shape.n_moe_layers or (when given) not shape.moe_layers. shape().moe_layers is the file's.
  // `model` must outlive this object. Every `layer` below is a MoE ordinal in [0, n_moe_layers).
  // With `repack` (not owned; must outlive this object), each stack that RepackedMatrices::takes and whose experts
  // are whole groups of 16 rows (n_ff, n_embd multiples of 16) is replaced by a rows16 copy (quant/repack.h: the
  // same results, bit for bit, from faster kernels), and its pages of the mapping are released (release_pages:
  // unmapped, and with `evict` dropped from the page cache too), so that the copy takes their place in RAM instead
  // of doubling it. Views are then of the copy (WeightLayout::rows16: for the CPU's integer kernels only).
  ResidentExperts(const gguf::GgufModel& model, const ExpertShape& shape, quant::RepackedMatrices* repack = nullptr,
                  bool evict = false);

  const ExpertShape& shape() const override { return shape_; }
  void fetch(int64_t layer, std::span<const int32_t> experts, ExpertConsumer& consumer) override;
  // Views of one expert (no delivery protocol; for tests and tools).
  ExpertWeights expert(int64_t layer, int32_t expert) const;
  // Stacks (one tensor of one layer) held as a rows16 copy.
  int64_t repacked_stacks() const { return repacked_stacks_; }

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
  int64_t repacked_stacks_ = 0;
};

}  // namespace moetier::moe
