// Architecture "gemma4" in its mixture-of-experts form (Google Gemma 4, as Gemma-4-26B-A4B), as the reference
// engine computes it (llama.cpp src/models/gemma4*.cpp, src/llama-model.cpp):
//   - token embeddings scaled by sqrt(n_embd); tied output (token_embd) unless output.weight exists; the logits
//     soft-capped: c * tanh(logits / c), c = final_logit_softcapping;
//   - sliding-window layers (attention.sliding_window_pattern true: window attention.sliding_window, head size
//     key_length_swa, RoPE over rope.dimension_count_swa dims with base rope.freq_base_swa) and global layers (head
//     size key_length, RoPE over rope.dimension_count dims with base rope.freq_base and the frequency factors
//     rope_freqs.weight: "proportional" RoPE); head_count_kv may differ per layer (an array);
//   - attention: RMSNorm with gain on each query and key head (attn_q_norm, attn_k_norm), RMSNorm without gain on
//     each value head, V = K's projection on layers without attn_v, NeoX RoPE, score scale 1;
//   - sandwich norms and two FFNs side by side, on the block input x:
//       h    = x + RMSNorm(Attention(RMSNorm(x) * attn_norm)) * post_attention_norm
//       mlp  = RMSNorm(GEGLU-FFN(RMSNorm(h) * ffn_norm)) * post_ffw_norm_1                  (always on)
//       moe  = RMSNorm(MoE(RMSNorm(h) * pre_ffw_norm_2)) * post_ffw_norm_2
//       x'   = (h + RMSNorm(mlp + moe) * post_ffw_norm) * layer_output_scale
//     where the router reads RMSNorm(h) * ffn_gate_inp.scale / sqrt(n_embd) (softmax over all experts, top-k,
//     renormalised), the experts are GEGLU with gate and up merged in ffn_gate_up_exps, and expert e's output is
//     multiplied by ffn_down_exps.scale[e] before its routing weight.
// Gemma 4's dense forms (per-layer input embeddings, embedding_length_per_layer_input > 0) and KV sharing between
// layers (attention.shared_kv_layers > 0) are not this form and are refused.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "model/attention.h"
#include "model/decoder.h"
#include "model/moe_layers.h"
#include "model/registry.h"
#include "model/rmsnorm.h"
#include "util/error.h"

namespace moetier::model {

namespace {

constexpr const char* kArch = "gemma4";

// The attention of one kind of layer: sliding-window or global.
struct LayerKind {
  int64_t head_dim = 0;  // key_length[_swa]; value_length[_swa] must equal it
  int64_t n_rot = 0;     // rope.dimension_count[_swa]: even, at most head_dim
  float freq_base = 0;   // rope.freq_base[_swa]
};

// What sizes an Attention's buffers: layers of equal shape share one.
struct AttentionShape {
  bool sliding = false;
  int64_t n_head = 0, n_head_kv = 0;
  bool operator==(const AttentionShape&) const = default;
};

struct Gemma4Hparams {
  std::vector<int64_t> n_head;     // [n_layer]: attention.head_count (a count or a per-layer array)
  std::vector<int64_t> n_head_kv;  // [n_layer]: attention.head_count_kv (the same)
  std::vector<bool> swa;           // [n_layer]: attention.sliding_window_pattern
  LayerKind sliding, global;
  int64_t n_swa = 0;  // attention.sliding_window: keys per query on sliding layers, itself included
  float softcap = 0;  // final_logit_softcapping; 0 = none
  int64_t n_ff = 0;   // feed_forward_length: the always-on FFN's width

