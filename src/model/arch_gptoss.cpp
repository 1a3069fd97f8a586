// Architecture "gpt-oss" (OpenAI gpt-oss; model card and reference implementation, github.com/openai/gpt-oss):
//   - attention with biases on Q/K/V/output, one learned sink logit per head, NeoX RoPE with YaRN scaling
//     (rope.scaling.*), and a sliding window of attention.sliding_window keys on even layers (0, 2, ...),
//     full causal attention on odd layers;
//   - routed experts: router logits = gate_inp . x + bias, top-k on the logits, softmax over the chosen k;
//     clamped SwiGLU (alpha 1.702, limit 7, "(up + 1)") with biases on gate, up and down;
//   - the norm before the MoE block is named post_attention_norm.
#include <algorithm>
#include <memory>
#include <vector>

#include "model/attention.h"
#include "model/decoder.h"
#include "model/moe_ffn.h"
#include "model/registry.h"
#include "model/rmsnorm.h"
#include "util/error.h"

namespace moetier::model {

namespace {

// Clamped SwiGLU constants of gpt-oss (reference implementation's swiglu: alpha 1.702, limit 7.0); not stored in
// GGUF files.
constexpr float kSwigluAlpha = 1.702f;
constexpr float kSwigluLimit = 7.0f;

struct GptOssHparams {
  int64_t n_head = 0;         // attention.head_count
  int64_t n_head_kv = 0;      // attention.head_count_kv
  int64_t head_dim = 0;       // attention.key_length (value_length must match)
  float freq_base = 0;        // rope.freq_base
  float yarn_factor = 1;      // rope.scaling.factor when rope.scaling.type is "yarn"
  int64_t yarn_ctx_orig = 0;  // rope.scaling.original_context_length
  int64_t n_swa = 0;          // attention.sliding_window (keys per query on even layers)
  int64_t n_expert = 0;       // expert_count
  int64_t n_expert_used = 0;  // expert_used_count, or the override
  int64_t n_ff_exp = 0;       // expert_feed_forward_length
};

GptOssHparams read_hparams(const ArchMetadata& md, const CommonHparams& c, const ModelOptions& opts) {
  GptOssHparams hp;
  hp.n_head = md.count("attention.head_count");
  hp.n_head_kv = md.count_or("attention.head_count_kv", hp.n_head);
  md.require(hp.n_head % hp.n_head_kv == 0, "attention.head_count_kv", hp.n_head_kv, "a divisor of head_count");
  hp.head_dim = md.count("attention.key_length");
  md.require(hp.head_dim % 2 == 0, "attention.key_length", hp.head_dim, "even");
  const int64_t v_len = md.count_or("attention.value_length", hp.head_dim);
  md.require(v_len == hp.head_dim, "attention.value_length", v_len, "equal to attention.key_length");
  hp.freq_base = md.positive_float_or("rope.freq_base", 10000.0f);
  const std::string scaling = md.string_or("rope.scaling.type", "none");
  if (scaling == "yarn") {
    hp.yarn_factor = md.positive_float("rope.scaling.factor");
    hp.yarn_ctx_orig = md.count_or("rope.scaling.original_context_length", c.n_ctx_train);
  } else if (scaling != "none") {
    fail("metadata key '{}' is '{}', expected 'yarn' or 'none'", md.key("rope.scaling.type"), scaling);
  }
  hp.n_swa = md.count("attention.sliding_window");
  hp.n_expert = md.count("expert_count");
  hp.n_expert_used = experts_used(md, hp.n_expert, opts);
  hp.n_ff_exp = md.count("expert_feed_forward_length");
  return hp;
}

class GptOssModel final : public DecoderModel {
 public:
  GptOssModel(const gguf::GgufModel& file, const ArchMetadata& md, const CommonHparams& c, const ModelOptions& opts,
              std::unique_ptr<moe::ExpertSource> experts)
      : DecoderModel(file, c, opts), a_(read_hparams(md, c, opts)) {
    const int64_t D = c.n_embd, hd = a_.head_dim, nq = a_.n_head * hd, nkv = a_.n_head_kv * hd;
    AttentionConfig ac;
    ac.n_embd = D;
    ac.n_head = a_.n_head;
    ac.n_head_kv = a_.n_head_kv;
    ac.head_dim = hd;
    ac.norm_eps = c.norm_eps;
    ac.rope.style = RopeStyle::neox;
    ac.rope.n_rot = hd;
    ac.rope.freq_base = a_.freq_base;
    ac.rope.yarn_factor = a_.yarn_factor;
    ac.rope.yarn_n_ctx_orig = a_.yarn_ctx_orig;
    layers_.resize(static_cast<size_t>(c.n_layer));
    for (int64_t il = 0; il < c.n_layer; ++il) {
      Layer& l = layers_[static_cast<size_t>(il)];
      l.attn_norm = bind_.vector(block_tensor(il, "attn_norm.weight"), D);
      l.attn.wq = bind_.matrix(block_tensor(il, "attn_q.weight"), D, nq);
      l.attn.wk = bind_.matrix(block_tensor(il, "attn_k.weight"), D, nkv);
      l.attn.wv = bind_.matrix(block_tensor(il, "attn_v.weight"), D, nkv);
      l.attn.wo = bind_.matrix(block_tensor(il, "attn_output.weight"), nq, D);
      l.attn.bq = bind_.vector(block_tensor(il, "attn_q.bias"), nq);
      l.attn.bk = bind_.vector(block_tensor(il, "attn_k.bias"), nkv);
      l.attn.bv = bind_.vector(block_tensor(il, "attn_v.bias"), nkv);
      l.attn.bo = bind_.vector(block_tensor(il, "attn_output.bias"), D);
      l.attn.sinks = bind_.vector(block_tensor(il, "attn_sinks.weight"), a_.n_head);
      l.attn.sliding_window = il % 2 == 0 ? a_.n_swa : 0;
      l.post_attn_norm = bind_.vector(block_tensor(il, "post_attention_norm.weight"), D);
      l.router.gate_inp = bind_.matrix(block_tensor(il, "ffn_gate_inp.weight"), D, a_.n_expert);
      l.router.bias = bind_.vector(block_tensor(il, "ffn_gate_inp.bias"), a_.n_expert);
    }
    const int64_t B = info().n_batch;
    attention_ = Attention(ac, B, info().n_ctx, opts_.threads);
    experts_ = resolve_experts(file, moe::ExpertShape{c.n_layer, a_.n_expert, D, a_.n_ff_exp, true},
                               std::move(experts));
    RouterConfig rc{RouterConfig::Gating::topk_softmax, false, a_.n_expert, a_.n_expert_used};
    GluConfig glu{GluConfig::Kind::swiglu_oai, kSwigluAlpha, kSwigluLimit};
    moe_ = MoeFfn(rc, glu, D, a_.n_ff_exp, B);
    moe_.set_routing_override(opts.routing_override);
    setup(DecoderSizes{std::max({D, nq, a_.n_ff_exp}), nkv, c.n_layer, a_.n_expert, a_.n_expert_used});
  }

