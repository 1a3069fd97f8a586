// What every supported architecture shares around its layers: token embedding lookup, the residual stream,
// the final RMSNorm and output projection, the KV cache, the compute backend, the MoE layers and argument
// checking. An architecture (arch_*.cpp) derives from DecoderModel, binds its layer tensors and implements
// layer() from the shared blocks below.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "compute/activations.h"
#include "compute/backend.h"
#include "gguf/gguf.h"
#include "gguf/tensor_binder.h"
#include "gpu/gpu.h"
#include "model/arch_metadata.h"
#include "model/attention.h"
#include "model/common_hparams.h"
#include "model/ffn.h"
#include "model/gpu_blocks.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "model/moe_layers.h"
#include "model/next_layer_guess.h"
#include "moe/vram_tier.h"
#include "quant/matmul.h"

namespace moetier::model {

// Sizes fixed by the architecture that the shared buffers depend on.
struct DecoderSizes {
  int64_t max_cols = 0;  // widest matrix input (n_embd, n_ff, n_head * head_dim, ...)
  int64_t kv_width = 0;  // n_head_kv * head_dim
  // [n_layer]: each layer's n_head_kv * head_dim where layers differ (Gemma 4), else empty (kv_width for all)
  std::vector<int64_t> layer_kv_width;
};

class DecoderModel : public Model {
 public:
  const ModelInfo& info() const override { return info_; }
  void forward(std::span<const int32_t> tokens, int64_t pos, std::span<float> logits, LogitsMode mode,
               std::span<int32_t> routing) override;
  void set_sequence(int seq) override;
  compute::BackendCounters backend_counters() const override { return backend_->counters(); }
  moe::VramTier* vram_tier() override { return tier_.get(); }

 protected:
  DecoderModel(const gguf::GgufModel& file, const CommonHparams& hp, const ModelOptions& opts);
  // Allocates the backend, the shared buffers and the KV cache, after moe_ is set (a dense model leaves it
  // empty); call once from the derived constructor.
  void setup(const DecoderSizes& sizes);

  // Runs block `il` on the residual stream x[n_tok, n_embd] in place. `routing` is null or [n_tok,
  // n_expert_used] for the block's chosen experts (MoE blocks only).
  virtual void layer(int64_t il, float* x, int64_t pos0, int64_t n_tok, int32_t* routing) = 0;
  // Whether layer() is made of attention_block, ffn_block and moe_block alone, touching x through them only:
  // the blocks that -ngl puts on the GPU then run there whole (model/gpu_blocks.h), and x is not read or written
  // on the host during them.
  virtual bool layers_are_shared_blocks() const { return false; }

  // x[n] += y[n]: a block's output joins the residual stream.
  static void add_residual(float* x, const float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) x[i] += y[i];
  }

  // The pre-norm residual halves every supported layer is built from (Llama, Mixtral, Qwen3-MoE, gpt-oss), on
  // the residual stream x[n_tok, n_embd] with norm [n_embd] the block's RMSNorm gain:
  //   attention_block: x <- x + Attention(RMSNorm(x) * norm)
  //   ffn_block:       x <- x + FFN(RMSNorm(x) * norm)            (dense SwiGLU FFN)
  //   moe_block:       x <- x + MoE(RMSNorm(x) * norm)            (block il's router, then its routed experts)
  void attention_block(int64_t il, float* x, const std::vector<float>& norm, Attention& attn,
                       const AttentionWeights& w, int64_t pos0, int64_t n_tok);
  void ffn_block(float* x, const std::vector<float>& norm, DenseFfn& ffn, const FfnWeights& w, int64_t n_tok);
  void moe_block(int64_t il, float* x, const std::vector<float>& norm, int64_t n_tok, int32_t* routing);