  const LayerKind& kind(int64_t il) const { return swa[static_cast<size_t>(il)] ? sliding : global; }
  int64_t heads(int64_t il) const { return n_head[static_cast<size_t>(il)]; }
  int64_t kv_heads(int64_t il) const { return n_head_kv[static_cast<size_t>(il)]; }
  int64_t q_width(int64_t il) const { return heads(il) * kind(il).head_dim; }
  int64_t kv_width(int64_t il) const { return kv_heads(il) * kind(il).head_dim; }
  AttentionShape shape(int64_t il) const { return {swa[static_cast<size_t>(il)], heads(il), kv_heads(il)}; }
};

// A key that is a count or an array of n_layer counts (>= 1), as llama.cpp's get_key_or_arr reads it.
std::vector<int64_t> per_layer_counts(const gguf::GgufModel& file, const ArchMetadata& md, const char* suffix,
                                      int64_t n_layer) {
  const gguf::Value& v = file.metadata().get(md.key(suffix));
  if (!v.is_array()) return std::vector<int64_t>(static_cast<size_t>(n_layer), md.count(suffix));
  const auto& a = v.as_array();
  if (static_cast<int64_t>(a.size()) != n_layer) {
    fail("metadata key '{}' has {} elements, expected one per block ({})", md.key(suffix), a.size(), n_layer);
  }
  std::vector<int64_t> out;
  for (const gguf::Value& e : a) {
    if (!e.is_integer() || e.as_int() < 1) {
      fail("metadata key '{}' holds {}, expected counts of at least 1", md.key(suffix), e.to_display());
    }
    out.push_back(e.as_int());
  }
  return out;
}

std::vector<bool> sliding_pattern(const gguf::GgufModel& file, const ArchMetadata& md, int64_t n_layer) {
  const std::string key = md.key("attention.sliding_window_pattern");
  const gguf::Value& v = file.metadata().get(key);
  if (!v.is_array() || v.elem_type != gguf::ValueType::BOOL || static_cast<int64_t>(v.as_array().size()) != n_layer) {
    fail("metadata key '{}' is {}, expected an array of {} booleans (one per block: true = sliding window)", key,
         v.to_display(), n_layer);
  }
  std::vector<bool> out;
  for (const gguf::Value& e : v.as_array()) out.push_back(e.as_bool());
  return out;
}

LayerKind read_kind(const ArchMetadata& md, const std::string& sfx, float base_fallback) {
  LayerKind k;
  k.head_dim = md.count("attention.key_length" + sfx);
  const int64_t v_len = md.count_or("attention.value_length" + sfx, k.head_dim);
  md.require(v_len == k.head_dim, "attention.value_length" + sfx, v_len, "equal to the key head size");
  k.n_rot = md.count_or("rope.dimension_count" + sfx, k.head_dim);
  md.require(k.n_rot % 2 == 0 && k.n_rot <= k.head_dim, "rope.dimension_count" + sfx, k.n_rot,
             "even and at most the head size");
  k.freq_base = md.positive_float_or("rope.freq_base" + sfx, base_fallback);
  return k;
}

// A key this form does not use must be absent or 0.
void require_zero(const ArchMetadata& md, const char* suffix, const char* why) {
  const int64_t v = md.count_or(suffix, 0, 0);
  md.require(v == 0, suffix, v, fmt::format("0 ({})", why));
}

// Block il's `tensor` must have `heads` x head size rows: checked by division before anything is sized by them.
void check_head_rows(const gguf::GgufModel& file, const ArchMetadata& md, int64_t il, const char* tensor,
                     const char* key, int64_t heads, int64_t head_dim, int64_t n_embd) {
  const std::string name = gguf::block_tensor(il, tensor);
  const gguf::TensorInfo* t = file.find(name);
  if (t == nullptr) fail("tensor '{}' is missing from {}", name, file.path().string());
  if (t->n_dims != 2 || t->ne[0] != n_embd || t->ne[1] % heads != 0 || t->ne[1] / heads != head_dim) {
    fail(
        "metadata key '{}' is {} with a head size of {} for block {}, but tensor '{}' has shape {}, expected "
        "[{}, {} x {}]",
        md.key(key), heads, head_dim, il, name, t->shape_string(), n_embd, key, head_dim);
  }
}

Gemma4Hparams read_gemma4_hparams(const gguf::GgufModel& file, const ArchMetadata& md, const CommonHparams& c) {
  Gemma4Hparams hp;
  require_zero(md, "attention.shared_kv_layers", "KV sharing between layers is not part of Gemma 4's MoE form");
  require_zero(md, "embedding_length_per_layer_input", "per-layer input embeddings are not part of Gemma 4's MoE form");
  hp.n_head = per_layer_counts(file, md, "attention.head_count", c.n_layer);
  hp.n_head_kv = per_layer_counts(file, md, "attention.head_count_kv", c.n_layer);
  hp.swa = sliding_pattern(file, md, c.n_layer);
  hp.global = read_kind(md, "", 10000.0f);
  hp.sliding = read_kind(md, "_swa", hp.global.freq_base);
  hp.n_swa = md.count("attention.sliding_window");
  const double cap = file.metadata().get_float_or(md.key("final_logit_softcapping"), 0.0);
  if (!std::isfinite(cap) || cap < 0.0) {
    fail("metadata key '{}' is {}, expected a finite value >= 0 (0: no cap)", md.key("final_logit_softcapping"), cap);
  }
  hp.softcap = static_cast<float>(cap);
  hp.n_ff = md.count("feed_forward_length");
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const int64_t nkv = hp.kv_heads(il);
    md.require(hp.heads(il) % nkv == 0, "attention.head_count_kv", nkv, "a divisor of head_count");
    const int64_t hd = hp.kind(il).head_dim;
    check_head_rows(file, md, il, "attn_q.weight", "attention.head_count", hp.heads(il), hd, c.n_embd);
    check_head_rows(file, md, il, "attn_k.weight", "attention.head_count_kv", nkv, hd, c.n_embd);
    check_dense_ffn_length(file, md, il, c.n_embd, hp.n_ff);
  }
  return hp;
}

class Gemma4Model final : public DecoderModel {
 public:
  Gemma4Model(const gguf::GgufModel& file, const ArchMetadata& md, const CommonHparams& c, const ModelOptions& opts,
              std::unique_ptr<moe::ExpertSource> experts)
      : DecoderModel(file, c, opts), g4_(read_gemma4_hparams(file, md, c)) {
    using gguf::block_tensor;
    const int64_t D = c.n_embd, B = info().n_batch, L = c.n_layer;
    const MoeHparams mh = read_moe_hparams(file, md, c, opts);
    md.require(mh.n_dense_lead == 0, "leading_dense_block_count", mh.n_dense_lead, "0 (every Gemma 4 block is MoE)");
    if (!mh.merged_gate_up) {
      fail("tensor '{}' is missing from {} (Gemma 4 keeps each expert's gate and up in one tensor)",
           block_tensor(0, "ffn_gate_up_exps.weight"), file.path().string());
    }
    const LayerKind& g = g4_.global;
    std::vector<float> freq_factors = bind_.vector("rope_freqs.weight", g.n_rot / 2);
    // One Attention per distinct (kind, n_head, n_head_kv): its buffers serve every layer of that shape.
    int64_t max_q = 0, max_kv = 0;
    std::vector<int64_t> kv_widths(static_cast<size_t>(L));
    layers_.resize(static_cast<size_t>(L));
    for (int64_t il = 0; il < L; ++il) {
      Layer& l = layers_[static_cast<size_t>(il)];
      const LayerKind& k = g4_.kind(il);
      const int64_t nkv = g4_.kv_heads(il);
      const bool swa = g4_.swa[static_cast<size_t>(il)];
      const int64_t nq = g4_.q_width(il), nk = g4_.kv_width(il);
      l.attn_norm = bind_.vector(block_tensor(il, "attn_norm.weight"), D);
      l.attn.wq = bind_.matrix(block_tensor(il, "attn_q.weight"), D, nq);
      l.attn.wk = bind_.matrix(block_tensor(il, "attn_k.weight"), D, nk);
      if (bind_.has(block_tensor(il, "attn_v.weight"))) {
        l.attn.wv = bind_.matrix(block_tensor(il, "attn_v.weight"), D, nk);
      }
      l.attn.wo = bind_.matrix(block_tensor(il, "attn_output.weight"), nq, D);
      l.attn.q_norm = bind_.vector(block_tensor(il, "attn_q_norm.weight"), k.head_dim);
      l.attn.k_norm = bind_.vector(block_tensor(il, "attn_k_norm.weight"), k.head_dim);
      l.attn.sliding_window = swa ? g4_.n_swa : 0;
      l.post_attn_norm = bind_.vector(block_tensor(il, "post_attention_norm.weight"), D);
      l.ffn_norm = bind_.vector(block_tensor(il, "ffn_norm.weight"), D);
      l.ffn = bind_dense_ffn(bind_, il, D, g4_.n_ff);
      l.post_ffw_norm_1 = bind_.vector(block_tensor(il, "post_ffw_norm_1.weight"), D);
      l.pre_ffw_norm_2 = bind_.vector(block_tensor(il, "pre_ffw_norm_2.weight"), D);
      // The router's input gain: ffn_gate_inp.scale / sqrt(n_embd) applied after an RMSNorm without gain.
      l.router_norm = bind_.vector(block_tensor(il, "ffn_gate_inp.scale"), D);
      const float inv_sqrt_d = 1.0f / std::sqrt(static_cast<float>(D));
      for (float& v : l.router_norm) v *= inv_sqrt_d;
      l.post_ffw_norm_2 = bind_.vector(block_tensor(il, "post_ffw_norm_2.weight"), D);
      l.post_ffw_norm = bind_.vector(block_tensor(il, "post_ffw_norm.weight"), D);
      // Optional in the reference engine: a block without it leaves its output unscaled.
      const std::vector<float> out_scale = bind_.optional_vector(block_tensor(il, "layer_output_scale.weight"), 1);
      l.out_scale = out_scale.empty() ? 1.0f : out_scale[0];

      AttentionConfig ac;
      ac.n_embd = D;
      ac.n_head = g4_.heads(il);
      ac.n_head_kv = nkv;
      ac.head_dim = k.head_dim;
      ac.norm_eps = c.norm_eps;
      ac.rope.style = RopeStyle::neox;
      ac.rope.n_rot = k.n_rot;
      ac.rope.freq_base = k.freq_base;
      if (!swa) ac.rope.freq_factors = freq_factors;
      ac.scale = 1.0f;
      ac.v_norm = true;
      l.attention = attention_for(ac, g4_.shape(il), B);
      max_q = std::max(max_q, nq);
      max_kv = std::max(max_kv, nk);
      kv_widths[static_cast<size_t>(il)] = nk;
    }
    const RouterConfig rc{RouterConfig::Gating::softmax_topk, true, mh.n_expert, mh.n_expert_used};
    const GluConfig geglu{.kind = GluConfig::Kind::geglu};
    moe_ = MoeLayers(file, bind_, L, D, mh, rc, geglu, {.expert_scale = true}, B, opts.routing_override,
                     std::move(experts));
    ffn_ = DenseFfn(g4_.n_ff, B, geglu);
    embd_scale_ = std::sqrt(static_cast<float>(D));
    logit_softcap_ = g4_.softcap;
    setup(DecoderSizes{std::max({D, max_q, mh.n_ff_exp, g4_.n_ff}), max_kv, kv_widths});
    xr_ = backend_->activations(static_cast<size_t>(B * D));
    moe_out_ = backend_->activations(static_cast<size_t>(B * D));
  }

