// The shared pre-norm blocks of model/decoder.h on the GPU, for the blocks -ngl put there (the last ones, from
// first_layer) and the output head when it is placed: the residual stream enters at first_layer (one upload per
// call) and, the normalised input, the attention's Q/K/V, the KV cache (binary16) and the FFN
// activations stay in device memory (gpu/step.h), and a step records its kernels into one command buffer. The
// host sees results only where it must act on them:
//   - a MoE block whose routed experts are on the GPU downloads the router logits, routes on the host (the same
//     MoeFfn::route_batch as the CPU block: same choice, same weights, the routing override and trace hooks
//     intact) and records the chosen experts' products, their GLU and the weighted sum;
//   - a MoE block whose experts stay in RAM (--n-cpu-moe, or streamed) downloads its normalised input, runs the CPU
//     MoE block on it and uploads the block's output, which joins the residual stream on the GPU;
//   - a MoE block over the VRAM tier (--experts-vram) downloads the router logits and its normalised input, routes,
//     submits its slot experts' products without waiting, computes the misses on the CPU meanwhile and uploads
//     their outputs; the weighted sum of both runs on the GPU;
//   - the logits, or with the output head on the CPU the rows of the residual stream it reads.
// So a token takes one submission per MoE layer on the GPU plus one (a dense model: one).
//
// The constants (norm gains, biases, sinks, the routed experts' biases) are registered in a dry pass over the
// layers at setup (set_registering), before DeviceStep::finish_setup; a block then finds them by address.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "compute/backend.h"
#include "gpu/step.h"
#include "model/attention.h"
#include "model/ffn.h"
#include "model/glu.h"
#include "model/moe_layers.h"
#include "moe/expert_source.h"
#include "moe/vram_tier.h"

namespace moetier::model {

struct GpuBlockSizes {
  int64_t n_embd = 0;
  int64_t n_batch = 0;       // most tokens of one forward call
  int64_t n_layer = 0;
  int64_t first_layer = 0;   // blocks first_layer .. n_layer - 1 run here
  int64_t n_seq = 1;         // KV caches: one per (sequence, block run here)
  int64_t n_ctx = 0;
  int64_t n_vocab = 0;
  int64_t max_cols = 0;      // widest product input (DecoderSizes::max_cols)
  std::vector<int64_t> kv_width;  // [n_layer]: n_head_kv * head_dim of each layer
  int64_t n_expert = 0;      // 0 for a dense model
  int64_t n_expert_used = 0;
  int64_t n_ff_exp = 0;
  float norm_eps = 1e-6f;
  bool tiered = false;       // MoE blocks may run moe_block_tiered (the VRAM tier): its uploads are staged too
};

class GpuBlocks final : private moe::ExpertConsumer {
 public:
  GpuBlocks(gpu::DeviceStep& step, const GpuBlockSizes& s);

  // While registering, the blocks below only note the constants they read; finish_setup() then uploads them.
  void set_registering(bool on) { registering_ = on; }
  // Notes a constant the blocks will find by address (e.g. a file's stacked expert biases).
  void register_constant(std::span<const float> v);
  void finish_setup();
  uint64_t bytes() const { return step_.bytes(); }
  // Drops a step that an error interrupted (what was recorded, the cached RoPE table), so the next starts clean.
  void discard();

  // The residual stream x[n_tok, n_embd] of a forward call enters the GPU.
  void begin(const float* x, int64_t n_tok);
  // model/decoder.h's attention_block for sequence seq's KV cache of block il.
  void attention_block(int64_t il, int seq, std::span<const float> norm, const Attention& attn,
                       const AttentionWeights& w, int64_t pos0, int64_t n_tok);
  void ffn_block(std::span<const float> norm, const FfnWeights& w, const GluConfig& glu, int64_t n_tok);
  // moe_block with the routed experts on the GPU (placed by -ngl); routing as in DecoderModel::layer, a batch's
  // tokens routed across `pool` (MoeFfn::route_batch; may be null).
  void moe_block_gpu(int64_t il, std::span<const float> norm, MoeLayers& moe, const GluConfig& glu, int64_t n_tok,
                     int32_t* routing, util::ThreadPool* pool);
  // moe_block with the routed experts in the VRAM tier (moe/vram_tier.h): the chosen experts that hold a slot
  // are computed here from it, the others by `cpu` where they live, from the layer's normalised input brought
  // down once into xn_host [n_tok, n_embd]; their outputs go up and every expert's output is combined here.
  void moe_block_tiered(int64_t il, std::span<const float> norm, MoeLayers& moe, const GluConfig& glu, int64_t n_tok,
                        int32_t* routing, util::ThreadPool* pool, moe::VramTier& tier, compute::Backend& cpu,
                        float* xn_host);
  // moe_block with the routed experts computed by `cpu` from host memory; xn_host and out_host are [n_tok, n_embd]
  // host buffers.
  void moe_block_cpu(int64_t il, std::span<const float> norm, MoeLayers& moe, int64_t n_tok, int32_t* routing,
                     compute::Backend& cpu, float* xn_host, float* out_host);
  // logits[rows, n_vocab] = output (rmsnorm(x[first .. first + rows - 1]) * out_norm); ends the step.
  void logits(std::span<const float> out_norm, const quant::WeightView& output, int64_t first, int64_t rows,
              float* logits);
  // x_host[rows, n_embd] = rows first .. first + rows - 1 of the residual stream, for an output head on the CPU;
  // ends the step.
  void end(float* x_host, int64_t first, int64_t rows);

