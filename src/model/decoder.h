// What every supported architecture shares around its layers: token embedding lookup, the residual stream,
// the final RMSNorm and output projection, the KV cache, the matmul scratch, and argument checking. An
// architecture (arch_*.cpp) derives from DecoderModel, binds its layer tensors and implements layer().
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "gguf/gguf.h"
#include "model/arch_metadata.h"
#include "model/attention.h"
#include "model/ffn.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "model/moe_ffn.h"
#include "model/tensor_binding.h"
#include "moe/expert_source.h"
#include "quant/matmul.h"
#include "util/thread_pool.h"

namespace moetier::model {

// Hyperparameters every architecture reads the same way.
struct CommonHparams {
  int64_t n_vocab = 0;
  int64_t n_embd = 0;    // <arch>.embedding_length
  int64_t n_layer = 0;   // <arch>.block_count
  int64_t n_ctx_train = 0;  // <arch>.context_length
  float norm_eps = 0;    // <arch>.attention.layer_norm_rms_epsilon
};
// Reads the above (n_vocab from token_embd.weight's shape, since not every file carries <arch>.vocab_size).
CommonHparams read_common_hparams(const gguf::GgufModel& file, const ArchMetadata& md);

// Sizes fixed by the architecture that the shared buffers depend on.
struct DecoderSizes {
  int64_t max_cols = 0;       // widest matrix input (n_embd, n_ff, n_head * head_dim, ...)
  int64_t kv_width = 0;       // n_head_kv * head_dim
  int64_t n_moe_layers = 0;
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;  // after override
};

// n_expert_used after the option's override, validated against the model's n_expert.
int64_t experts_used(const ArchMetadata& md, int64_t n_expert, const ModelOptions& opts);

// `given` when not null (its shape must equal `shape`), otherwise a moe::ResidentExperts over the mapping.
std::unique_ptr<moe::ExpertSource> resolve_experts(const gguf::GgufModel& file, const moe::ExpertShape& shape,
                                                   std::unique_ptr<moe::ExpertSource> given);

class DecoderModel : public Model {
 public:
  const ModelInfo& info() const override { return info_; }
  void forward(std::span<const int32_t> tokens, int64_t pos, std::span<float> logits, LogitsMode mode,
               std::span<int32_t> routing) override;

 protected:
  DecoderModel(const gguf::GgufModel& file, const CommonHparams& hp, const ModelOptions& opts);
  // Allocates the shared buffers and the KV cache; call once from the derived constructor.
  void setup(const DecoderSizes& sizes);

  // Runs layer `il` on the residual stream x[n_tok, n_embd] in place. `routing` is null or [n_tok, n_used]
  // for the layer's chosen experts (MoE layers only).
  virtual void layer(int64_t il, float* x, int64_t pos0, int64_t n_tok, int32_t* routing) = 0;
  // Whether layer il has routed experts (its routing is recorded).
  virtual bool is_moe_layer(int64_t il) const = 0;

  // x[n] += y[n]: a block's output joins the residual stream.
  static void add_residual(float* x, const float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) x[i] += y[i];
  }

  // The pre-norm residual halves every supported layer is built from (Llama, Mixtral, Qwen3-MoE, gpt-oss), on
  // the residual stream x[n_tok, n_embd] with norm [n_embd] the block's RMSNorm gain:
  //   attention_block: x <- x + Attention(RMSNorm(x) * norm)
  //   ffn_block:       x <- x + FFN(RMSNorm(x) * norm)            (dense SwiGLU FFN)
  //   moe_block:       x <- x + MoE(RMSNorm(x) * norm)            (router, then the routed experts)
  void attention_block(int64_t il, float* x, const std::vector<float>& norm, Attention& attn,
                       const AttentionWeights& w, int64_t pos0, int64_t n_tok);
  void ffn_block(float* x, const std::vector<float>& norm, DenseFfn& ffn, const FfnWeights& w, int64_t n_tok);
  void moe_block(int64_t il, float* x, const std::vector<float>& norm, MoeFfn& moe, const RouterWeights& rw,
                 moe::ExpertSource& experts, int64_t n_tok, int32_t* routing);

  const gguf::GgufModel& file_;
  TensorBinder bind_;
  CommonHparams hp_;
  ModelOptions opts_;
  ModelInfo info_;
  KvCache kv_;
  std::unique_ptr<util::ThreadPool> pool_;  // opts_.threads threads for mm_'s products
  quant::MatmulScratch mm_;
  std::vector<float> xn_;   // [n_batch, n_embd]: normalised residual, input of a block
  std::vector<float> tmp_;  // [n_batch, n_embd]: block output before it joins the residual

 private:
  quant::WeightView tok_embd_;   // [n_vocab, n_embd]
  std::vector<float> out_norm_;  // [n_embd]
  quant::WeightView output_;     // [n_vocab, n_embd] (token_embd when the file ties them)
  std::vector<float> x_;         // [n_batch, n_embd]: residual stream
  std::vector<int32_t> route_;   // [n_batch, n_expert_used]: one layer's routing
};

}  // namespace moetier::model
