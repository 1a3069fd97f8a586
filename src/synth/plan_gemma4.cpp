// gemma4 (MoE form, e.g. Gemma-4-26B-A4B): tensor names, shapes and metadata as llama.cpp's conversion writes
// them (the layout of ../shared/oracle/incoming/gemma4's tiny file; the forward pass that reads them is llama.cpp's
// src/models/gemma4-iswa.cpp). Per block: attention (sliding-window blocks with their own K/V head count and head
// size; full blocks without attn_v, V being K), then a dense GELU FFN and the routed experts side by side, each
// with its own pre and post norms, their sum post-normed, and the block output scaled by layer_output_scale.
#include <fmt/format.h>

#include <utility>

#include "synth/plan_builder.h"

namespace moetier::synth {

void plan_gemma4(const ModelShape& s, const QuantMix& mix, const gguf::Metadata& vocab, int64_t n_vocab,
                 ModelPlan& plan) {
  int64_t n_swa = 0;
  for (int64_t i = 0; i < s.n_layer; ++i) n_swa += s.is_swa(i) ? 1 : 0;
  PlanBuilder b(s, mix, plan, n_swa);  // attn_v only in the sliding-window blocks
  const auto inv_sqrt = PlanBuilder::inv_sqrt;

  std::vector<int64_t> head_count_kv;
  std::vector<bool> swa_pattern;
  for (int64_t i = 0; i < s.n_layer; ++i) {
    head_count_kv.push_back(s.is_swa(i) ? s.n_head_kv_swa : s.n_head_kv);
    swa_pattern.push_back(s.is_swa(i));
  }
  b.general_head();
  b.u32("context_length", s.n_ctx_train);
  b.u32("embedding_length", s.n_embd);
  b.u32("block_count", s.n_layer);
  b.u32("feed_forward_length", s.n_ff);
  b.u32("expert_feed_forward_length", s.n_ff_exp);
  b.u32("expert_count", s.n_expert);
  b.u32("expert_used_count", s.n_expert_used);
  b.u32("attention.head_count", s.n_head);
  b.u32_array("attention.head_count_kv", head_count_kv);
  b.u32("attention.key_length", s.head_dim);
  b.u32("attention.value_length", s.head_dim);
  b.u32("attention.key_length_swa", s.head_dim_swa);
  b.u32("attention.value_length_swa", s.head_dim_swa);
  b.f32("attention.layer_norm_rms_epsilon", s.rms_eps);
  b.u32("attention.sliding_window", s.sliding_window);
  b.bool_array("attention.sliding_window_pattern", swa_pattern);
  b.u32("attention.shared_kv_layers", 0);        // every block has its own K/V (the 26B does)
  b.u32("embedding_length_per_layer_input", 0);  // no per-layer embeddings (only the small E2B/E4B have them)
  b.u32("rope.dimension_count", s.head_dim);
  b.u32("rope.dimension_count_swa", s.head_dim_swa);
  b.f32("rope.freq_base", s.rope_freq_base);
  b.f32("rope.freq_base_swa", s.rope_freq_base_swa);
  b.f32("final_logit_softcapping", s.final_logit_softcap);
  b.general_tail(vocab);

  auto norm = [&](std::string name, int64_t n) { b.f32_tensor(std::move(name), {n}, Role::norm, 0.1f, 1.0f); };
  // Tied embeddings: token_embd is also the output matrix, so it takes the output's type (llama-quantize) and
  // the output's scale; the graph multiplies the looked-up row by sqrt(n_embd), which brings it back to unit RMS.
  b.matrix("token_embd.weight", mix.output, {s.n_embd, n_vocab}, inv_sqrt(s.n_embd));
  // Full-attention blocks rotate rope_partial of each head's pairs (proportional RoPE): [head_dim / 2].
  const int64_t n_pairs = s.head_dim / 2;
  b.rope_freqs("rope_freqs.weight", n_pairs, static_cast<int64_t>(s.rope_partial * static_cast<double>(n_pairs)));
  for (int64_t i = 0; i < s.n_layer; ++i) {
    const std::string p = fmt::format("blk.{}.", i);
    const bool swa = s.is_swa(i);
    const int64_t hd = swa ? s.head_dim_swa : s.head_dim;
    const int64_t q_dim = s.n_head * hd;
    const int64_t kv_dim = (swa ? s.n_head_kv_swa : s.n_head_kv) * hd;
    norm(p + "attn_norm.weight", s.n_embd);
    b.matrix(p + "attn_q.weight", mix.attn, {s.n_embd, q_dim}, inv_sqrt(s.n_embd));  // [n_embd, n_head * hd]
    b.matrix(p + "attn_k.weight", mix.attn, {s.n_embd, kv_dim}, inv_sqrt(s.n_embd));
    if (swa) b.matrix(p + "attn_v.weight", b.next_attn_v_type(), {s.n_embd, kv_dim}, inv_sqrt(s.n_embd));
    norm(p + "attn_q_norm.weight", hd);
    norm(p + "attn_k_norm.weight", hd);
    b.matrix(p + "attn_output.weight", mix.attn, {q_dim, s.n_embd}, inv_sqrt(q_dim));
    norm(p + "post_attention_norm.weight", s.n_embd);
    // The dense FFN beside the experts.
    norm(p + "ffn_norm.weight", s.n_embd);
    b.matrix(p + "ffn_gate.weight", mix.attn, {s.n_embd, s.n_ff}, inv_sqrt(s.n_embd));
    b.matrix(p + "ffn_up.weight", mix.attn, {s.n_embd, s.n_ff}, inv_sqrt(s.n_embd));
    b.matrix(p + "ffn_down.weight", b.ffn_down_type(i, false), {s.n_ff, s.n_embd}, inv_sqrt(s.n_ff));
    norm(p + "post_ffw_norm_1.weight", s.n_embd);
    // Router: logits = W (rms_norm(x) / sqrt(n_embd) * scale). A scale near sqrt(n_embd) gives W a unit-RMS
    // input, and W's std of 3 / sqrt(n_embd) then spreads the logits by about 3: a decisive top-k.
    b.f32_tensor(p + "ffn_gate_inp.weight", {s.n_embd, s.n_expert}, Role::router, 3.0f * inv_sqrt(s.n_embd));
    const float root = 1.0f / inv_sqrt(s.n_embd);
    b.f32_tensor(p + "ffn_gate_inp.scale", {s.n_embd}, Role::gain, 0.1f * root, root);
    norm(p + "pre_ffw_norm_2.weight", s.n_embd);
    // Gate and up of each expert fused: [n_embd, 2 x n_ff_exp, n_expert].
    b.matrix(p + "ffn_gate_up_exps.weight", mix.expert, {s.n_embd, 2 * s.n_ff_exp, s.n_expert}, inv_sqrt(s.n_embd),
             true);
    b.matrix(p + "ffn_down_exps.weight", b.ffn_down_type(i, true), {s.n_ff_exp, s.n_embd, s.n_expert},
             inv_sqrt(s.n_ff_exp), true);
    b.f32_tensor(p + "ffn_down_exps.scale", {s.n_expert}, Role::gain, 0.1f, 1.0f);  // per-expert output scale
    norm(p + "post_ffw_norm_2.weight", s.n_embd);
    norm(p + "post_ffw_norm.weight", s.n_embd);
    b.f32_tensor(p + "layer_output_scale.weight", {1}, Role::gain, 0.05f, 1.0f);  // multiplies the block output
  }
  norm("output_norm.weight", s.n_embd);
}

}  // namespace moetier::synth
