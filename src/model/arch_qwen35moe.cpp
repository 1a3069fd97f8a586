// Architecture "qwen35moe" (Qwen3.5 / Qwen3.6 MoE, Qwen team 2026; the reference engine's llama.cpp
// src/models/qwen35moe.cpp): a hybrid of linear and full attention. Every full_attention_interval-th block (blocks
// 3, 7, ... for the default 4) is grouped-query attention with QK-norm, partial RoPE and a per-head sigmoid output
// gate carried in attn_q (model/attention.h); the others are Gated DeltaNet linear attention (model/delta_net.h),
// whose per-sequence recurrent state lives in a RecurrentState beside the KV cache (model/recurrent_state.h).
// Every block's FFN is routed SwiGLU experts (softmax -> top-k -> renormalise) plus a sigmoid-gated shared expert
// (model/shared_expert.h). Each block: x <- x + Mix(RMSNorm(x) * attn_norm);
// x <- x + MoE(h) + SharedExpert(h) with h = RMSNorm(x) * post_attention_norm.
//
// RoPE: the file's rope.dimension_sections split the rotated pairs into interleaved time / height / width sections
// (IMRoPE, ggml's rope_multi); for text every section reads the token's position, which makes it NeoX RoPE over
// rope.dimension_count dimensions (pairs (i, i + n_rot/2), theta_i = pos * base^(-2i/n_rot)). The fourth section
// reads position 0 for text in the reference (no rotation): a file whose sections leave a rotated pair there is
// refused rather than approximated.
#include <algorithm>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "model/attention.h"
#include "model/decoder.h"
#include "model/delta_net.h"
#include "model/gqa.h"
#include "model/moe_layers.h"
#include "model/recurrent_state.h"
#include "model/registry.h"
#include "model/rmsnorm.h"
#include "model/shared_expert.h"
#include "quant/dequant_ref.h"
#include "quant/ggml_type.h"
#include "util/error.h"

namespace moetier::model {

namespace {

constexpr const char* kArch = "qwen35moe";

struct Qwen35Hparams {
  GqaHparams gqa;          // the full-attention blocks
  DeltaNetConfig dn;       // the linear-attention blocks
  int64_t interval = 4;    // full_attention_interval: block il is full attention iff (il + 1) % interval == 0
  int64_t n_ff_shexp = 0;  // expert_shared_feed_forward_length
  int64_t n_recurrent = 0;