 private:
  struct Layer {
    std::vector<float> attn_norm;       // [n_embd]
    AttentionWeights attn;              // with biases, sinks [n_head], sliding_window on even layers
    std::vector<float> post_attn_norm;  // [n_embd]
    RouterWeights router;               // gate_inp [n_expert, n_embd], bias [n_expert]
  };

  bool is_moe_layer(int64_t) const override { return true; }

  void layer(int64_t il, float* x, int64_t pos0, int64_t n_tok, int32_t* routing) override {
    const Layer& l = layers_[static_cast<size_t>(il)];
    attention_block(il, x, l.attn_norm, attention_, l.attn, pos0, n_tok);
    moe_block(il, x, l.post_attn_norm, moe_, l.router, *experts_, n_tok, routing);
  }

  GptOssHparams a_;            // architecture hyperparameters
  std::vector<Layer> layers_;  // [n_layer]
  Attention attention_;
  MoeFfn moe_;
  std::unique_ptr<moe::ExpertSource> experts_;
};

}  // namespace

std::unique_ptr<Model> make_gptoss(const gguf::GgufModel& file, const ModelOptions& opts,
                                   std::unique_ptr<moe::ExpertSource> experts) {
  const ArchMetadata md(file.metadata(), "gpt-oss");
  const CommonHparams c = read_common_hparams(file, md);
  return std::make_unique<GptOssModel>(file, md, c, opts, std::move(experts));
}

}  // namespace moetier::model
