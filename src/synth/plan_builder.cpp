#include "synth/plan_builder.h"

#include <utility>

namespace moetier::synth {
namespace {

using quant::GgmlType;

// llama-quantize's use_more_bits(): the first and last eighth of the layers, and every third layer between.
bool more_bits(int64_t i, int64_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

}  // namespace

GgmlType fit_type(GgmlType t, int64_t ne0) {
  if (ne0 % quant::traits(t).block_size == 0) return t;
  GgmlType f = GgmlType::Q8_0;
  switch (t) {
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
      f = GgmlType::Q4_0;
      break;
    case GgmlType::Q4_K:
      f = GgmlType::Q5_0;
      break;
    case GgmlType::Q5_K:
      f = GgmlType::Q5_1;
      break;
    case GgmlType::IQ4_XS:
      f = GgmlType::IQ4_NL;
      break;
    default:
      break;  // Q6_K -> Q8_0 as llama-quantize; other types have no fallback there (it refuses them)
  }
  return ne0 % quant::traits(f).block_size == 0 ? f : GgmlType::F16;
}

PlanBuilder::PlanBuilder(const ModelShape& s, const QuantMix& mix, ModelPlan& plan, int64_t n_attn_v)
    : s_(s), mix_(mix), plan_(plan), n_attn_v_(n_attn_v) {}

void PlanBuilder::u32(const std::string& key, int64_t v) {
  plan_.metadata.set(s_.arch + "." + key, gguf::Value::of_uint32(static_cast<uint32_t>(v)));
}

void PlanBuilder::f32(const std::string& key, double v) {
  plan_.metadata.set(s_.arch + "." + key, gguf::Value::of_float32(static_cast<float>(v)));
}

void PlanBuilder::u32_array(const std::string& key, const std::vector<int64_t>& v) {
  std::vector<gguf::Value> e;
  for (int64_t x : v) e.push_back(gguf::Value::of_uint32(static_cast<uint32_t>(x)));
  plan_.metadata.set(s_.arch + "." + key, gguf::Value::of_array(gguf::ValueType::UINT32, std::move(e)));
}

void PlanBuilder::bool_array(const std::string& key, const std::vector<bool>& v) {
  std::vector<gguf::Value> e;
  for (bool x : v) e.push_back(gguf::Value::of_bool(x));
  plan_.metadata.set(s_.arch + "." + key, gguf::Value::of_array(gguf::ValueType::BOOL, std::move(e)));
}

void PlanBuilder::i32_array(const std::string& key, const std::vector<int32_t>& v) {
  std::vector<gguf::Value> e;
  for (int32_t x : v) e.push_back(gguf::Value::of_int32(x));
  plan_.metadata.set(s_.arch + "." + key, gguf::Value::of_array(gguf::ValueType::INT32, std::move(e)));
}

void PlanBuilder::general_head() {
  plan_.metadata.set("general.architecture", gguf::Value::of_string(s_.arch));
  plan_.metadata.set("general.name", gguf::Value::of_string(s_.display_name));
}

void PlanBuilder::general_tail(const gguf::Metadata& vocab) {
  for (const auto& [k, v] : vocab.entries()) plan_.metadata.set(k, v);
  plan_.metadata.set("general.quantization_version", gguf::Value::of_uint32(2));
  plan_.metadata.set("general.file_type", gguf::Value::of_uint32(mix_.file_type));
}

void PlanBuilder::push(PlannedTensor p) {
  plan_.total_bytes += p.spec.n_bytes();
  if (p.routed_expert) plan_.expert_bytes += p.spec.n_bytes();
  plan_.tensors.push_back(std::move(p));
}

void PlanBuilder::matrix(std::string name, GgmlType t, std::vector<int64_t> ne, float std, bool routed_expert) {
  PlannedTensor p;
  p.spec.name = std::move(name);
  p.spec.type = fit_type(t, ne[0]);
  p.spec.ne = std::move(ne);
  p.role = Role::matrix;
  p.std = std;
  p.routed_expert = routed_expert;
  push(std::move(p));
}

void PlanBuilder::f32_tensor(std::string name, std::vector<int64_t> ne, Role role, float std, float center,
                             bool routed_expert) {
  PlannedTensor p;
  p.spec.name = std::move(name);
  p.spec.type = GgmlType::F32;
  p.spec.ne = std::move(ne);
  p.role = role;
  p.std = std;
  p.center = center;
  p.routed_expert = routed_expert;
  push(std::move(p));
}

void PlanBuilder::rope_freqs(std::string name, int64_t n_pairs, int64_t n_rotated) {
  PlannedTensor p;
  p.spec.name = std::move(name);
  p.spec.type = GgmlType::F32;
  p.spec.ne = {n_pairs};
  p.role = Role::rope_freqs;
  p.n_rotated = n_rotated;
  push(std::move(p));
}

GgmlType PlanBuilder::next_attn_v_type() {
  const bool more = more_bits(i_attn_v_++, n_attn_v_);
  return more ? mix_.attn_v_more : mix_.attn;
}

GgmlType PlanBuilder::ffn_down_type(int64_t il, bool routed) const {
  const bool more = more_bits(il, s_.n_layer);
  // A dense 2-D ffn_down takes the mix's non-expert types (MXFP4_MOE keeps MXFP4 for the 3-D expert stacks only).
  if (!routed) return more ? mix_.attn_v_more : mix_.attn;
  return more ? mix_.expert_more : mix_.expert;
}

}  // namespace moetier::synth
