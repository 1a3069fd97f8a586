// The grouped-query attention every supported architecture shares (Ainslie et al. 2023), read, configured and
// bound in one place so that an architecture states only how it differs: where its head size comes from, its
// RoPE pairing, and which optional tensors (biases, QK-norm, sinks) its attention has.
#pragma once

#include <cstdint>

#include "gguf/tensor_binder.h"
#include "model/arch_metadata.h"
#include "model/attention.h"
#include "model/common_hparams.h"
#include "model/model.h"

namespace moetier::model {

// Where an architecture takes its head size from.
enum class HeadDim {
  from_width,        // n_embd / n_head (llama; head_count must divide embedding_length)
  key_length_or_width,  // attention.key_length, default n_embd / n_head (qwen3moe)
  key_length,        // attention.key_length, required (gpt-oss)
};

// How many dimensions of each head RoPE rotates.
enum class RopeDims {
  from_metadata,  // rope.dimension_count, default head_dim (llama, qwen3moe)
  whole_head,     // head_dim, the key not read (gpt-oss)
};

struct GqaHparams {
  int64_t n_head = 0;     // attention.head_count
  int64_t n_head_kv = 0;  // attention.head_count_kv (default n_head); divides n_head
  int64_t head_dim = 0;   // per HeadDim; attention.value_length, when present, must equal it
  int64_t n_rot = 0;      // per RopeDims: even, at most head_dim
  float freq_base = 0;    // rope.freq_base (default 10000)

  int64_t q_width() const { return n_head * head_dim; }      // rows of attn_q, columns of attn_output
  int64_t kv_width() const { return n_head_kv * head_dim; }  // rows of attn_k and attn_v; a KV cache row
};

// Throws moetier::Error naming the key for a missing or inconsistent value, or one that blk.0's attn_q / attn_k
// contradict (their rows are head_count x head size and head_count_kv x head size), before anything is sized.
GqaHparams read_gqa_hparams(const gguf::GgufModel& file, const ArchMetadata& md, const CommonHparams& c,
                            HeadDim head_dim, RopeDims rope_dims = RopeDims::from_metadata);

// The attention's configuration for these hyperparameters, RoPE pairing `style` (YaRN and other scaling left at
// none; an architecture with scaling sets it after).
AttentionConfig gqa_attention_config(const GqaHparams& hp, const CommonHparams& c, RopeStyle style);

// The optional tensors of an architecture's attention.
struct AttentionTensors {
  bool biases = false;   // attn_{q,k,v,output}.bias (gpt-oss)
  bool qk_norm = false;  // attn_q_norm, attn_k_norm [head_dim] (qwen3moe)
  bool sinks = false;    // attn_sinks [n_head] (gpt-oss)
};

// Binds block `il`'s attention: attn_q [q_width, n_embd], attn_k / attn_v [kv_width, n_embd], attn_output
// [n_embd, q_width] and the optional tensors. Throws naming a missing or mis-shaped tensor.
AttentionWeights bind_gqa_attention(const gguf::TensorBinder& bind, int64_t il, const GqaHparams& hp, int64_t n_embd,
                                    AttentionTensors with);

// What a file of a GQA architecture says before it is loaded (registry.h): its context and KV cache per position.
ArchSummary gqa_summary(const CommonHparams& c, const GqaHparams& hp);

}  // namespace moetier::model
