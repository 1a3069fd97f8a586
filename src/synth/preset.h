// Shapes of real MoE models, for `moetier synth`: a synthetic model with a real architecture's tensor names,
// shapes and metadata but random weights, so streaming and kernels can be measured at full size without
// downloading a checkpoint.
//
// Sources: the models' published configs (Qwen3-30B-A3B config.json; gpt-oss-20b/120b model card and config.json;
// Mixtral-8x7B config.json; Gemma-4-26B-A4B and Qwen3.5-35B-A3B config.json, see preset.cpp) as converted to GGUF
// metadata by llama.cpp's convert_hf_to_gguf.py.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace moetier::synth {

struct ModelShape {
  std::string preset;        // preset name, e.g. "qwen3-30b-a3b"
  std::string arch;          // general.architecture: "qwen3moe", "gpt-oss", "llama", "gemma4", "qwen35moe"
  std::string display_name;  // general.name
  int64_t n_layer = 0;
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;  // top-k
  int64_t n_embd = 0;
  int64_t n_ff_exp = 0;  // hidden size of one routed expert's FFN
  int64_t n_ff = 0;      // feed_forward_length metadata (dense FFN size of the family; gemma4: the dense FFN
                         // that runs beside the experts in every block)
  // leading_dense_block_count: blocks 0 .. n_dense_lead - 1 have a dense SwiGLU FFN of n_ff instead of a router
  // and routed experts (DeepSeek and GLM files keep such blocks; 0 in every preset, `synth --dense-lead`).
  int64_t n_dense_lead = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;  // gemma4: of the full-attention blocks
  int64_t head_dim = 0;   // key_length = value_length (gemma4: of the full-attention blocks)
  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;
  double rope_freq_base = 10000.0;
  double rms_eps = 1e-6;
  int64_t sliding_window = 0;  // gpt-oss, gemma4: window of the sliding-window layers, tokens
  double yarn_factor = 0.0;    // gpt-oss: rope.scaling.factor (0 = no scaling)
  int64_t yarn_orig_ctx = 0;   // gpt-oss: rope.scaling.original_context_length

  // gemma4: interleaved sliding-window and full attention. Block i is a full-attention block when
  // (i + 1) % swa_period == 0 (HF layer_types), a sliding-window block otherwise.
  int64_t swa_period = 0;
  int64_t n_head_kv_swa = 0;         // KV heads of the sliding-window blocks
  int64_t head_dim_swa = 0;          // key_length_swa = value_length_swa
  double rope_freq_base_swa = 0.0;   // rope.freq_base_swa
  double rope_partial = 1.0;         // full blocks rotate this fraction of head_dim (proportional RoPE: rope_freqs)
  double final_logit_softcap = 0.0;  // final_logit_softcapping (0 = none)
  bool tied_embeddings = false;      // no output.weight: the logits use token_embd

  // qwen35moe: every full_attn_interval-th block (i + 1 a multiple of it) is gated full attention (attn_q of
  // 2 x n_head x head_dim: query and gate), the others Gated DeltaNet linear attention.
  int64_t full_attn_interval = 0;
  int64_t n_rot = 0;                   // rope.dimension_count when it is less than head_dim (partial rotary)
  std::vector<int32_t> rope_sections;  // rope.dimension_sections (multi-axis RoPE; 4 entries)
  int64_t n_ff_shexp = 0;              // expert_shared_feed_forward_length: the gated shared expert (0: none)
  int64_t ssm_conv_kernel = 0;         // ssm.conv_kernel: causal conv1d taps
  int64_t ssm_state_size = 0;          // ssm.state_size: key head dim (= value head dim in these models)
  int64_t ssm_group_count = 0;         // ssm.group_count: key heads
  int64_t ssm_time_step_rank = 0;      // ssm.time_step_rank: value heads
  int64_t ssm_inner_size = 0;          // ssm.inner_size: value heads x value head dim

  // Per-block layout of the hybrid architectures (false for every block of the others).
  bool is_swa(int64_t il) const { return swa_period > 0 && (il + 1) % swa_period != 0; }
  bool is_recurrent(int64_t il) const { return full_attn_interval > 0 && (il + 1) % full_attn_interval != 0; }
};

// Preset by name; throws moetier::Error listing the presets when unknown.
ModelShape find_preset(std::string_view name);
std::vector<std::string> preset_names();

}  // namespace moetier::synth