 private:
  struct Layer {
    std::vector<float> attn_norm;        // [n_embd]
    AttentionWeights attn;               // q_norm, k_norm [head_dim]; wv empty on global layers (V = K)
    size_t attention = 0;                // index into attentions_ of this layer's shape
    std::vector<float> post_attn_norm;   // [n_embd]
    std::vector<float> ffn_norm;         // [n_embd]
    FfnWeights ffn;                      // gate, up [n_ff, n_embd], down [n_embd, n_ff]
    std::vector<float> post_ffw_norm_1;  // [n_embd]
    std::vector<float> pre_ffw_norm_2;   // [n_embd]
    std::vector<float> router_norm;      // [n_embd]: ffn_gate_inp.scale / sqrt(n_embd)
    std::vector<float> post_ffw_norm_2;  // [n_embd]
    std::vector<float> post_ffw_norm;    // [n_embd]
    float out_scale = 1.0f;              // layer_output_scale.weight [1], 1 when absent
  };

  // The index of the Attention for layers of `shape` (configured by `ac`), made on first use.
  size_t attention_for(const AttentionConfig& ac, const AttentionShape& shape, int64_t max_tok) {
    for (size_t i = 0; i < attention_shapes_.size(); ++i) {
      if (attention_shapes_[i] == shape) return i;
    }
    attention_shapes_.push_back(shape);
    attentions_.emplace_back(ac, max_tok, info().n_ctx, opts_.threads);
    return attentions_.size() - 1;
  }

