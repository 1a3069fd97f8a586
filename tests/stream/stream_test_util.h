// Helpers shared by the streaming tests: the oracle's MoE models, their prompts, and a resident reference run.
#pragma once

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "model/eval.h"
#include "model/model.h"
#include "model/token_input.h"
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

inline std::string param_name(std::string s) {
  std::replace(s.begin(), s.end(), '-', '_');
  return s;
}

}  // namespace moetier::moe::test
