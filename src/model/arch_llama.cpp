// Architecture "llama": Llama-style decoder (Touvron et al. 2023), dense SwiGLU FFN (stories260K), or the
// Mixtral layout (Jiang et al. 2024) when blk.*.ffn_gate_inp exists: 8-ish routed SwiGLU experts chosen by
// softmax -> top-k -> renormalise. Normal (GPT-J) RoPE pairing, no biases.
// Residual: x <- x + attn(norm(x)); x <- x + ffn(norm(x)). (The reference engine's snapshot added the normalised
// input after the MoE block; the oracle references were produced with the standard residual, as here.)
#include <algorithm>
#include <memory>
#include <vector>

#include "model/attention.h"
#include "model/decoder.h"
#include "model/ffn.h"
#include "model/moe_ffn.h"
#include "model/registry.h"
#include "model/rmsnorm.h"

namespace moetier::model {

namespace {

struct LlamaHparams {
  int64_t n_head = 0;      // attention.head_count
  int64_t n_head_kv = 0;   // attention.head_count_kv (default n_head)
  int64_t head_dim = 0;    // n_embd / n_head
  int64_t n_rot = 0;       // rope.dimension_count (default head_dim)
  float freq_base = 0;     // rope.freq_base (default 10000)
  int64_t n_ff = 0;        // feed_forward_length (dense FFN width)
  bool moe = false;        // blk.0.ffn_gate_inp.weight present
  int64_t n_expert = 0;    // expert_count
  int64_t n_expert_used = 0;
  int64_t n_ff_exp = 0;    // expert_feed_forward_length (default feed_forward_length)
};

LlamaHparams read_hparams(const gguf::GgufModel& file, const ArchMetadata& md, const CommonHparams& c,
                          const ModelOptions& opts) {
  LlamaHparams hp;
  hp.n_head = md.count("attention.head_count");
  hp.n_head_kv = md.count_or("attention.head_count_kv", hp.n_head);
  md.require(c.n_embd % hp.n_head == 0, "attention.head_count", hp.n_head, "a divisor of embedding_length");
  md.require(hp.n_head % hp.n_head_kv == 0, "attention.head_count_kv", hp.n_head_kv, "a divisor of head_count");
  hp.head_dim = c.n_embd / hp.n_head;
  hp.n_rot = md.count_or("rope.dimension_count", hp.head_dim);
  md.require(hp.n_rot % 2 == 0 && hp.n_rot <= hp.head_dim, "rope.dimension_count", hp.n_rot,
             "even and at most the head size");
  hp.freq_base = md.positive_float_or("rope.freq_base", 10000.0f);
  hp.n_ff = md.count("feed_forward_length");
  hp.moe = file.find("blk.0.ffn_gate_inp.weight") != nullptr;
  if (hp.moe) {
    hp.n_expert = md.count("expert_count");
    hp.n_expert_used = experts_used(md, hp.n_expert, opts);
    hp.n_ff_exp = md.count_or("expert_feed_forward_length", hp.n_ff);
  }
  return hp;
}

class LlamaModel final : public DecoderModel {
 public:
  LlamaModel(const gguf::GgufModel& file, const ArchMetadata& md, const CommonHparams& c, const ModelOptions& opts,
             std::unique_ptr<moe::ExpertSource> experts)
      : DecoderModel(file, c, opts), a_(read_hparams(file, md, c, opts)) {
    const int64_t D = c.n_embd, hd = a_.head_dim;
    AttentionConfig ac;
    ac.n_embd = D;
    ac.n_head = a_.n_head;
    ac.n_head_kv = a_.n_head_kv;
    ac.head_dim = hd;
    ac.norm_eps = c.norm_eps;
    ac.rope.style = RopeStyle::normal;
    ac.rope.n_rot = a_.n_rot;
    ac.rope.freq_base = a_.freq_base;
    layers_.resize(static_cast<size_t>(c.n_layer));
    for (int64_t il = 0; il < c.n_layer; ++il) {
      Layer& l = layers_[static_cast<size_t>(il)];
      l.attn_norm = bind_.vector(block_tensor(il, "attn_norm.weight"), D);
      l.attn.wq = bind_.matrix(block_tensor(il, "attn_q.weight"), D, a_.n_head * hd);
      l.attn.wk = bind_.matrix(block_tensor(il, "attn_k.weight"), D, a_.n_head_kv * hd);
      l.attn.wv = bind_.matrix(block_tensor(il, "attn_v.weight"), D, a_.n_head_kv * hd);
      l.attn.wo = bind_.matrix(block_tensor(il, "attn_output.weight"), a_.n_head * hd, D);
      l.ffn_norm = bind_.vector(block_tensor(il, "ffn_norm.weight"), D);
      if (a_.moe) {
        l.router.gate_inp = bind_.matrix(block_tensor(il, "ffn_gate_inp.weight"), D, a_.n_expert);
      } else {
        l.ffn.gate = bind_.matrix(block_tensor(il, "ffn_gate.weight"), D, a_.n_ff);
        l.ffn.up = bind_.matrix(block_tensor(il, "ffn_up.weight"), D, a_.n_ff);
        l.ffn.down = bind_.matrix(block_tensor(il, "ffn_down.weight"), a_.n_ff, D);
      }
    }
    const int64_t B = info().n_batch;
    attention_ = Attention(ac, B, info().n_ctx, opts_.threads);
    GluConfig glu;  // SwiGLU
    if (a_.moe) {
      experts_ = resolve_experts(file, moe::ExpertShape{c.n_layer, a_.n_expert, D, a_.n_ff_exp, false},
                                 std::move(experts));
      RouterConfig rc{RouterConfig::Gating::softmax_topk, true, a_.n_expert, a_.n_expert_used};
      moe_ = MoeFfn(rc, glu, D, a_.n_ff_exp, B);
      moe_.set_routing_override(opts.routing_override);
    } else {
      ffn_ = DenseFfn(a_.n_ff, B, glu);
    }
    setup(DecoderSizes{std::max({D, a_.n_head * hd, a_.n_ff, a_.n_ff_exp}), a_.n_head_kv * hd,
                       a_.moe ? c.n_layer : 0, a_.n_expert, a_.n_expert_used});
  }

