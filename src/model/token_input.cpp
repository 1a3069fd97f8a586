#include "model/token_input.h"

#include <algorithm>
#include <filesystem>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "util/error.h"
#include "util/text_file.h"

namespace moetier::model {
namespace {

// The ids of `arr`, checked; `list` names it in errors (a key of an oracle case; nullptr: the plain list).
std::vector<int32_t> token_ids(const nlohmann::json& arr, const std::string& source, const char* list,
                               int64_t n_vocab) {
  if (!arr.is_array()) fail("{}: {} is not a JSON list of token ids", source, list != nullptr ? list : "the input");
  std::vector<int32_t> ids;
  ids.reserve(arr.size());
  for (size_t i = 0; i < arr.size(); ++i) {
    const nlohmann::json& x = arr[i];
    // Unsigned and signed JSON integers are read through their own types: get<int32_t>() would wrap 1000000000000.
    bool ok = false;
    int64_t id = 0;
    if (x.is_number_unsigned()) {
      const auto u = x.get<uint64_t>();
      ok = u <= static_cast<uint64_t>(std::numeric_limits<int32_t>::max());
      id = ok ? static_cast<int64_t>(u) : 0;
    } else if (x.is_number_integer()) {
      id = x.get<int64_t>();
      ok = id >= 0 && id <= std::numeric_limits<int32_t>::max();
    }
    const auto label = [&] { return list == nullptr ? fmt::format("token {}", i) : fmt::format("{}[{}]", list, i); };
    if (!ok) {
      fail("{}: {} is {}, not a token id (a whole number from 0 to {})", source, label(), x.dump(),
           n_vocab > 0 ? n_vocab - 1 : int64_t{std::numeric_limits<int32_t>::max()});
    }
    if (n_vocab > 0 && id >= n_vocab) {
      fail("{}: {} is {}, not a token id of this model's vocabulary (0 to {})", source, label(), id, n_vocab - 1);
    }
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

}  // namespace

TokenInput parse_token_input(std::string_view json_text, const std::string& source, int64_t n_vocab) {
  std::string text(json_text);
  std::replace_if(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) >= 0x80; }, '?');
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: not valid JSON: {}", source, e.what());
  }
  TokenInput t;
  if (j.is_object()) {
    if (!j.contains("prompt_tokens")) {
      fail("{}: not a JSON list of token ids (an object needs 'prompt_tokens', as an oracle case has)", source);
    }
    t.tokens = token_ids(j["prompt_tokens"], source, "prompt_tokens", n_vocab);
    if (t.tokens.empty()) fail("{}: prompt_tokens is empty", source);
    t.n_prompt = static_cast<int64_t>(t.tokens.size());
    t.n_prefill = t.n_prompt;
    if (j.contains("greedy_tokens")) {
      const std::vector<int32_t> g = token_ids(j["greedy_tokens"], source, "greedy_tokens", n_vocab);
      if (!g.empty()) t.tokens.insert(t.tokens.end(), g.begin(), g.end() - 1);
    }
  } else if (j.is_array()) {
    t.tokens = token_ids(j, source, nullptr, n_vocab);
    if (t.tokens.empty()) fail("{}: the list of token ids is empty", source);
    t.n_prompt = static_cast<int64_t>(t.tokens.size());
    t.n_prefill = std::max<int64_t>(t.n_prompt - 1, 1);
  } else {
    fail("{}: not a JSON list of token ids (nor an object with 'prompt_tokens')", source);
  }
  return t;
}

TokenInput read_token_input(const std::string& arg, int64_t n_vocab) {
  const std::string source = "--tokens " + arg;
  if (arg.starts_with('[')) return parse_token_input(arg, source, n_vocab);
  if (!std::filesystem::exists(arg)) {
    fail("{}: no such file (give a file, or the ids inline as a JSON list such as [1,2,3])", source);
  }
  // Token files are small (an oracle case with its texts is a few KiB); 256 MiB is past any context.
  const std::string text = util::read_text_file(arg, "--tokens", size_t{256} << 20);
  return parse_token_input(text, source, n_vocab);
}

void check_token_vocab(const TokenInput& t, const std::string& source, int64_t n_vocab) {
  for (size_t i = 0; i < t.tokens.size(); ++i) {
    if (t.tokens[i] >= n_vocab) {
      fail("{}: token {} is {}, not a token id of this model's vocabulary (0 to {})", source, i, t.tokens[i],
           n_vocab - 1);
    }
  }
}

}  // namespace moetier::model