  void layer(int64_t il, float* x, int64_t pos0, int64_t n_tok, int32_t* routing) override {
    const Layer& l = layers_[static_cast<size_t>(il)];
    const int64_t D = hp_.n_embd, n = n_tok * D;
    const float eps = hp_.norm_eps;
    float* xn = xn_.host();
    float* tmp = tmp_.host();
    float* xr = xr_.host();
    float* mo = moe_out_.host();
    // Attention with its sandwich norms: x becomes h.
    rms_norm(x, l.attn_norm.data(), xn, n_tok, D, eps);
    attentions_[l.attention].forward(l.attn, kv_[static_cast<size_t>(seq_)], il, xn, pos0, n_tok, tmp, *backend_);
    rms_norm(tmp, l.post_attn_norm.data(), tmp, n_tok, D, eps);
    add_residual(x, tmp, n);
    // The always-on FFN into tmp, the routed experts into mo, both from h.
    rms_norm(x, l.ffn_norm.data(), xn, n_tok, D, eps);
    ffn_.forward(l.ffn, xn, n_tok, tmp, *backend_);
    rms_norm(tmp, l.post_ffw_norm_1.data(), tmp, n_tok, D, eps);
    rms_norm(x, l.pre_ffw_norm_2.data(), xn, n_tok, D, eps);
    rms_norm(x, l.router_norm.data(), xr, n_tok, D, eps);
    moe_.forward(il, xn, n_tok, mo, routing, *backend_, xr);
    rms_norm(mo, l.post_ffw_norm_2.data(), mo, n_tok, D, eps);
    add_residual(tmp, mo, n);
    rms_norm(tmp, l.post_ffw_norm.data(), tmp, n_tok, D, eps);
    add_residual(x, tmp, n);
    for (int64_t i = 0; i < n; ++i) x[i] *= l.out_scale;
  }

