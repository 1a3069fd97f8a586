// Architecture "qwen3moe" (Qwen3 MoE, Qwen team 2025): grouped-query attention with RMSNorm of every query and key
// head before RoPE ("QK-norm"), NeoX RoPE pairing, head size from attention.key_length (may differ from
// n_embd / n_head), and routed SwiGLU experts chosen by softmax -> top-k -> renormalise (norm_topk_prob; the
// file may say otherwise with <arch>.expert_weights_norm). No biases, no shared expert. Blocks before
// leading_dense_block_count (none in Qwen's files) have a dense SwiGLU FFN of feed_forward_length instead.
#include <algorithm>
#include <memory>
#include <vector>

#include "model/attention.h"
#include "model/decoder.h"
#include "model/gqa.h"
#include "model/moe_layers.h"
#include "model/registry.h"

namespace moetier::model {

namespace {

constexpr const char* kArch = "qwen3moe";

class Qwen3MoeModel final : public DecoderModel {
 public:
  Qwen3MoeModel(const gguf::GgufModel& file, const ArchMetadata& md, const CommonHparams& c,
                const ModelOptions& opts, std::unique_ptr<moe::ExpertSource> experts)
      : DecoderModel(file, c, opts), gqa_(read_gqa_hparams(file, md, c, HeadDim::key_length_or_width)) {
    const int64_t D = c.n_embd, B = info().n_batch;
    const MoeHparams mh = read_moe_hparams(file, md, c, opts);
    const int64_t n_ff = mh.n_dense_lead > 0 ? md.count("feed_forward_length") : 0;
    if (n_ff > 0) check_dense_ffn_length(file, md, 0, D, n_ff);
    layers_.resize(static_cast<size_t>(c.n_layer));
    for (int64_t il = 0; il < c.n_layer; ++il) {
      Layer& l = layers_[static_cast<size_t>(il)];
      l.attn_norm = bind_.vector(gguf::block_tensor(il, "attn_norm.weight"), D);
      l.attn = bind_gqa_attention(bind_, il, gqa_, D, {.qk_norm = true});
      l.ffn_norm = bind_.vector(gguf::block_tensor(il, "ffn_norm.weight"), D);
      if (il < mh.n_dense_lead) l.ffn = bind_dense_ffn(bind_, il, D, n_ff);
    }
    attention_ = Attention(gqa_attention_config(gqa_, c, RopeStyle::neox), B, info().n_ctx, opts_.threads);
    const RouterConfig rc{RouterConfig::Gating::softmax_topk, md.bool_or("expert_weights_norm", true), mh.n_expert,
                          mh.n_expert_used};
    moe_ = MoeLayers(file, bind_, c.n_layer, D, mh, rc, GluConfig{}, {}, B, opts.routing_override,
                     std::move(experts));
    if (n_ff > 0) ffn_ = DenseFfn(n_ff, B, GluConfig{});
    setup(DecoderSizes{std::max({D, gqa_.q_width(), mh.n_ff_exp, n_ff}), gqa_.kv_width(), {}});
  }

 private:
  struct Layer {
    std::vector<float> attn_norm;  // [n_embd]
    AttentionWeights attn;         // with q_norm, k_norm [head_dim]
    std::vector<float> ffn_norm;   // [n_embd]
    FfnWeights ffn;                // dense blocks only
  };

  bool layers_are_shared_blocks() const override { return true; }

  void layer(int64_t il, float* x, int64_t pos0, int64_t n_tok, int32_t* routing) override {
    const Layer& l = layers_[static_cast<size_t>(il)];
    attention_block(il, x, l.attn_norm, attention_, l.attn, pos0, n_tok);
    if (moe_.is_moe(il)) {
      moe_block(il, x, l.ffn_norm, n_tok, routing);
    } else {
      ffn_block(x, l.ffn_norm, ffn_, l.ffn, n_tok);
    }
  }

  GqaHparams gqa_;
  std::vector<Layer> layers_;  // [n_layer]
  Attention attention_;
  DenseFfn ffn_;  // the leading dense blocks' FFN
};

}  // namespace

std::unique_ptr<Model> make_qwen3moe(const gguf::GgufModel& file, const ModelOptions& opts,
                                     std::unique_ptr<moe::ExpertSource> experts) {
  const ArchMetadata md(file.metadata(), kArch);
  const CommonHparams c = read_common_hparams(file, md);
  return std::make_unique<Qwen3MoeModel>(file, md, c, opts, std::move(experts));
}

ArchSummary summarize_qwen3moe(const gguf::GgufModel& file) {
  const ArchMetadata md(file.metadata(), kArch);
  const CommonHparams c = read_common_hparams(file, md);
  return gqa_summary(c, read_gqa_hparams(file, md, c, HeadDim::key_length_or_width));
}

}  // namespace moetier::model