  bool recurrent(int64_t il) const { return (il + 1) % interval != 0; }
};

// The rotated pairs must all read the token's position under IMRoPE's interleaving (see the file comment).
void check_rope_sections(const gguf::GgufModel& file, const ArchMetadata& md, int64_t n_rot) {
  const std::string key = md.key("rope.dimension_sections");
  if (!file.metadata().has(key)) return;
  const std::vector<int64_t> s = file.metadata().get_int_array(key);
  // Sections are pair counts: bounded here so that their sum and 3 x a section cannot overflow.
  constexpr int64_t kMaxSection = int64_t{1} << 20;
  int64_t sum = 0;
  bool in_range = s.size() == 3 || s.size() == 4;
  for (const int64_t x : s) {
    in_range = in_range && x >= 0 && x <= kMaxSection;
    if (in_range) sum += x;
  }
  if (!in_range || sum <= 0) {
    fail("metadata key '{}' holds {} values, expected 3 or 4 section sizes in 0..{} with a positive sum", key, s.size(),
         kMaxSection);
  }
  for (int64_t p = 0; p < n_rot / 2; ++p) {
    const int64_t sector = p % sum;
    const bool positional = (sector % 3 == 0 && sector < 3 * s[0]) || (sector % 3 == 1 && sector < 3 * s[1]) ||
                            (sector % 3 == 2 && sector < 3 * s[2]);
    if (!positional) {
      fail(
          "metadata key '{}' leaves rotated pair {} of {} on the extra section (position 0 for text), which moetier "
          "does not support",
          key, p, n_rot / 2);
    }
  }
}

// A head count, head size or state size: at least 1 and at most kMaxSize, so that the products sizing the
// projections and the recurrent state (2 x group_count x state_size + inner_size, (conv_kernel - 1) x that, ...)
// cannot overflow before the tensors' shapes are checked against them. Real files are far below it (Qwen3.5:
// state 128, 32 value heads, inner 4096, kernel 4).
constexpr int64_t kMaxSize = int64_t{1} << 20;
int64_t bounded_count(const ArchMetadata& md, const char* suffix) {
  const int64_t v = md.count(suffix);
  md.require(v <= kMaxSize, suffix, v, fmt::format("at most {}", kMaxSize));
  return v;
}

Qwen35Hparams read_qwen35_hparams(const gguf::GgufModel& file, const ArchMetadata& md, const CommonHparams& c) {
  Qwen35Hparams hp;
  hp.interval = md.count_or("full_attention_interval", 4);
  int64_t first_attn = -1, first_rec = -1;
  for (int64_t il = 0; il < c.n_layer; ++il) {
    if (hp.recurrent(il)) {
      ++hp.n_recurrent;
      if (first_rec < 0) first_rec = il;
    } else if (first_attn < 0) {
      first_attn = il;
    }
  }
  const int64_t D = c.n_embd;

  GqaHparams& g = hp.gqa;
  g.n_head = bounded_count(md, "attention.head_count");
  g.n_head_kv = md.has("attention.head_count_kv") ? bounded_count(md, "attention.head_count_kv") : g.n_head;
  md.require(g.n_head % g.n_head_kv == 0, "attention.head_count_kv", g.n_head_kv, "a divisor of head_count");
  g.head_dim = bounded_count(md, "attention.key_length");
  const int64_t v_len = md.count_or("attention.value_length", g.head_dim);
  md.require(v_len == g.head_dim, "attention.value_length", v_len, "equal to attention.key_length");
  g.n_rot = md.count_or("rope.dimension_count", g.head_dim);
  md.require(g.n_rot % 2 == 0 && g.n_rot <= g.head_dim, "rope.dimension_count", g.n_rot,
             "even and at most the head size");
  g.freq_base = md.positive_float_or("rope.freq_base", 10000.0f);
  check_rope_sections(file, md, g.n_rot);
  if (first_attn >= 0) {
    // attn_q holds each head's query and gate: 2 x head_count x head size rows.
    int64_t rows = 0;
    if (__builtin_mul_overflow(2 * g.n_head, g.head_dim, &rows)) fail("{} x {} overflows", g.n_head, g.head_dim);
    check_shape(file, md, "attention.head_count", g.n_head, gguf::block_tensor(first_attn, "attn_q.weight"), {D, rows},
                fmt::format("[{}, {}] (n_embd, 2 x head_count x key_length)", D, rows));
    check_shape(file, md, "attention.head_count_kv", g.n_head_kv, gguf::block_tensor(first_attn, "attn_k.weight"),
                {D, g.n_head_kv * g.head_dim},
                fmt::format("[{}, {}] (n_embd, head_count_kv x key_length)", D, g.n_head_kv * g.head_dim));
  }

  DeltaNetConfig& dn = hp.dn;
  dn.n_embd = D;
  dn.norm_eps = c.norm_eps;
  if (hp.n_recurrent > 0) {
    dn.conv_kernel = bounded_count(md, "ssm.conv_kernel");
    dn.head_k_dim = bounded_count(md, "ssm.state_size");
    dn.n_k_heads = bounded_count(md, "ssm.group_count");
    dn.n_v_heads = bounded_count(md, "ssm.time_step_rank");
    md.require(dn.n_v_heads % dn.n_k_heads == 0, "ssm.time_step_rank", dn.n_v_heads,
               "a multiple of ssm.group_count (value heads share key heads)");
    const int64_t inner = bounded_count(md, "ssm.inner_size");
    md.require(inner % dn.n_v_heads == 0, "ssm.inner_size", inner, "a multiple of ssm.time_step_rank");
    dn.head_v_dim = inner / dn.n_v_heads;
    check_shape(file, md, "ssm.inner_size", inner, gguf::block_tensor(first_rec, "attn_qkv.weight"), {D, dn.conv_dim()},
                fmt::format("[{}, {}] (n_embd, 2 x group_count x state_size + inner_size)", D, dn.conv_dim()));
    check_shape(file, md, "ssm.conv_kernel", dn.conv_kernel, gguf::block_tensor(first_rec, "ssm_conv1d.weight"),
                {dn.conv_kernel, dn.conv_dim()},
                fmt::format("[{}, {}] (conv_kernel, channels)", dn.conv_kernel, dn.conv_dim()));
  }
  hp.n_ff_shexp = md.has("expert_shared_feed_forward_length") ? md.count("expert_shared_feed_forward_length")
                                                              : md.count("feed_forward_length");
  check_shape(file, md, "expert_shared_feed_forward_length", hp.n_ff_shexp,
              gguf::block_tensor(0, "ffn_up_shexp.weight"), {D, hp.n_ff_shexp},
              fmt::format("[{}, {}] (n_embd, expert_shared_feed_forward_length)", D, hp.n_ff_shexp));
  return hp;
}

DeltaNetWeights bind_delta_net(const gguf::TensorBinder& bind, int64_t il, const DeltaNetConfig& cfg) {
  using gguf::block_tensor;
  const int64_t D = cfg.n_embd;
  DeltaNetWeights w;
  w.qkv = bind.matrix(block_tensor(il, "attn_qkv.weight"), D, cfg.conv_dim());
  w.gate = bind.matrix(block_tensor(il, "attn_gate.weight"), D, cfg.value_dim());
  w.beta = bind.matrix(block_tensor(il, "ssm_beta.weight"), D, cfg.n_v_heads);
  w.alpha = bind.matrix(block_tensor(il, "ssm_alpha.weight"), D, cfg.n_v_heads);
  const gguf::TensorInfo& conv = bind.tensor(block_tensor(il, "ssm_conv1d.weight"), {cfg.conv_kernel, cfg.conv_dim()});
  w.conv.resize(static_cast<size_t>(cfg.conv_kernel * cfg.conv_dim()));
  for (int64_t ch = 0; ch < cfg.conv_dim(); ++ch) {
    const size_t off = quant::row_bytes(conv.type, cfg.conv_kernel) * static_cast<size_t>(ch);
    quant::dequantize_row_ref(conv.type, conv.data + off, w.conv.data() + ch * cfg.conv_kernel, cfg.conv_kernel);
  }
  w.dt_bias = bind.vector(block_tensor(il, "ssm_dt.bias"), cfg.n_v_heads);
  w.a = bind.vector(block_tensor(il, "ssm_a"), cfg.n_v_heads);
  w.norm = bind.vector(block_tensor(il, "ssm_norm.weight"), cfg.head_v_dim);
  w.out = bind.matrix(block_tensor(il, "ssm_out.weight"), cfg.value_dim(), D);
  return w;
}

AttentionWeights bind_gated_attention(const gguf::TensorBinder& bind, int64_t il, const GqaHparams& hp, int64_t D) {
  using gguf::block_tensor;
  AttentionWeights w;
  w.wq = bind.matrix(block_tensor(il, "attn_q.weight"), D, 2 * hp.q_width());
  w.wk = bind.matrix(block_tensor(il, "attn_k.weight"), D, hp.kv_width());
  w.wv = bind.matrix(block_tensor(il, "attn_v.weight"), D, hp.kv_width());
  w.wo = bind.matrix(block_tensor(il, "attn_output.weight"), hp.q_width(), D);
  w.q_norm = bind.vector(block_tensor(il, "attn_q_norm.weight"), hp.head_dim);
  w.k_norm = bind.vector(block_tensor(il, "attn_k_norm.weight"), hp.head_dim);
  return w;
}

// Each block's KV cache row width: the attention blocks' n_head_kv x head_dim, and the narrowest row the cache
// allows (1 element, never written) for the DeltaNet blocks, which keep a RecurrentState instead.
std::vector<int64_t> kv_widths(const Qwen35Hparams& hp, int64_t n_layer) {
  std::vector<int64_t> w(static_cast<size_t>(n_layer));
  for (int64_t il = 0; il < n_layer; ++il) w[static_cast<size_t>(il)] = hp.recurrent(il) ? 1 : hp.gqa.kv_width();
  return w;
}

class Qwen35MoeModel final : public DecoderModel {
 public:
  Qwen35MoeModel(const gguf::GgufModel& file, const ArchMetadata& md, const CommonHparams& c, const ModelOptions& opts,
                 std::unique_ptr<moe::ExpertSource> experts)
      : DecoderModel(file, c, opts), qp_(read_qwen35_hparams(file, md, c)) {
    const int64_t D = c.n_embd, B = info().n_batch;
    const MoeHparams mh = read_moe_hparams(file, md, c, opts);
    md.require(mh.n_dense_lead == 0, "leading_dense_block_count", mh.n_dense_lead, "0 (every block has experts)");
    layers_.resize(static_cast<size_t>(c.n_layer));
    int64_t n_rec = 0;
    for (int64_t il = 0; il < c.n_layer; ++il) {
      Layer& l = layers_[static_cast<size_t>(il)];
      l.attn_norm = bind_.vector(gguf::block_tensor(il, "attn_norm.weight"), D);
      if (qp_.recurrent(il)) {
        l.recurrent = n_rec++;
        l.dn = bind_delta_net(bind_, il, qp_.dn);
      } else {
        l.attn = bind_gated_attention(bind_, il, qp_.gqa, D);
      }
      l.ffn_norm = bind_.vector(gguf::block_tensor(il, "post_attention_norm.weight"), D);
      l.shexp = bind_shared_expert(bind_, file, il, D, qp_.n_ff_shexp);
    }
    if (n_rec < c.n_layer) {
      AttentionConfig ac = gqa_attention_config(qp_.gqa, c, RopeStyle::neox);
      ac.output_gate = true;
      attention_ = Attention(ac, B, info().n_ctx, opts_.threads);
    }
    if (n_rec > 0) {
      delta_ = DeltaNet(qp_.dn, B, opts_.threads);
      for (int q = 0; q < opts.n_seq; ++q)
        state_.emplace_back(n_rec, qp_.dn.conv_state_elems(), qp_.dn.ssm_state_elems());
    }
    const RouterConfig rc{RouterConfig::Gating::softmax_topk, md.bool_or("expert_weights_norm", true), mh.n_expert,
                          mh.n_expert_used};
    moe_ = MoeLayers(file, bind_, c.n_layer, D, mh, rc, GluConfig{}, {}, B, opts.routing_override, std::move(experts));
    shexp_ = SharedExpert(qp_.n_ff_shexp, B);
    shexp_out_.assign(static_cast<size_t>(B * D), 0.0f);
    setup(DecoderSizes{std::max({D, qp_.gqa.q_width(), qp_.dn.value_dim(), mh.n_ff_exp, qp_.n_ff_shexp}),
                       qp_.gqa.kv_width(), kv_widths(qp_, c.n_layer)});
  }

