// Architecture "qwen3moe" (Qwen3 MoE, Qwen team 2025): grouped-query attention with RMSNorm of every query and key
// head before RoPE ("QK-norm"), NeoX RoPE pairing, head size from attention.key_length (may differ from
// n_embd / n_head), and routed SwiGLU experts chosen by softmax -> top-k -> renormalise (norm_topk_prob; the
// file may say otherwise with <arch>.expert_weights_norm). No biases, no shared expert.
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

struct Qwen3MoeHparams {
  int64_t n_head = 0;        // attention.head_count
  int64_t n_head_kv = 0;     // attention.head_count_kv (default n_head)
  int64_t head_dim = 0;      // attention.key_length (default n_embd / n_head); value_length must match
  int64_t n_rot = 0;         // rope.dimension_count (default head_dim)
  float freq_base = 0;       // rope.freq_base (default 10000)
  int64_t n_expert = 0;      // expert_count
  int64_t n_expert_used = 0; // expert_used_count, or the override
  int64_t n_ff_exp = 0;      // expert_feed_forward_length
  bool norm_topk = true;     // expert_weights_norm (default true: Qwen3-MoE's norm_topk_prob)
};

Qwen3MoeHparams read_hparams(const ArchMetadata& md, const CommonHparams& c, const ModelOptions& opts) {
  Qwen3MoeHparams hp;
  hp.n_head = md.count("attention.head_count");
  hp.n_head_kv = md.count_or("attention.head_count_kv", hp.n_head);
  md.require(hp.n_head % hp.n_head_kv == 0, "attention.head_count_kv", hp.n_head_kv, "a divisor of head_count");
  hp.head_dim = md.count_or("attention.key_length", c.n_embd / hp.n_head);
  const int64_t v_len = md.count_or("attention.value_length", hp.head_dim);
  md.require(v_len == hp.head_dim, "attention.value_length", v_len, "equal to attention.key_length");
  hp.n_rot = md.count_or("rope.dimension_count", hp.head_dim);
  md.require(hp.n_rot % 2 == 0 && hp.n_rot <= hp.head_dim, "rope.dimension_count", hp.n_rot,
             "even and at most the head size");
  hp.freq_base = md.positive_float_or("rope.freq_base", 10000.0f);
  hp.n_expert = md.count("expert_count");
  hp.n_expert_used = experts_used(md, hp.n_expert, opts);
  hp.n_ff_exp = md.count("expert_feed_forward_length");
  hp.norm_topk = md.bool_or("expert_weights_norm", true);
  return hp;
}

class Qwen3MoeModel final : public DecoderModel {
 public:
  Qwen3MoeModel(const gguf::GgufModel& file, const ArchMetadata& md, const CommonHparams& c,
                const ModelOptions& opts, std::unique_ptr<moe::ExpertSource> experts)
      : DecoderModel(file, c, opts), a_(read_hparams(md, c, opts)) {
    const int64_t D = c.n_embd, hd = a_.head_dim, nq = a_.n_head * hd, nkv = a_.n_head_kv * hd;
    AttentionConfig ac;
    ac.n_embd = D;
    ac.n_head = a_.n_head;
    ac.n_head_kv = a_.n_head_kv;
    ac.head_dim = hd;
    ac.norm_eps = c.norm_eps;
    ac.rope.style = RopeStyle::neox;
    ac.rope.n_rot = a_.n_rot;
    ac.rope.freq_base = a_.freq_base;
    layers_.resize(static_cast<size_t>(c.n_layer));
    for (int64_t il = 0; il < c.n_layer; ++il) {
      Layer& l = layers_[static_cast<size_t>(il)];
      l.attn_norm = bind_.vector(block_tensor(il, "attn_norm.weight"), D);
      l.attn.wq = bind_.matrix(block_tensor(il, "attn_q.weight"), D, nq);
      l.attn.wk = bind_.matrix(block_tensor(il, "attn_k.weight"), D, nkv);
      l.attn.wv = bind_.matrix(block_tensor(il, "attn_v.weight"), D, nkv);
      l.attn.wo = bind_.matrix(block_tensor(il, "attn_output.weight"), nq, D);
      l.attn.q_norm = bind_.vector(block_tensor(il, "attn_q_norm.weight"), hd);
      l.attn.k_norm = bind_.vector(block_tensor(il, "attn_k_norm.weight"), hd);
      l.ffn_norm = bind_.vector(block_tensor(il, "ffn_norm.weight"), D);
      l.router.gate_inp = bind_.matrix(block_tensor(il, "ffn_gate_inp.weight"), D, a_.n_expert);
    }
    const int64_t B = info().n_batch;
    attention_ = Attention(ac, B, info().n_ctx, opts_.threads);
    experts_ = resolve_experts(file, moe::ExpertShape{c.n_layer, a_.n_expert, D, a_.n_ff_exp, false},
                               std::move(experts));
    RouterConfig rc{RouterConfig::Gating::softmax_topk, a_.norm_topk, a_.n_expert, a_.n_expert_used};
    moe_ = MoeFfn(rc, GluConfig{}, D, a_.n_ff_exp, B);
    moe_.set_routing_override(opts.routing_override);
    setup(DecoderSizes{std::max({D, nq, a_.n_ff_exp}), nkv, c.n_layer, a_.n_expert, a_.n_expert_used});
  }

 private:
  struct Layer {
    std::vector<float> attn_norm;  // [n_embd]
    AttentionWeights attn;         // with q_norm, k_norm [head_dim]
    std::vector<float> ffn_norm;   // [n_embd]
    RouterWeights router;          // gate_inp [n_expert, n_embd]
  };

  bool is_moe_layer(int64_t) const override { return true; }

  void layer(int64_t il, float* x, int64_t pos0, int64_t n_tok, int32_t* routing) override {
    const Layer& l = layers_[static_cast<size_t>(il)];
    attention_block(il, x, l.attn_norm, attention_, l.attn, pos0, n_tok);
    moe_block(il, x, l.ffn_norm, moe_, l.router, *experts_, n_tok, routing);
  }

  Qwen3MoeHparams a_;          // architecture hyperparameters
  std::vector<Layer> layers_;  // [n_layer]
  Attention attention_;
  MoeFfn moe_;
  std::unique_ptr<moe::ExpertSource> experts_;
};

}  // namespace

std::unique_ptr<Model> make_qwen3moe(const gguf::GgufModel& file, const ModelOptions& opts,
                                     std::unique_ptr<moe::ExpertSource> experts) {
  const ArchMetadata md(file.metadata(), "qwen3moe");
  const CommonHparams c = read_common_hparams(file, md);
  return std::make_unique<Qwen3MoeModel>(file, md, c, opts, std::move(experts));
}

}  // namespace moetier::model
