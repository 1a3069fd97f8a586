// Architecture "gpt-oss" (OpenAI gpt-oss; model card and reference implementation, github.com/openai/gpt-oss):
//   - attention with biases on Q/K/V/output, one learned sink logit per head, NeoX RoPE with YaRN scaling
//     (rope.scaling.*), and a sliding window of attention.sliding_window keys on even layers (0, 2, ...),
//     full causal attention on odd layers;
//   - routed experts in every block: router logits = gate_inp . x + bias, top-k on the logits, softmax over the
//     chosen k; clamped SwiGLU (alpha 1.702, limit 7, "(up + 1)") with biases on gate, up and down;
//   - the norm before the MoE block is named post_attention_norm.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "model/attention.h"
#include "model/decoder.h"
#include "model/gqa.h"
#include "model/moe_layers.h"
#include "model/registry.h"
#include "util/error.h"

namespace moetier::model {

namespace {

constexpr const char* kArch = "gpt-oss";

// Clamped SwiGLU constants of gpt-oss (reference implementation's swiglu: alpha 1.702, limit 7.0); not stored in
// GGUF files.
constexpr float kSwigluAlpha = 1.702f;
constexpr float kSwigluLimit = 7.0f;

// YaRN context extension (rope.scaling.type "yarn"), applied to every layer's RoPE.
struct Yarn {
  float factor = 1;      // rope.scaling.factor
  int64_t ctx_orig = 0;  // rope.scaling.original_context_length (default context_length)
};

Yarn read_yarn(const ArchMetadata& md, const CommonHparams& c) {
  Yarn y;
  const std::string scaling = md.string_or("rope.scaling.type", "none");
  if (scaling == "yarn") {
    y.factor = md.positive_float("rope.scaling.factor");
    y.ctx_orig = md.count_or("rope.scaling.original_context_length", c.n_ctx_train);
  } else if (scaling != "none") {
    fail("metadata key '{}' is '{}', expected 'yarn' or 'none'", md.key("rope.scaling.type"), scaling);
  }
  return y;
}

class GptOssModel final : public DecoderModel {
 public:
  GptOssModel(const gguf::GgufModel& file, const ArchMetadata& md, const CommonHparams& c, const ModelOptions& opts,
              std::unique_ptr<moe::ExpertSource> experts)
      : DecoderModel(file, c, opts), gqa_(read_gqa_hparams(file, md, c, HeadDim::key_length, RopeDims::whole_head)) {
    const int64_t D = c.n_embd, B = info().n_batch;
    const Yarn yarn = read_yarn(md, c);
    const int64_t n_swa = md.count("attention.sliding_window");  // keys per query on even layers
    md.require(n_swa <= c.n_ctx_train, "attention.sliding_window", n_swa, "at most context_length");
    const MoeHparams mh = read_moe_hparams(file, md, c, opts);
    md.require(mh.n_dense_lead == 0, "leading_dense_block_count", mh.n_dense_lead, "0 (every gpt-oss block is MoE)");
    layers_.resize(static_cast<size_t>(c.n_layer));
    for (int64_t il = 0; il < c.n_layer; ++il) {
      Layer& l = layers_[static_cast<size_t>(il)];
      l.attn_norm = bind_.vector(gguf::block_tensor(il, "attn_norm.weight"), D);
      l.attn = bind_gqa_attention(bind_, il, gqa_, D, {.biases = true, .sinks = true});
      l.attn.sliding_window = il % 2 == 0 ? n_swa : 0;
      l.post_attn_norm = bind_.vector(gguf::block_tensor(il, "post_attention_norm.weight"), D);
    }
    AttentionConfig ac = gqa_attention_config(gqa_, c, RopeStyle::neox);
    ac.rope.yarn_factor = yarn.factor;
    ac.rope.yarn_n_ctx_orig = yarn.ctx_orig;
    attention_ = Attention(ac, B, info().n_ctx, opts_.threads);
    const RouterConfig rc{RouterConfig::Gating::topk_softmax, false, mh.n_expert, mh.n_expert_used};
    const GluConfig glu{GluConfig::Kind::swiglu_oai, kSwigluAlpha, kSwigluLimit};
    moe_ = MoeLayers(file, bind_, c.n_layer, D, mh, rc, glu, {.router_bias = true, .expert_bias = true}, B,
                     opts.routing_override, std::move(experts));
    setup(DecoderSizes{std::max({D, gqa_.q_width(), mh.n_ff_exp}), gqa_.kv_width(), {}});
  }

 private:
  struct Layer {
    std::vector<float> attn_norm;       // [n_embd]
    AttentionWeights attn;              // with biases, sinks [n_head], sliding_window on even layers
    std::vector<float> post_attn_norm;  // [n_embd]
  };

  bool layers_are_shared_blocks() const override { return true; }

  void layer(int64_t il, float* x, int64_t pos0, int64_t n_tok, int32_t* routing) override {
    const Layer& l = layers_[static_cast<size_t>(il)];
    attention_block(il, x, l.attn_norm, attention_, l.attn, pos0, n_tok);
    moe_block(il, x, l.post_attn_norm, n_tok, routing);
  }

  GqaHparams gqa_;
  std::vector<Layer> layers_;  // [n_layer]
  Attention attention_;
};

}  // namespace

std::unique_ptr<Model> make_gptoss(const gguf::GgufModel& file, const ModelOptions& opts,
                                   std::unique_ptr<moe::ExpertSource> experts) {
  const ArchMetadata md(file.metadata(), kArch);
  const CommonHparams c = read_common_hparams(file, md);
  return std::make_unique<GptOssModel>(file, md, c, opts, std::move(experts));
}

ArchSummary summarize_gptoss(const gguf::GgufModel& file) {
  const ArchMetadata md(file.metadata(), kArch);
  const CommonHparams c = read_common_hparams(file, md);
  return gqa_summary(c, read_gqa_hparams(file, md, c, HeadDim::key_length, RopeDims::whole_head));
}

}  // namespace moetier::model
