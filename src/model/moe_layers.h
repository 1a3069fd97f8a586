// The routed-expert layers of a model, wired in one place for every architecture: which blocks have routed
// experts (the MoE layers), each one's router, the expert source that delivers their experts, and the MoE block
// that computes them. A MoE layer has two numbers: its block index il in [0, n_layer) (blk.N in the file, the KV
// cache's layer) and its MoE ordinal m in [0, n_moe_layers) (the m-th block with routed experts). The ordinal is
// what the router override, the expert source, the cache policies, route traces, replay and telemetry index by;
// the two agree only when every layer is a MoE layer. DeepSeek and GLM files keep `leading_dense_block_count`
// dense blocks first (a dense FFN of feed_forward_length); the ordinal then starts at that block.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "compute/backend.h"
#include "gguf/gguf.h"
#include "gguf/tensor_binder.h"
#include "model/arch_metadata.h"
#include "model/common_hparams.h"
#include "model/ffn.h"
#include "model/model.h"
#include "model/moe_ffn.h"
#include "moe/expert_source.h"

namespace moetier::model {

struct MoeHparams {
  int64_t n_expert = 0;       // expert_count
  int64_t n_expert_used = 0;  // expert_used_count (at most n_expert), or ModelOptions::n_expert_used
  int64_t n_ff_exp = 0;       // expert_feed_forward_length (or the architecture's fallback)
  int64_t n_dense_lead = 0;   // leading_dense_block_count (default 0): blocks 0 .. n_dense_lead - 1 are dense
  bool merged_gate_up = false;  // the file has ffn_gate_up_exps [n_embd, 2 n_ff_exp, n_expert] (Gemma 4)
};

// Reads the above; n_ff_fallback >= 1 is expert_feed_forward_length's default (Mixtral files have only
// feed_forward_length), 0 makes the key required. Throws naming the key for a bad value, one that the first MoE
// block's ffn_gate_inp [n_embd, n_expert] or ffn_up_exps [n_embd, n_ff_exp, n_expert] (ffn_gate_up_exps [n_embd,
// 2 n_ff_exp, n_expert] where the file merges them) contradicts (checked before anything is sized by it), or an
// --n-expert-used override outside 1..n_expert.
MoeHparams read_moe_hparams(const gguf::GgufModel& file, const ArchMetadata& md, const CommonHparams& c,
                            const ModelOptions& opts, int64_t n_ff_fallback = 0);

// Throws naming <arch>.feed_forward_length unless block il's dense ffn_up is [n_embd, n_ff]: before the dense
// FFN's buffers are sized by it.
void check_dense_ffn_length(const gguf::GgufModel& file, const ArchMetadata& md, int64_t il, int64_t n_embd,
                            int64_t n_ff);

// Which tensors a MoE layer's router and experts carry.
struct MoeTensors {
  bool router_bias = false;  // ffn_gate_inp.bias [n_expert] (gpt-oss)
  bool expert_bias = false;  // ffn_{gate,up,down}_exps.bias (gpt-oss)
  bool expert_scale = false;  // ffn_down_exps.scale [n_expert] (Gemma 4), kept with the router, not streamed
};

class MoeLayers {
 public:
  MoeLayers() = default;
  // Binds the routers of blocks n_dense_lead .. n_layer - 1 (ffn_gate_inp [n_expert, n_embd]) and takes the
  // routed experts from `experts` (its shape must name the same MoE layers) or, when null, from the mapping.
  // Allocates the MoE block for max_tok tokens. Throws naming a missing tensor or a mismatched expert source.
  MoeLayers(const gguf::GgufModel& file, const gguf::TensorBinder& bind, int64_t n_layer, int64_t n_embd,
            const MoeHparams& hp, const RouterConfig& router, const GluConfig& glu, MoeTensors with, int64_t max_tok,
            RoutingOverride* routing_override, std::unique_ptr<moe::ExpertSource> experts);

  bool is_moe(int64_t il) const { return ordinal(il) >= 0; }
  // The MoE ordinal of block il, -1 for a dense block.
  int64_t ordinal(int64_t il) const {
    return il >= 0 && il < static_cast<int64_t>(ordinal_.size()) ? ordinal_[static_cast<size_t>(il)] : -1;
  }
  std::span<const int64_t> layers() const { return layers_; }  // [n_moe_layers]: block index of each ordinal
  int64_t n_moe_layers() const { return static_cast<int64_t>(layers_.size()); }
  const MoeHparams& hparams() const { return hp_; }
  // Whether the routed experts are read in place from the file's mapping (no expert source was given), so a
  // device may copy their stacked tensors once (-ngl); false when they stream into the expert cache.
  bool experts_in_file() const { return experts_in_file_; }
  // Stacked expert tensors held as a rows16 copy instead of the file's bytes (TensorBinder::expert_repack_target).
  int64_t repacked_expert_stacks() const { return repacked_expert_stacks_; }

  // out[n_tok, n_embd] = MoE(xn[n_tok, n_embd]) for MoE block il (is_moe(il)), routed by xr[n_tok, n_embd] (xn
  // when null: Gemma 4's router has its own input); routing: null or [n_tok, n_expert_used] receiving the chosen
  // expert ids.
  void forward(int64_t il, const float* xn, int64_t n_tok, float* out, int32_t* routing, compute::Backend& be,
               const float* xr = nullptr);

  // The pieces of MoE block il (is_moe(il)) for a block that runs its products elsewhere (model/gpu_blocks.h).
  const RouterWeights& router(int64_t il) const { return routers_[static_cast<size_t>(ordinal(il))]; }
  MoeFfn& ffn() { return ffn_; }
  moe::ExpertSource& experts() { return *experts_; }

 private:
  MoeHparams hp_;
  std::vector<int64_t> ordinal_;       // [n_layer]: MoE ordinal of each block, -1 when dense
  std::vector<int64_t> layers_;        // [n_moe_layers]: block index of each MoE ordinal, ascending
  // [n_moe_layers]: gate_inp [n_expert, n_embd], bias [n_expert] or empty, expert_scale [n_expert] or empty
  std::vector<RouterWeights> routers_;
  MoeFfn ffn_;
  std::unique_ptr<moe::ExpertSource> experts_;
  bool experts_in_file_ = false;
  int64_t repacked_expert_stacks_ = 0;
};

// Binds block il's dense FFN (SwiGLU or GEGLU): ffn_gate / ffn_up [n_ff, n_embd], ffn_down [n_embd, n_ff].
FfnWeights bind_dense_ffn(const gguf::TensorBinder& bind, int64_t il, int64_t n_embd, int64_t n_ff);

}  // namespace moetier::model
