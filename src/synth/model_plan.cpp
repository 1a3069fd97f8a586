#include "synth/model_plan.h"

#include <utility>

#include <fmt/format.h>

#include "synth/plan_builder.h"
#include "util/error.h"

namespace moetier::synth {
namespace {

using quant::GgmlType;

bool is_k_quant(GgmlType t) {
  return t == GgmlType::Q2_K || t == GgmlType::Q3_K || t == GgmlType::Q4_K || t == GgmlType::Q5_K ||
         t == GgmlType::Q6_K || t == GgmlType::IQ4_XS;
}

// qwen3moe, gpt-oss and llama (Mixtral): one attention and one MoE FFN per block.
void plan_transformer(const ModelShape& s, const QuantMix& mix, const gguf::Metadata& vocab, int64_t n_vocab,
                      ModelPlan& plan) {
  const std::string& a = s.arch;
  const bool gptoss = a == "gpt-oss";
  const bool qwen = a == "qwen3moe";
  const int64_t q_dim = s.n_head * s.head_dim;
  const int64_t kv_dim = s.n_head_kv * s.head_dim;
  PlanBuilder b(s, mix, plan, s.n_layer);
  const auto inv_sqrt = PlanBuilder::inv_sqrt;

  b.general_head();
  b.u32("context_length", s.n_ctx_train);
  b.u32("embedding_length", s.n_embd);
  b.u32("block_count", s.n_layer);
  b.u32("feed_forward_length", s.n_ff);
  b.u32("attention.head_count", s.n_head);
  b.u32("attention.head_count_kv", s.n_head_kv);
  b.f32("rope.freq_base", s.rope_freq_base);
  b.f32("attention.layer_norm_rms_epsilon", s.rms_eps);
  b.u32("expert_count", s.n_expert);
  b.u32("expert_used_count", s.n_expert_used);
  if (s.n_dense_lead > 0) b.u32("leading_dense_block_count", s.n_dense_lead);
  if (a == "llama") {
    b.u32("rope.dimension_count", s.head_dim);
  } else {
    b.u32("attention.key_length", s.head_dim);
    b.u32("attention.value_length", s.head_dim);
    b.u32("expert_feed_forward_length", s.n_ff_exp);
  }
  if (gptoss) {
    b.u32("attention.sliding_window", s.sliding_window);
    plan.metadata.set(a + ".rope.scaling.type", gguf::Value::of_string("yarn"));
    b.f32("rope.scaling.factor", s.yarn_factor);
    b.u32("rope.scaling.original_context_length", s.yarn_orig_ctx);
  }
  b.general_tail(vocab);

  auto norm = [&](std::string name, int64_t n) { b.f32_tensor(std::move(name), {n}, Role::norm, 0.1f, 1.0f); };
  auto bias = [&](std::string name, std::vector<int64_t> ne, float std, bool expert = false) {
    b.f32_tensor(std::move(name), std::move(ne), Role::bias, std, 0.0f, expert);
  };

  b.matrix("token_embd.weight", mix.embd, {s.n_embd, n_vocab}, 1.0f);
  for (int64_t i = 0; i < s.n_layer; ++i) {
    const std::string p = fmt::format("blk.{}.", i);
    norm(p + "attn_norm.weight", s.n_embd);
    b.matrix(p + "attn_q.weight", mix.attn, {s.n_embd, q_dim}, inv_sqrt(s.n_embd));
    if (gptoss) bias(p + "attn_q.bias", {q_dim}, 0.02f);
    b.matrix(p + "attn_k.weight", mix.attn, {s.n_embd, kv_dim}, inv_sqrt(s.n_embd));
    if (gptoss) bias(p + "attn_k.bias", {kv_dim}, 0.02f);
    b.matrix(p + "attn_v.weight", b.next_attn_v_type(), {s.n_embd, kv_dim}, inv_sqrt(s.n_embd));
    if (gptoss) bias(p + "attn_v.bias", {kv_dim}, 0.02f);
    if (qwen) {
      norm(p + "attn_q_norm.weight", s.head_dim);
      norm(p + "attn_k_norm.weight", s.head_dim);
    }
    b.matrix(p + "attn_output.weight", mix.attn, {q_dim, s.n_embd}, inv_sqrt(q_dim));
    if (gptoss) {
      bias(p + "attn_output.bias", {s.n_embd}, 0.02f);
      b.f32_tensor(p + "attn_sinks.weight", {s.n_head}, Role::sinks, 0.5f);
      norm(p + "post_attention_norm.weight", s.n_embd);
    } else {
      norm(p + "ffn_norm.weight", s.n_embd);
    }
    if (i < s.n_dense_lead) {  // a dense block: its FFN in place of the router and the experts
      b.matrix(p + "ffn_gate.weight", mix.attn, {s.n_embd, s.n_ff}, inv_sqrt(s.n_embd));
      b.matrix(p + "ffn_up.weight", mix.attn, {s.n_embd, s.n_ff}, inv_sqrt(s.n_embd));
      b.matrix(p + "ffn_down.weight", mix.attn, {s.n_ff, s.n_embd}, inv_sqrt(s.n_ff));
      continue;
    }
    // Router logits = W x with x RMS-normalised: a std of 3 / sqrt(n_embd) spreads the logits by about 3, so the
    // top-k choice is decisive rather than a near-tie.
    b.f32_tensor(p + "ffn_gate_inp.weight", {s.n_embd, s.n_expert}, Role::router, 3.0f * inv_sqrt(s.n_embd));
    if (gptoss) bias(p + "ffn_gate_inp.bias", {s.n_expert}, 0.1f);
    b.matrix(p + "ffn_gate_exps.weight", mix.expert, {s.n_embd, s.n_ff_exp, s.n_expert}, inv_sqrt(s.n_embd), true);
    if (gptoss) bias(p + "ffn_gate_exps.bias", {s.n_ff_exp, s.n_expert}, 0.02f, true);
    b.matrix(p + "ffn_up_exps.weight", mix.expert, {s.n_embd, s.n_ff_exp, s.n_expert}, inv_sqrt(s.n_embd), true);
    if (gptoss) bias(p + "ffn_up_exps.bias", {s.n_ff_exp, s.n_expert}, 0.02f, true);
    b.matrix(p + "ffn_down_exps.weight", b.ffn_down_type(i, true), {s.n_ff_exp, s.n_embd, s.n_expert},
             inv_sqrt(s.n_ff_exp), true);
    if (gptoss) bias(p + "ffn_down_exps.bias", {s.n_embd, s.n_expert}, 0.02f, true);
  }
  norm("output_norm.weight", s.n_embd);
  b.matrix("output.weight", mix.output, {s.n_embd, n_vocab}, inv_sqrt(s.n_embd));
}

}  // namespace

QuantMix parse_quant_mix(const std::string& name) {
  QuantMix m;
  m.name = name;
  if (name == "Q4_K_M" || name == "q4_k_m") {
    m = {"Q4_K_M", GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q4_K, GgmlType::Q6_K, 15};
    return m;
  }
  if (name == "Q5_K_M" || name == "q5_k_m") {
    m = {"Q5_K_M", GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q5_K, GgmlType::Q6_K, 17};
    return m;
  }
  const auto t = quant::parse_type(name);
  if (!t || !quant::traits(*t).can_dequantize)
    fail("--type '{}' is not a quant mix moetier can synthesize; use Q4_K_M, Q5_K_M or one of F32, F16, BF16, "
         "Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4",
         name);
  m.name = std::string(quant::type_name(*t));
  m.expert = m.expert_more = m.embd = *t;
  m.attn = m.attn_v_more = *t == GgmlType::MXFP4 ? GgmlType::Q8_0 : *t;
  if (*t == GgmlType::MXFP4) {
    m.embd = m.output = GgmlType::Q8_0;
    m.file_type = 38;  // LLAMA_FTYPE_MOSTLY_MXFP4_MOE
  } else {
    m.output = is_k_quant(*t) && *t != GgmlType::Q6_K ? GgmlType::Q6_K : *t;
    m.file_type = 0;
  }
  return m;
}

ModelPlan plan_model(const ModelShape& s, const QuantMix& mix, const gguf::Metadata& vocab) {
  ModelPlan plan;
  const int64_t n_vocab = static_cast<int64_t>(vocab.get_string_array("tokenizer.ggml.tokens").size());
  if (s.arch == "gemma4")
    plan_gemma4(s, mix, vocab, n_vocab, plan);
  else if (s.arch == "qwen35moe")
    plan_qwen35moe(s, mix, vocab, n_vocab, plan);
  else
    plan_transformer(s, mix, vocab, n_vocab, plan);
  return plan;
}

}  // namespace moetier::synth
