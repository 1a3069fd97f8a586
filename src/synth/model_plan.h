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

// What a tensor holds decides how its random values are drawn. Every role but `matrix` is stored F32.
//   matrix      weights of the mix's type, zero-mean, standard deviation `std`
//   router      F32 router (or gate) weights, zero-mean
//   norm        RMSNorm gains: `center` (1, the neutral gain of every architecture here, as their GGUF files
//               store the multiplier) plus a spread of `std`
//   gain        other F32 multipliers and rates around `center` (router input scale, per-expert output scale,
//               layer output scale, DeltaNet decay and time-step bias)
//   bias, sinks F32 zero-mean values
//   rope_freqs  proportional RoPE's per-pair frequency factors: 1 for the first `n_rotated` pairs, 1e30 (a pair
//               that never turns) for the rest, as llama.cpp's gemma4 conversion writes them
enum class Role { matrix, router, norm, gain, bias, sinks, rope_freqs };

struct PlannedTensor {
  gguf::TensorSpec spec;
  Role role = Role::matrix;
  float std = 0.0f;       // target standard deviation of the values (norm, gain: spread around `center`)
  float center = 0.0f;    // norm, gain: the value the spread is around
  int64_t n_rotated = 0;  // rope_freqs: pairs that rotate
  bool routed_expert = false;
};

// Quant mixes: "Q4_K_M", "Q5_K_M" (llama-quantize's medium mixes: more bits for attn_v (and attn_qkv), ffn_down
// (routed, shared and dense) and output on a subset of layers), or any single weight type name ("Q8_0", "MXFP4",
// "Q4_K", "F16", ...) for every matrix (output stays Q6_K for K-quant types, Q8_0 for MXFP4, as llama-quantize
// does; a model with tied embeddings gives token_embd the output's type). A matrix whose row length is not a
// multiple of the chosen type's block falls back as llama-quantize's tensor_type_fallback does (src/llama-quant.cpp:
// Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, Q2_K/Q3_K -> Q4_0, IQ4_XS -> IQ4_NL, then F16 if that block does not
// divide the row either; other types straight to Q8_0 or F16): gpt-oss's 2880-wide and gemma4's 704- and
// 2112-wide rows. Throws moetier::Error naming an unknown mix.
struct QuantMix {
  std::string name;
  quant::GgmlType expert = quant::GgmlType::Q4_K;       // ffn_{gate,up}_exps
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
