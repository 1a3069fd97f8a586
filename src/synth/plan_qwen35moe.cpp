// qwen35moe (Qwen3.5 MoE, e.g. Qwen3.5-35B-A3B): tensor names, shapes and metadata as llama.cpp's conversion
// writes them (the layout of ../shared/oracle/incoming/qwen35moe's tiny file). Blocks are Gated DeltaNet linear
// attention except every full_attention_interval-th, which is gated full attention; every block's FFN is routed
// experts plus a sigmoid-gated shared expert.
//
// Value roles (neutral where the architecture has a neutral value): the conversion stores every RMSNorm gain
// with HF's +1 folded in (ssm_norm, the DeltaNet output norm, is a plain gain), so 1 is neutral for all of them;
// ssm_a is -exp(A_log), a negative decay rate; ssm_dt.bias is added to the time-step logit before softplus.
#include <fmt/format.h>

#include <utility>

#include "synth/plan_builder.h"

namespace moetier::synth {

void plan_qwen35moe(const ModelShape& s, const QuantMix& mix, const gguf::Metadata& vocab, int64_t n_vocab,
                    ModelPlan& plan) {
  PlanBuilder b(s, mix, plan, s.n_layer);  // one attn_qkv or attn_v per block
  const auto inv_sqrt = PlanBuilder::inv_sqrt;

  b.general_head();
  b.u32("context_length", s.n_ctx_train);
  b.u32("embedding_length", s.n_embd);
  b.u32("block_count", s.n_layer);
  b.u32("feed_forward_length", s.n_ff);
  b.u32("expert_feed_forward_length", s.n_ff_exp);
  b.u32("expert_shared_feed_forward_length", s.n_ff_shexp);
  b.u32("expert_count", s.n_expert);
  b.u32("expert_used_count", s.n_expert_used);
  b.u32("attention.head_count", s.n_head);
  b.u32("attention.head_count_kv", s.n_head_kv);
  b.u32("attention.key_length", s.head_dim);
  b.u32("attention.value_length", s.head_dim);
  b.f32("attention.layer_norm_rms_epsilon", s.rms_eps);
  b.u32("rope.dimension_count", s.n_rot);
  b.i32_array("rope.dimension_sections", s.rope_sections);
  b.f32("rope.freq_base", s.rope_freq_base);
  b.u32("full_attention_interval", s.full_attn_interval);
  b.u32("ssm.conv_kernel", s.ssm_conv_kernel);
  b.u32("ssm.state_size", s.ssm_state_size);
  b.u32("ssm.group_count", s.ssm_group_count);
  b.u32("ssm.time_step_rank", s.ssm_time_step_rank);
  b.u32("ssm.inner_size", s.ssm_inner_size);
  b.general_tail(vocab);

  auto norm = [&](std::string name, int64_t n) { b.f32_tensor(std::move(name), {n}, Role::norm, 0.1f, 1.0f); };
  const int64_t q_dim = s.n_head * s.head_dim;
  const int64_t kv_dim = s.n_head_kv * s.head_dim;
  const int64_t key_dim = s.ssm_group_count * s.ssm_state_size;  // all key heads
  const int64_t conv_dim = 2 * key_dim + s.ssm_inner_size;       // q, k and v through the causal conv
  const int64_t v_head_dim = s.ssm_inner_size / s.ssm_time_step_rank;

  b.matrix("token_embd.weight", mix.embd, {s.n_embd, n_vocab}, 1.0f);
  for (int64_t i = 0; i < s.n_layer; ++i) {
    const std::string p = fmt::format("blk.{}.", i);
    norm(p + "attn_norm.weight", s.n_embd);
    norm(p + "post_attention_norm.weight", s.n_embd);
    if (s.is_recurrent(i)) {
      // Gated DeltaNet: q, k, v in one projection [n_embd, conv_dim], the output gate z [n_embd, inner].
      b.matrix(p + "attn_qkv.weight", b.next_attn_v_type(), {s.n_embd, conv_dim}, inv_sqrt(s.n_embd));
      b.matrix(p + "attn_gate.weight", mix.attn, {s.n_embd, s.ssm_inner_size}, inv_sqrt(s.n_embd));
      // Depthwise causal conv taps [conv_kernel, conv_dim]: a std of 1 / sqrt(taps) keeps unit gain.
      b.f32_tensor(p + "ssm_conv1d.weight", {s.ssm_conv_kernel, conv_dim}, Role::bias, inv_sqrt(s.ssm_conv_kernel));
      // Per value head: decay g = ssm_a * softplus(alpha + dt_bias), alpha ~ N(0, 1) from ssm_alpha. dt_bias near
      // 1 and ssm_a in [-1.43, -0.57] (always negative) give a per-token decay exp(g) near 0.27 (0.05 to 0.85):
      // a state that neither vanishes at once nor grows.
      b.f32_tensor(p + "ssm_dt.bias", {s.ssm_time_step_rank}, Role::gain, 0.1f, 1.0f);
      b.f32_tensor(p + "ssm_a", {s.ssm_time_step_rank}, Role::gain, 0.25f, -1.0f);
      // beta (write strength, through a sigmoid) and alpha (time step) per value head: [n_embd, value heads].
      b.matrix(p + "ssm_beta.weight", mix.attn, {s.n_embd, s.ssm_time_step_rank}, inv_sqrt(s.n_embd));
      b.matrix(p + "ssm_alpha.weight", mix.attn, {s.n_embd, s.ssm_time_step_rank}, inv_sqrt(s.n_embd));
      norm(p + "ssm_norm.weight", v_head_dim);
      b.matrix(p + "ssm_out.weight", mix.attn, {s.ssm_inner_size, s.n_embd}, inv_sqrt(s.ssm_inner_size));
    } else {
      // Gated full attention: attn_q yields the query and the output gate, [n_embd, 2 x n_head x head_dim].
      b.matrix(p + "attn_q.weight", mix.attn, {s.n_embd, 2 * q_dim}, inv_sqrt(s.n_embd));
      b.matrix(p + "attn_k.weight", mix.attn, {s.n_embd, kv_dim}, inv_sqrt(s.n_embd));
      b.matrix(p + "attn_v.weight", b.next_attn_v_type(), {s.n_embd, kv_dim}, inv_sqrt(s.n_embd));
      norm(p + "attn_q_norm.weight", s.head_dim);
      norm(p + "attn_k_norm.weight", s.head_dim);
      b.matrix(p + "attn_output.weight", mix.attn, {q_dim, s.n_embd}, inv_sqrt(q_dim));
    }
    // Router logits = W x with x RMS-normalised: a std of 3 / sqrt(n_embd) spreads the logits by about 3.
    b.f32_tensor(p + "ffn_gate_inp.weight", {s.n_embd, s.n_expert}, Role::router, 3.0f * inv_sqrt(s.n_embd));
    b.matrix(p + "ffn_gate_exps.weight", mix.expert, {s.n_embd, s.n_ff_exp, s.n_expert}, inv_sqrt(s.n_embd), true);
    b.matrix(p + "ffn_up_exps.weight", mix.expert, {s.n_embd, s.n_ff_exp, s.n_expert}, inv_sqrt(s.n_embd), true);
    b.matrix(p + "ffn_down_exps.weight", b.ffn_down_type(i, true), {s.n_ff_exp, s.n_embd, s.n_expert},
             inv_sqrt(s.n_ff_exp), true);
    // Shared expert, gated by sigmoid(w . x) with w [n_embd]: a std of 1 / sqrt(n_embd) spreads the gate logit by 1.
    b.f32_tensor(p + "ffn_gate_inp_shexp.weight", {s.n_embd}, Role::router, inv_sqrt(s.n_embd));
    b.matrix(p + "ffn_gate_shexp.weight", mix.attn, {s.n_embd, s.n_ff_shexp}, inv_sqrt(s.n_embd));
    b.matrix(p + "ffn_up_shexp.weight", mix.attn, {s.n_embd, s.n_ff_shexp}, inv_sqrt(s.n_embd));
    b.matrix(p + "ffn_down_shexp.weight", b.ffn_down_type(i, false), {s.n_ff_shexp, s.n_embd}, inv_sqrt(s.n_ff_shexp));
  }
  norm("output_norm.weight", s.n_embd);
  b.matrix("output.weight", mix.output, {s.n_embd, n_vocab}, inv_sqrt(s.n_embd));
}

}  // namespace moetier::synth
