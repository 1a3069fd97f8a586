// Shapes of real MoE models, for `moetier synth`: a synthetic model with a real architecture's tensor names,
// shapes and metadata but random weights, so streaming and kernels can be measured at full size without
// downloading a checkpoint.
//
// Sources: the models' published configs (Qwen3-30B-A3B config.json; gpt-oss-20b/120b model card and config.json;
// Mixtral-8x7B config.json) as converted to GGUF metadata by llama.cpp's convert_hf_to_gguf.py.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace moetier::synth {

struct ModelShape {
  std::string preset;       // preset name, e.g. "qwen3-30b-a3b"
  std::string arch;         // general.architecture: "qwen3moe", "gpt-oss", "llama"
  std::string display_name; // general.name
  int64_t n_layer = 0;
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;  // top-k
  int64_t n_embd = 0;
  int64_t n_ff_exp = 0;       // hidden size of one routed expert's FFN
  int64_t n_ff = 0;           // feed_forward_length metadata (dense FFN size of the family)
  // leading_dense_block_count: blocks 0 .. n_dense_lead - 1 have a dense SwiGLU FFN of n_ff instead of a router
  // and routed experts (DeepSeek and GLM files keep such blocks; 0 in every preset, `synth --dense-lead`).
  int64_t n_dense_lead = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;       // key_length = value_length
  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;
  double rope_freq_base = 10000.0;
  double rms_eps = 1e-6;
  int64_t sliding_window = 0;  // gpt-oss: window of the sliding-window layers, tokens
  double yarn_factor = 0.0;    // gpt-oss: rope.scaling.factor (0 = no scaling)
  int64_t yarn_orig_ctx = 0;   // gpt-oss: rope.scaling.original_context_length
};

// Preset by name; throws moetier::Error listing the presets when unknown.
ModelShape find_preset(std::string_view name);
std::vector<std::string> preset_names();

}  // namespace moetier::synth
