// Where every routed expert's bytes live in a GGUF model.
//
// MoE GGUF files (llama.cpp layout) stack a layer's experts in 3-D tensors blk.N.ffn_{gate,up,down}_exps.weight
// with ne = [n_in, n_out, n_expert] (expert index outermost), plus for gpt-oss 2-D bias tensors
// blk.N.ffn_{gate,up,down}_exps.bias with ne = [n_out, n_expert]; Gemma 4 merges gate and up into
// blk.N.ffn_gate_up_exps.weight with ne = [n_in, 2 n_ff, n_expert] (each expert's gate rows, then its up rows).
// Expert e of a stacked tensor is the contiguous slice [e * n_bytes / n_expert, (e + 1) * n_bytes / n_expert). One
// (layer, expert) unit — what the expert store caches and reads — is the set of its slices across the layer's
// stacked tensors. Everything else is "dense", including Gemma 4's per-expert output scales
// blk.N.ffn_down_exps.scale [n_expert]: a few bytes per layer that the router's side keeps resident.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf.h"

namespace moetier::moe {

// One expert's slice of one stacked tensor.
struct ExpertSlice {
  const gguf::TensorInfo* tensor = nullptr;  // the stacked tensor it belongs to
  uint32_t shard = 0;                        // file holding it
  uint64_t file_offset = 0;                  // absolute byte offset in that file
  uint64_t n_bytes = 0;
};

// The routed experts of one layer.
struct LayerExperts {
  int64_t layer = 0;
  int64_t n_expert = 0;
  std::vector<const gguf::TensorInfo*> stacked;  // the layer's stacked expert tensors, in file order
  uint64_t expert_bytes = 0;  // bytes of one expert: the sum of its slices over `stacked`
  uint64_t dense_bytes = 0;   // bytes of this layer's other tensors (attention, norms, router)

  // Slices of expert e (0 <= e < n_expert), in the order of `stacked`.
  std::vector<ExpertSlice> slices(int64_t e) const;
};

class ExpertLayout {
 public:
  // Throws moetier::Error when a stacked tensor's last dimension disagrees with the layer's other stacked
  // tensors (naming it).
  static ExpertLayout from_model(const gguf::GgufModel& model);

  // Whether a tensor name is a routed-expert stacked tensor (blk.N.ffn_*_exps.{weight,bias}; not .scale).
  static bool is_routed_expert_tensor(const std::string& name);

  const std::vector<LayerExperts>& layers() const { return layers_; }  // MoE layers only, ascending
  uint64_t expert_total_bytes() const { return expert_total_; }
  uint64_t dense_total_bytes() const { return dense_total_; }
  int64_t n_experts_total() const;  // sum over layers of n_expert
  // Expert slices whose file offset is a multiple of `alignment`, and all slices.
  std::pair<uint64_t, uint64_t> aligned_slices(uint64_t alignment) const;

 private:
  std::vector<LayerExperts> layers_;
  uint64_t expert_total_ = 0;
  uint64_t dense_total_ = 0;
};

}  // namespace moetier::moe