  const gguf::GgufModel& file_;
  // the copies bind_ hands out, and the resident experts' (ModelOptions::repack, repack_experts)
  quant::RepackedMatrices repacked_;
  gguf::TensorBinder bind_;
  CommonHparams hp_;
  ModelOptions opts_;
  ModelInfo info_;
  MoeLayers moe_;  // the routed-expert layers; empty for a dense model
  std::vector<KvCache> kv_;  // [n_seq]: one KV cache per sequence
  int seq_ = 0;              // the sequence forward() runs in
  // Runs every product: the CPU backend, or with -ngl a compute::HybridBackend of the GPU and the CPU.
  std::unique_ptr<compute::Backend> backend_;
  compute::Activations xn_;   // [n_batch, n_embd]: normalised residual, input of a block
  compute::Activations tmp_;  // [n_batch, n_embd]: block output before it joins the residual
  // Set by an architecture's constructor: token embeddings are multiplied by embd_scale_ (Gemma: sqrt(n_embd)),
  // and when logit_softcap_ > 0 the logits become logit_softcap_ * tanh(logits / logit_softcap_) (Gemma's
  // final_logit_softcapping).
  float embd_scale_ = 1.0f;
  float logit_softcap_ = 0.0f;

 private:
  quant::WeightView tok_embd_;   // [n_vocab, n_embd]
  std::vector<float> out_norm_;  // [n_embd]
  quant::WeightView output_;     // [n_vocab, n_embd] (token_embd when the file ties them)
  compute::Activations x_;       // [n_batch, n_embd]: residual stream
  // The GPU backend with the weights ModelOptions::n_gpu_layers and n_cpu_moe put on it (model/gpu_placement.h),
  // joined to `cpu` for the rest; fills info_.gpu. max_cols and max_tok size the GPU's activation buffers.
  std::unique_ptr<compute::Backend> with_gpu(std::unique_ptr<compute::Backend> cpu, int64_t max_cols,
                                             int64_t max_tok);
  // Moves the blocks -ngl placed (and the output head, when placed) onto the GPU step when it can (shared blocks,
  // every placed type with a kernel, an F16 KV cache); says what it did, or why it could not, for the start log.
  std::string try_gpu_step(const DecoderSizes& sizes);
  // The VRAM expert tier's slots on the GPU (ModelOptions::experts_vram_mib), before the step is made; fills
  // info_.experts_vram. Throws moetier::Error when the experts stream or no slot fits.
  void setup_vram_tier(const DecoderSizes& sizes);
  // Whether the block forward_layers() is running (cur_layer_) runs on the GPU step.
  bool on_gpu_step() const { return gpu_blocks_ != nullptr && cur_layer_ >= gpu_first_; }
  gpu::GpuBackend* gpu_ = nullptr;         // inside backend_, with -ngl
  compute::Backend* cpu_ = nullptr;        // inside backend_, with -ngl: the CPU experts' backend
  int64_t gpu_expert_first_ = 0, gpu_expert_last_ = -1;  // the blocks whose routed experts are on the GPU
  int64_t gpu_first_ = 0;                  // blocks gpu_first_ .. n_layer - 1 are placed (n_layer: none)
  bool gpu_output_ = false;                // the output head is placed
  bool gpu_kernels_ = false;               // every placed tensor's type has a GPU kernel
  int64_t cur_layer_ = 0;                  // the block forward_layers() is in
  std::unique_ptr<GpuBlocks> gpu_blocks_;  // the step on the GPU, when try_gpu_step succeeded
  std::unique_ptr<moe::VramTier> tier_;    // the VRAM expert tier, with ModelOptions::experts_vram_mib
  std::vector<int32_t> route_;   // [n_batch, n_expert_used]: one MoE layer's routing
  // The next-layer prefetch (model/next_layer_guess.h), on when the expert source reads ahead and the guess can be
  // made (setup_prefetch says why not): after MoE block m of a decode step, moe_block guesses block m+1's experts.
  void setup_prefetch();
  void guess_next(int64_t m, const float* x);
  bool prefetch_ = false;
  NextLayerGuess guess_;
  // [n_moe_layers]: the RMSNorm gain each MoE block's router input takes, as its moe_block calls give it (fixed
  // per block; a block's is known once it has run, so from the first decode step on); null until then.
  std::vector<const std::vector<float>*> moe_norm_;
  // forward() after its checks and the embedding lookup into x: the layers and the logits (before the soft-cap).
  void forward_layers(float* x, int64_t pos, int64_t n, std::span<float> logits, LogitsMode mode,
                      std::span<int32_t> routing);
};

}  // namespace moetier::model
