// The tensor list and metadata of a synthetic model: llama.cpp's tensor names and GGUF layout for the preset's
// architecture, with weight types chosen from a quant mix the way llama-quantize assigns them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "gguf/writer.h"
#include "synth/preset.h"

namespace moetier::synth {

// What a tensor holds decides how its random values are drawn.
enum class Role { matrix, router, norm, bias, sinks };

struct PlannedTensor {
  gguf::TensorSpec spec;
  Role role = Role::matrix;
  float std = 0.0f;       // target standard deviation of the values (norm: spread around 1)
  bool routed_expert = false;
};

// Quant mixes: "Q4_K_M", "Q5_K_M" (llama-quantize's medium mixes: more bits for attn_v, ffn_down and output on
// a subset of layers), or any single weight type name ("Q8_0", "MXFP4", "Q4_K", "F16", ...) for every matrix
// (output stays Q6_K for K-quant types, Q8_0 for MXFP4, as llama-quantize does). A matrix whose row length is
// not a multiple of the chosen type's block falls back to Q8_0 (or F16), as llama-quantize does for gpt-oss's
// 2880-wide rows. Throws moetier::Error naming an unknown mix.
struct QuantMix {
  std::string name;
  quant::GgmlType expert = quant::GgmlType::Q4_K;      // ffn_{gate,up}_exps
  quant::GgmlType expert_more = quant::GgmlType::Q4_K;  // ffn_down_exps on "more bits" layers
  quant::GgmlType attn = quant::GgmlType::Q4_K;         // attn_q, attn_k, attn_output
  quant::GgmlType attn_v_more = quant::GgmlType::Q4_K;  // attn_v on "more bits" layers
  quant::GgmlType embd = quant::GgmlType::Q4_K;         // token_embd
  quant::GgmlType output = quant::GgmlType::Q6_K;       // output
  uint32_t file_type = 0;                               // general.file_type (llama_ftype)
};
QuantMix parse_quant_mix(const std::string& name);

struct ModelPlan {
  gguf::Metadata metadata;
  std::vector<PlannedTensor> tensors;
  uint64_t total_bytes = 0;   // tensor data bytes
  uint64_t expert_bytes = 0;  // of which routed experts
};

// `vocab` is the tokenizer.* metadata to embed (see synth_vocab.h); its token count sets n_vocab.
ModelPlan plan_model(const ModelShape& shape, const QuantMix& mix, const gguf::Metadata& vocab);

}  // namespace moetier::synth
