#include "synth/preset.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "util/error.h"

namespace moetier::synth {
namespace {

std::vector<ModelShape> all_presets() {
  std::vector<ModelShape> v;
  {
    ModelShape s;  // Qwen3-30B-A3B: 48 layers, 128 experts, top-8, n_embd 2048, expert FFN 768
    s.preset = "qwen3-30b-a3b"; s.arch = "qwen3moe"; s.display_name = "synthetic Qwen3-30B-A3B";
    s.n_layer = 48; s.n_expert = 128; s.n_expert_used = 8; s.n_embd = 2048; s.n_ff_exp = 768; s.n_ff = 6144;
    s.n_head = 32; s.n_head_kv = 4; s.head_dim = 128; s.n_vocab = 151936; s.n_ctx_train = 40960;
    s.rope_freq_base = 1e6; s.rms_eps = 1e-6;
    v.push_back(s);
  }
  {
    ModelShape s;  // gpt-oss-20b: 24 layers, 32 experts, top-4, n_embd 2880
    s.preset = "gpt-oss-20b"; s.arch = "gpt-oss"; s.display_name = "synthetic gpt-oss-20b";
    s.n_layer = 24; s.n_expert = 32; s.n_expert_used = 4; s.n_embd = 2880; s.n_ff_exp = 2880; s.n_ff = 2880;
    s.n_head = 64; s.n_head_kv = 8; s.head_dim = 64; s.n_vocab = 201088; s.n_ctx_train = 131072;
    s.rope_freq_base = 150000.0; s.rms_eps = 1e-5; s.sliding_window = 128; s.yarn_factor = 32.0;
    s.yarn_orig_ctx = 4096;
    v.push_back(s);
  }
  {
    ModelShape s = v.back();  // gpt-oss-120b: as 20b with 36 layers and 128 experts
    s.preset = "gpt-oss-120b"; s.display_name = "synthetic gpt-oss-120b"; s.n_layer = 36; s.n_expert = 128;
    v.push_back(s);
  }
  {
    ModelShape s;  // Mixtral-8x7B: 32 layers, 8 experts, top-2, n_embd 4096, FFN 14336
    s.preset = "mixtral-8x7b"; s.arch = "llama"; s.display_name = "synthetic Mixtral-8x7B";
    s.n_layer = 32; s.n_expert = 8; s.n_expert_used = 2; s.n_embd = 4096; s.n_ff_exp = 14336; s.n_ff = 14336;
    s.n_head = 32; s.n_head_kv = 8; s.head_dim = 128; s.n_vocab = 32000; s.n_ctx_train = 32768;
    s.rope_freq_base = 1e6; s.rms_eps = 1e-5;
    v.push_back(s);
  }
  {
    ModelShape s;  // tiny: a qwen3moe small enough for tests and the README demo (~25 MB at Q4_K_M)
    s.preset = "tiny"; s.arch = "qwen3moe"; s.display_name = "synthetic tiny qwen3moe";
    s.n_layer = 8; s.n_expert = 32; s.n_expert_used = 4; s.n_embd = 256; s.n_ff_exp = 256; s.n_ff = 512;
    s.n_head = 4; s.n_head_kv = 2; s.head_dim = 64; s.n_vocab = 4096; s.n_ctx_train = 4096;
    s.rope_freq_base = 1e6; s.rms_eps = 1e-6;
    v.push_back(s);
  }
  return v;
}

}  // namespace

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const auto& p : all_presets()) names.push_back(p.preset);
  return names;
}

ModelShape find_preset(std::string_view name) {
  for (const auto& p : all_presets())
    if (p.preset == name) return p;
  fail("unknown synth preset '{}'; choose one of: {}", name, fmt::join(preset_names(), ", "));
}

}  // namespace moetier::synth