 private:
  void on_experts(std::span<const int32_t> experts, std::span<const moe::ExpertWeights> weights) override;
  // The router of MoE block il on the normalised input (xn_host: also brought down), then the routing on the host.
  MoeFfn& route(int64_t il, std::span<const float> norm, MoeLayers& moe, int64_t n_tok, int32_t* routing,
                util::ThreadPool* pool, float* xn_host);
  // Gathers a layer's input rows by expert (n_tok > 1) and starts the layer's expert products (on_experts).
  void begin_experts(MoeFfn& ffn, int64_t n_tok);
  // Records the products, biases and GLU of the experts on_experts received (`experts`, a layer's chosen or some
  // of them) into their positions of slots_.
  void record_experts(std::span<const int32_t> experts, const GluConfig& glu, int64_t n_tok);
  // x += the weighted sum of each token's expert outputs in slots_.
  void combine_experts(const MoeFfn& ffn, int64_t n_tok);
  // The device copy of a registered constant containing v (registering: registers v).
  gpu::DevArray dev(std::span<const float> v);
  gpu::DevArray dev_or_empty(std::span<const float> v) { return v.empty() ? gpu::DevArray{} : dev(v); }
  // Rounded copies of x[rows, cols] for each product of one input, one per activation grid: out[i] is what
  // products[i] reads.
  void rounded_inputs(std::span<const quant::WeightView* const> ws, gpu::DevArray x, int64_t rows, int64_t cols,
                      gpu::DevArray* out);
  gpu::DevArray round(const quant::WeightView& w, gpu::DevArray x, int64_t rows, int64_t cols, int scratch = 0);

  gpu::DeviceStep& step_;
  GpuBlockSizes s_;
  bool registering_ = false;
  std::vector<std::pair<std::span<const float>, gpu::DevArray>> consts_;  // sorted by address after setup
  gpu::DevArray x_;        // [n_batch, n_embd]: residual stream
  gpu::DevArray xn_;       // [n_batch, n_embd]: normalised input of a block
  gpu::DevArray out_;      // [n_batch, n_embd]: a block's output
  gpu::DevArray xr_[3];    // [n_batch * max(n_expert_used, 1), max_cols] each: rounded product inputs
  gpu::DevArray q_, k_, v_, ctx_;  // [n_batch, max_cols]
  gpu::DevArray table_;    // [n_batch, max_cols]: RoPE (cos, sin) per token and pair
  gpu::DevArray gate_, up_;  // [n_batch * max(n_expert_used, 1), max_cols]: FFN / experts' gate and up
  gpu::DevArray xg_;       // [n_batch * n_expert_used, n_embd]: a MoE layer's input rows grouped by expert
  gpu::DevArray rows_;     // [n_batch * n_expert_used]: gather()'s row index (the token of each grouped position)
  gpu::DevArray slots_;    // [n_batch * n_expert_used, n_embd]: each (token, slot)'s expert output
  gpu::DevArray router_;   // [n_batch, n_expert]: router logits
  gpu::DevArray mix_;      // [n_batch * n_expert_used, 2]: combine()'s (position, weight) per (token, slot)
  gpu::DevArray table_up_;    // [2 * n_expert, 4]: products_grouped()'s table for the experts' gates and ups
  gpu::DevArray table_down_;  // [n_expert, 4]: the same for their downs
  gpu::DevArray logits_;   // [logit_rows_, n_vocab]
  int64_t logit_rows_ = 1;
  std::vector<int> kv_;    // [n_seq * n_layer]: KV cache index of (seq, layer); -1 below first_layer
  std::vector<float> table_host_;  // [n_batch, max_cols]
  std::vector<float> mix_host_;    // [n_batch * n_expert_used, 2]
  std::vector<int32_t> rows_host_;  // [n_batch * n_expert_used]: token of each grouped position
  std::vector<moe::ExpertWeights> delivered_;  // [n_expert]: the weights the expert source gave this layer
  std::vector<gpu::GroupedProduct> grouped_;   // [2 * n_expert]: one layer's expert products
  std::vector<int32_t> on_gpu_, on_cpu_;       // [n_expert] each: a tiered layer's chosen experts, by where they run
  std::vector<int32_t> tokens_;                // [n_expert]: the token count of each chosen expert
  std::vector<moe::ExpertWeights> slot_w_;     // [n_expert]: the slot views of on_gpu_
  const Attention* table_for_ = nullptr;  // the attention (RoPE) and call table_ holds
  int64_t table_pos0_ = -1, table_n_ = 0;
  // Per MoE call state for on_experts.
  MoeFfn* ffn_ = nullptr;
  int64_t n_tok_ = 0;
  gpu::DevArray moe_x_, moe_up_x_;  // what the experts' gate and up read: xg_ (xn_ at one token) rounded for each
};

}  // namespace moetier::model
