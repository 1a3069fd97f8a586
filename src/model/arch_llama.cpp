// Architecture "llama": Llama-style decoder (Touvron et al. 2023), dense SwiGLU FFN (stories260K), or the
// Mixtral layout (Jiang et al. 2024) when the file has an expert_count: 8-ish routed SwiGLU experts chosen by
// softmax -> top-k -> renormalise, in every block from leading_dense_block_count on (0 in Mixtral's files; the
// blocks before it keep the dense FFN). Normal (GPT-J) RoPE pairing, no biases.
// Residual: x <- x + attn(norm(x)); x <- x + ffn(norm(x)). (The reference engine's snapshot added the normalised
// input after the MoE block; the oracle references were produced with the standard residual, as here.)
#include <algorithm>
#include <memory>
#include <vector>

#include "model/attention.h"
#include "model/decoder.h"
#include "model/ffn.h"
#include "model/gqa.h"
#include "model/moe_layers.h"
#include "model/registry.h"

namespace moetier::model {

namespace {

constexpr const char* kArch = "llama";

class LlamaModel final : public DecoderModel {
 public:
  LlamaModel(const gguf::GgufModel& file, const ArchMetadata& md, const CommonHparams& c, const ModelOptions& opts,
             std::unique_ptr<moe::ExpertSource> experts)
      : DecoderModel(file, c, opts), gqa_(read_gqa_hparams(file, md, c, HeadDim::from_width)) {
    const int64_t D = c.n_embd, B = info().n_batch;
    // The dense FFN's width, and the experts' when the file has no expert_feed_forward_length (Mixtral).
    const int64_t n_ff = md.count("feed_forward_length");
    const bool moe = md.count_or("expert_count", 0, 0) > 0;
    const MoeHparams mh = moe ? read_moe_hparams(file, md, c, opts, n_ff) : MoeHparams{.n_dense_lead = c.n_layer};
    // Sizes buffers only where a dense block uses it.
    const int64_t n_ff_dense = mh.n_dense_lead > 0 ? n_ff : 0;
    if (n_ff_dense > 0) check_dense_ffn_length(file, md, 0, D, n_ff_dense);
    layers_.resize(static_cast<size_t>(c.n_layer));
    for (int64_t il = 0; il < c.n_layer; ++il) {
      Layer& l = layers_[static_cast<size_t>(il)];
      l.attn_norm = bind_.vector(gguf::block_tensor(il, "attn_norm.weight"), D);
      l.attn = bind_gqa_attention(bind_, il, gqa_, D, {});
      l.ffn_norm = bind_.vector(gguf::block_tensor(il, "ffn_norm.weight"), D);
      if (il < mh.n_dense_lead) l.ffn = bind_dense_ffn(bind_, il, D, n_ff);
    }
    attention_ = Attention(gqa_attention_config(gqa_, c, RopeStyle::normal), B, info().n_ctx, opts_.threads);
    const GluConfig glu;  // SwiGLU
    if (moe) {
      const RouterConfig rc{RouterConfig::Gating::softmax_topk, true, mh.n_expert, mh.n_expert_used};
      moe_ = MoeLayers(file, bind_, c.n_layer, D, mh, rc, glu, {}, B, opts.routing_override, std::move(experts));
    }
    if (n_ff_dense > 0) ffn_ = DenseFfn(n_ff_dense, B, glu);
    setup(DecoderSizes{std::max({D, gqa_.q_width(), n_ff_dense, mh.n_ff_exp}), gqa_.kv_width(), {}});
  }

 private:
  struct Layer {
    std::vector<float> attn_norm;  // [n_embd]
    AttentionWeights attn;
    std::vector<float> ffn_norm;  // [n_embd]
    FfnWeights ffn;               // dense blocks only
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
  DenseFfn ffn_;  // the dense blocks' FFN
};

}  // namespace

std::unique_ptr<Model> make_llama(const gguf::GgufModel& file, const ModelOptions& opts,
                                  std::unique_ptr<moe::ExpertSource> experts) {
  const ArchMetadata md(file.metadata(), kArch);
  const CommonHparams c = read_common_hparams(file, md);
  return std::make_unique<LlamaModel>(file, md, c, opts, std::move(experts));
}

ArchSummary summarize_llama(const gguf::GgufModel& file) {
  const ArchMetadata md(file.metadata(), kArch);
  const CommonHparams c = read_common_hparams(file, md);
  return gqa_summary(c, read_gqa_hparams(file, md, c, HeadDim::from_width));
}

}  // namespace moetier::model
