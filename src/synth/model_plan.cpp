#include "synth/model_plan.h"

#include <cmath>

#include <fmt/format.h>

#include "util/error.h"

namespace moetier::synth {
namespace {

using quant::GgmlType;

bool is_k_quant(GgmlType t) {
  return t == GgmlType::Q2_K || t == GgmlType::Q3_K || t == GgmlType::Q4_K || t == GgmlType::Q5_K ||
         t == GgmlType::Q6_K || t == GgmlType::IQ4_XS;
}

// llama-quantize's use_more_bits(): the first and last eighth of the layers, and every third layer between.
bool more_bits(int64_t i, int64_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// A type whose block divides the row, falling back as llama-quantize does when it does not.
GgmlType fit(GgmlType t, int64_t ne0) {
  if (ne0 % quant::traits(t).block_size == 0) return t;
  if (ne0 % 32 == 0) return GgmlType::Q8_0;
  return GgmlType::F16;
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
  const std::string& a = s.arch;
  const bool gptoss = a == "gpt-oss";
  const bool qwen = a == "qwen3moe";
  const int64_t q_dim = s.n_head * s.head_dim;
  const int64_t kv_dim = s.n_head_kv * s.head_dim;

  auto& md = plan.metadata;
  md.set("general.architecture", gguf::Value::of_string(a));
  md.set("general.name", gguf::Value::of_string(s.display_name));
  auto u32 = [&](const std::string& k, int64_t v) { md.set(a + "." + k, gguf::Value::of_uint32(static_cast<uint32_t>(v))); };
  auto f32 = [&](const std::string& k, double v) { md.set(a + "." + k, gguf::Value::of_float32(static_cast<float>(v))); };
  u32("context_length", s.n_ctx_train);
  u32("embedding_length", s.n_embd);
  u32("block_count", s.n_layer);
  u32("feed_forward_length", s.n_ff);
  u32("attention.head_count", s.n_head);
  u32("attention.head_count_kv", s.n_head_kv);
  f32("rope.freq_base", s.rope_freq_base);
  f32("attention.layer_norm_rms_epsilon", s.rms_eps);
  u32("expert_count", s.n_expert);
  u32("expert_used_count", s.n_expert_used);
  if (s.n_dense_lead > 0) u32("leading_dense_block_count", s.n_dense_lead);
  if (a == "llama") {
    u32("rope.dimension_count", s.head_dim);
  } else {
    u32("attention.key_length", s.head_dim);
    u32("attention.value_length", s.head_dim);
    u32("expert_feed_forward_length", s.n_ff_exp);
  }
  if (gptoss) {
    u32("attention.sliding_window", s.sliding_window);
    md.set(a + ".rope.scaling.type", gguf::Value::of_string("yarn"));
    f32("rope.scaling.factor", s.yarn_factor);
    u32("rope.scaling.original_context_length", s.yarn_orig_ctx);
  }
  for (const auto& [k, v] : vocab.entries()) md.set(k, v);
  md.set("general.quantization_version", gguf::Value::of_uint32(2));
  md.set("general.file_type", gguf::Value::of_uint32(mix.file_type));

  auto add = [&](std::string name, GgmlType t, std::vector<int64_t> ne, Role role, float std, bool expert = false) {
    PlannedTensor p;
    p.spec.name = std::move(name);
    p.spec.type = role == Role::matrix ? fit(t, ne[0]) : GgmlType::F32;
    p.spec.ne = std::move(ne);
    p.role = role;
    p.std = std;
    p.routed_expert = expert;
    plan.total_bytes += p.spec.n_bytes();
    if (expert) plan.expert_bytes += p.spec.n_bytes();
    plan.tensors.push_back(std::move(p));
  };
  auto inv_sqrt = [](int64_t n) { return 1.0f / std::sqrt(static_cast<float>(n)); };

  add("token_embd.weight", mix.embd, {s.n_embd, n_vocab}, Role::matrix, 1.0f);
  for (int64_t i = 0; i < s.n_layer; ++i) {
    const std::string b = fmt::format("blk.{}.", i);
    const bool more = more_bits(i, s.n_layer);
    add(b + "attn_norm.weight", GgmlType::F32, {s.n_embd}, Role::norm, 0.1f);
    add(b + "attn_q.weight", mix.attn, {s.n_embd, q_dim}, Role::matrix, inv_sqrt(s.n_embd));
    if (gptoss) add(b + "attn_q.bias", GgmlType::F32, {q_dim}, Role::bias, 0.02f);
    add(b + "attn_k.weight", mix.attn, {s.n_embd, kv_dim}, Role::matrix, inv_sqrt(s.n_embd));
    if (gptoss) add(b + "attn_k.bias", GgmlType::F32, {kv_dim}, Role::bias, 0.02f);
    add(b + "attn_v.weight", more ? mix.attn_v_more : mix.attn, {s.n_embd, kv_dim}, Role::matrix, inv_sqrt(s.n_embd));
    if (gptoss) add(b + "attn_v.bias", GgmlType::F32, {kv_dim}, Role::bias, 0.02f);
    if (qwen) {
      add(b + "attn_q_norm.weight", GgmlType::F32, {s.head_dim}, Role::norm, 0.1f);
      add(b + "attn_k_norm.weight", GgmlType::F32, {s.head_dim}, Role::norm, 0.1f);
    }
    add(b + "attn_output.weight", mix.attn, {q_dim, s.n_embd}, Role::matrix, inv_sqrt(q_dim));
    if (gptoss) {
      add(b + "attn_output.bias", GgmlType::F32, {s.n_embd}, Role::bias, 0.02f);
      add(b + "attn_sinks.weight", GgmlType::F32, {s.n_head}, Role::sinks, 0.5f);
      add(b + "post_attention_norm.weight", GgmlType::F32, {s.n_embd}, Role::norm, 0.1f);
    } else {
      add(b + "ffn_norm.weight", GgmlType::F32, {s.n_embd}, Role::norm, 0.1f);
    }
    if (i < s.n_dense_lead) {  // a dense block: its FFN in place of the router and the experts
      add(b + "ffn_gate.weight", mix.attn, {s.n_embd, s.n_ff}, Role::matrix, inv_sqrt(s.n_embd));
      add(b + "ffn_up.weight", mix.attn, {s.n_embd, s.n_ff}, Role::matrix, inv_sqrt(s.n_embd));
      add(b + "ffn_down.weight", mix.attn, {s.n_ff, s.n_embd}, Role::matrix, inv_sqrt(s.n_ff));
      continue;
    }
    // Router logits = W x with x RMS-normalised: a std of 3 / sqrt(n_embd) spreads the logits by about 3, so the
    // top-k choice is decisive rather than a near-tie.
    add(b + "ffn_gate_inp.weight", GgmlType::F32, {s.n_embd, s.n_expert}, Role::router, 3.0f * inv_sqrt(s.n_embd));
    if (gptoss) add(b + "ffn_gate_inp.bias", GgmlType::F32, {s.n_expert}, Role::bias, 0.1f);
    add(b + "ffn_gate_exps.weight", mix.expert, {s.n_embd, s.n_ff_exp, s.n_expert}, Role::matrix, inv_sqrt(s.n_embd), true);
    if (gptoss) add(b + "ffn_gate_exps.bias", GgmlType::F32, {s.n_ff_exp, s.n_expert}, Role::bias, 0.02f, true);
    add(b + "ffn_up_exps.weight", mix.expert, {s.n_embd, s.n_ff_exp, s.n_expert}, Role::matrix, inv_sqrt(s.n_embd), true);
    if (gptoss) add(b + "ffn_up_exps.bias", GgmlType::F32, {s.n_ff_exp, s.n_expert}, Role::bias, 0.02f, true);
    add(b + "ffn_down_exps.weight", more ? mix.expert_more : mix.expert, {s.n_ff_exp, s.n_embd, s.n_expert},
        Role::matrix, inv_sqrt(s.n_ff_exp), true);
    if (gptoss) add(b + "ffn_down_exps.bias", GgmlType::F32, {s.n_embd, s.n_expert}, Role::bias, 0.02f, true);
  }
  add("output_norm.weight", GgmlType::F32, {s.n_embd}, Role::norm, 0.1f);
  add("output.weight", mix.output, {s.n_embd, n_vocab}, Role::matrix, inv_sqrt(s.n_embd));
  return plan;
}

}  // namespace moetier::synth