  bool can_keep(int64_t n_keep, int64_t n_past) const override {
    return qp_.n_recurrent == 0 || n_keep == n_past || n_keep == 0;
  }

 private:
  struct Layer {
    std::vector<float> attn_norm;  // [n_embd]
    int64_t recurrent = -1;        // ordinal among the DeltaNet blocks (its RecurrentState layer), -1: attention
    DeltaNetWeights dn;            // DeltaNet blocks
    AttentionWeights attn;         // attention blocks: wq [2 x n_head x head_dim, n_embd], q_norm, k_norm
    std::vector<float> ffn_norm;   // [n_embd] (post_attention_norm)
    SharedExpertWeights shexp;
  };

  void layer(int64_t il, float* x, int64_t pos0, int64_t n_tok, int32_t* routing) override {
    const Layer& l = layers_[static_cast<size_t>(il)];
    const int64_t D = qp_.dn.n_embd;
    if (l.recurrent >= 0) {
      RecurrentState& s = state_[static_cast<size_t>(seq_)];
      s.begin(l.recurrent, pos0);
      rms_norm(x, l.attn_norm.data(), xn_.host(), n_tok, D, qp_.dn.norm_eps);
      delta_.forward(l.dn, s.conv(l.recurrent), s.ssm(l.recurrent), xn_.host(), n_tok, tmp_.host(), *backend_);
      s.advance(l.recurrent, n_tok);
      add_residual(x, tmp_.host(), n_tok * D);
    } else {
      attention_block(il, x, l.attn_norm, attention_, l.attn, pos0, n_tok);
    }
    // The routed experts' and the shared expert's outputs are summed before they join the residual, as the
    // reference adds them.
    rms_norm(x, l.ffn_norm.data(), xn_.host(), n_tok, D, qp_.dn.norm_eps);
    moe_.forward(il, xn_.host(), n_tok, tmp_.host(), routing, *backend_);
    shexp_.forward(l.shexp, xn_.host(), n_tok, shexp_out_.data(), *backend_);
    add_residual(tmp_.host(), shexp_out_.data(), n_tok * D);
    add_residual(x, tmp_.host(), n_tok * D);
  }

