// Helpers shared by the streaming tests: the oracle's MoE models, their prompts, and a resident reference run.
#pragma once

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "model/eval.h"
#include "model/model.h"
#include "model/token_input.h"
#include "moe/expert_source.h"
#include "test_support.h"

namespace moetier::moe::test {

namespace fs = std::filesystem;

using moetier::test::moe_model_names;

inline fs::path model_path(const std::string& name) {
  return moetier::test::oracle_model(name);
}

// The oracle case `prompt` of `name`: prompt as one batch, then up to `decode` one-token steps of its greedy tail.
inline model::TokenInput oracle_tokens(const std::string& name, const char* prompt, int64_t decode) {
  model::TokenInput t =
      model::read_token_input(moetier::test::oracle_ref(name, prompt).string(), 0);
  t.tokens.resize(static_cast<size_t>(std::min<int64_t>(static_cast<int64_t>(t.tokens.size()), t.n_prefill + decode)));
  return t;
}

inline bool same_bytes(const quant::WeightView& a, const quant::WeightView& b) {
  return a.type == b.type && a.rows == b.rows && a.cols == b.cols && a.row_bytes == b.row_bytes &&
         std::memcmp(a.data, b.data, static_cast<size_t>(a.rows) * a.row_bytes) == 0;
}

// The same weights and biases, byte for byte.
inline bool same_expert(const ExpertWeights& a, const ExpertWeights& b, const ExpertShape& sh) {
  if (!same_bytes(a.gate, b.gate) || !same_bytes(a.up, b.up) || !same_bytes(a.down, b.down)) return false;
  if ((a.gate_bias == nullptr) != (b.gate_bias == nullptr)) return false;
  if (a.gate_bias == nullptr) return true;
  const auto F = static_cast<size_t>(sh.n_ff) * 4, D = static_cast<size_t>(sh.n_embd) * 4;
  return std::memcmp(a.gate_bias, b.gate_bias, F) == 0 && std::memcmp(a.up_bias, b.up_bias, F) == 0 &&
         std::memcmp(a.down_bias, b.down_bias, D) == 0;
}

inline std::string param_name(std::string s) {
  std::replace(s.begin(), s.end(), '-', '_');
  return s;
}

}  // namespace moetier::moe::test