 private:
  struct Layer {
    std::vector<float> attn_norm;  // [n_embd]
    AttentionWeights attn;
    std::vector<float> ffn_norm;  // [n_embd]
    FfnWeights ffn;               // dense layers
    RouterWeights router;         // MoE layers: gate_inp [n_expert, n_embd]
  };

  bool is_moe_layer(int64_t) const override { return a_.moe; }

  void layer(int64_t il, float* x, int64_t pos0, int64_t n_tok, int32_t* routing) override {
    const Layer& l = layers_[static_cast<size_t>(il)];
    attention_block(il, x, l.attn_norm, attention_, l.attn, pos0, n_tok);
    if (a_.moe) {
      moe_block(il, x, l.ffn_norm, moe_, l.router, *experts_, n_tok, routing);
    } else {
      ffn_block(x, l.ffn_norm, ffn_, l.ffn, n_tok);
    }
  }


  LlamaHparams a_;  // architecture hyperparameters
  std::vector<Layer> layers_;  // [n_layer]
  Attention attention_;
  DenseFfn ffn_;
  MoeFfn moe_;
  std::unique_ptr<moe::ExpertSource> experts_;
};

}  // namespace

std::unique_ptr<Model> make_llama(const gguf::GgufModel& file, const ModelOptions& opts,
                                  std::unique_ptr<moe::ExpertSource> experts) {
  const ArchMetadata md(file.metadata(), "llama");
  const CommonHparams c = read_common_hparams(file, md);
  return std::make_unique<LlamaModel>(file, md, c, opts, std::move(experts));
}

}  // namespace moetier::model
