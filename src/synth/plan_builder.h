// Internal to synth: the steps every architecture's plan shares (metadata keys under the architecture's prefix,
// tensors with their quant types and value roles, llama-quantize's "more bits" choices). Used by model_plan.cpp
// and the per-architecture plans (plan_gemma4.cpp, plan_qwen35moe.cpp).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "synth/model_plan.h"

namespace moetier::synth {

class PlanBuilder {
 public:
  // `n_attn_v`: the attn_v and attn_qkv tensors the model will have (llama-quantize's n_attention_wv), which
  // the more-bits choice for them counts through in file order.
  PlanBuilder(const ModelShape& s, const QuantMix& mix, ModelPlan& plan, int64_t n_attn_v);

  // Metadata under "<arch>.": unsigned 32-bit, float 32-bit, and arrays of those, bool and int32.
  void u32(const std::string& key, int64_t v);
  void f32(const std::string& key, double v);
  void u32_array(const std::string& key, const std::vector<int64_t>& v);
  void bool_array(const std::string& key, const std::vector<bool>& v);
  void i32_array(const std::string& key, const std::vector<int32_t>& v);
  // general.architecture and general.name (first), the vocabulary and general.quantization_version/file_type.
  void general_head();
  void general_tail(const gguf::Metadata& vocab);

  // A matrix of type `t` (fitted to its row length) with zero-mean values of standard deviation `std`.
  void matrix(std::string name, quant::GgmlType t, std::vector<int64_t> ne, float std, bool routed_expert = false);
  // An F32 tensor of `role` (not matrix).
  void f32_tensor(std::string name, std::vector<int64_t> ne, Role role, float std, float center = 0.0f,
                  bool routed_expert = false);
  void rope_freqs(std::string name, int64_t n_pairs, int64_t n_rotated);

  // The type of the next attn_v / attn_qkv (advances the count) and of block `il`'s ffn_down (`routed`: the
  // expert stack; else a shared or dense one): the mix's "more bits" type on llama-quantize's use_more_bits()
  // subset, which it takes by layer for ffn_down (the layer parsed from the name in a MoE model).
  quant::GgmlType next_attn_v_type();
  quant::GgmlType ffn_down_type(int64_t il, bool routed) const;

  static float inv_sqrt(int64_t n) { return 1.0f / std::sqrt(static_cast<float>(n)); }

 private:
  void push(PlannedTensor p);

  const ModelShape& s_;
  const QuantMix& mix_;
  ModelPlan& plan_;
  int64_t n_attn_v_;
  int64_t i_attn_v_ = 0;
};

// The type llama-quantize stores a matrix of row length ne0 in when `t` is asked for (tensor_type_fallback).
quant::GgmlType fit_type(quant::GgmlType t, int64_t ne0);

// The per-architecture plans; `n_vocab` sizes token_embd (and output).
void plan_gemma4(const ModelShape& s, const QuantMix& mix, const gguf::Metadata& vocab, int64_t n_vocab,
                 ModelPlan& plan);
void plan_qwen35moe(const ModelShape& s, const QuantMix& mix, const gguf::Metadata& vocab, int64_t n_vocab,
                    ModelPlan& plan);

}  // namespace moetier::synth