  Gemma4Hparams g4_;
  std::vector<Layer> layers_;                     // [n_layer]
  std::vector<AttentionShape> attention_shapes_;  // the shape of each of attentions_
  std::vector<Attention> attentions_;
  DenseFfn ffn_;                  // the always-on GEGLU FFN of every block
  compute::Activations xr_;       // [n_batch, n_embd]: the router's input
  compute::Activations moe_out_;  // [n_batch, n_embd]: the routed experts' output
};

}  // namespace

std::unique_ptr<Model> make_gemma4(const gguf::GgufModel& file, const ModelOptions& opts,
                                   std::unique_ptr<moe::ExpertSource> experts) {
  const ArchMetadata md(file.metadata(), kArch);
  const CommonHparams c = read_common_hparams(file, md);
  return std::make_unique<Gemma4Model>(file, md, c, opts, std::move(experts));
}

ArchSummary summarize_gemma4(const gguf::GgufModel& file) {
  const ArchMetadata md(file.metadata(), kArch);
  const CommonHparams c = read_common_hparams(file, md);
  const Gemma4Hparams hp = read_gemma4_hparams(file, md, c);
  ArchSummary s;
  s.n_ctx_train = c.n_ctx_train;
  s.n_layer = c.n_layer;
  // Each layer's width is bounded by its attn_k's rows (checked above), so the sum of n_layer of them fits.
  std::vector<AttentionShape> shapes;
  for (int64_t il = 0; il < c.n_layer; ++il) {
    s.kv_elements_per_position += 2 * hp.kv_width(il);
    if (std::find(shapes.begin(), shapes.end(), hp.shape(il)) == shapes.end()) shapes.push_back(hp.shape(il));
  }
  // Every distinct layer shape has its own Attention and so its own score rows per thread: their sum is what the
  // model keeps (ArchSummary's bytes estimate), at least the most query heads of one KV head.
  s.max_query_heads_per_kv = 0;
  for (const AttentionShape& a : shapes) s.max_query_heads_per_kv += a.n_head / a.n_head_kv;
  return s;
}

}  // namespace moetier::model