  Qwen35Hparams qp_;
  std::vector<Layer> layers_;  // [n_layer]
  Attention attention_;
  DeltaNet delta_;
  std::vector<RecurrentState> state_;  // [n_seq]: each sequence's DeltaNet states
  SharedExpert shexp_;
  std::vector<float> shexp_out_;  // [n_batch, n_embd]: the shared expert's output
};

}  // namespace

std::unique_ptr<Model> make_qwen35moe(const gguf::GgufModel& file, const ModelOptions& opts,
                                      std::unique_ptr<moe::ExpertSource> experts) {
  const ArchMetadata md(file.metadata(), kArch);
  const CommonHparams c = read_common_hparams(file, md);
  return std::make_unique<Qwen35MoeModel>(file, md, c, opts, std::move(experts));
}

ArchSummary summarize_qwen35moe(const gguf::GgufModel& file) {
  const ArchMetadata md(file.metadata(), kArch);
  const CommonHparams c = read_common_hparams(file, md);
  const Qwen35Hparams hp = read_qwen35_hparams(file, md, c);
  ArchSummary s = gqa_summary(c, hp.gqa);
  int64_t per_position = 0;
  for (const int64_t w : kv_widths(hp, c.n_layer)) per_position += 2 * w;  // K and V; bounded by the tensors
  s.kv_elements_per_position = per_position;
  // Bounded like the KV widths: the DeltaNet sizes are checked against the tensors by read_qwen35_hparams.
  s.recurrent_floats_per_sequence = hp.n_recurrent * (hp.dn.conv_state_elems() + hp.dn.ssm_state_elems());
  return s;
}

}  // namespace moetier::model
