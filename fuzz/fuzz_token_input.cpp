// libFuzzer entry for `--tokens` JSON (model/token_input.h): any byte string given to parse_token_input either
// parses or throws moetier::Error. Each input is parsed twice, without a vocabulary (n_vocab 0, as `eval` does
// before its model loads) and against a small one; what parses must have the shape token_input.h promises, and
// a parse against the vocabulary must agree with the parse without one checked afterwards (check_token_vocab).
// Anything else (a crash, a sanitizer report, another exception type such as nlohmann's, a hang, an allocation
// beyond -rss_limit_mb) is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "model/token_input.h"
#include "util/error.h"

namespace {

using moetier::model::TokenInput;

// A vocabulary size small enough that mutated seeds hold ids on both sides of it.
constexpr int64_t kVocab = 512;

void check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz_token_input: %s\n", what);
  std::abort();
}

std::optional<TokenInput> parse(std::string_view text, int64_t n_vocab) {
  try {
    return moetier::model::parse_token_input(text, "fuzz-input", n_vocab);
  } catch (const moetier::Error&) {
    return std::nullopt;
  }
}

void check_shape(const TokenInput& t, int64_t n_vocab) {
  check(!t.tokens.empty(), "parsed an empty token list");
  check(t.n_prompt >= 1 && t.n_prompt <= static_cast<int64_t>(t.tokens.size()), "n_prompt out of [1, tokens]");
  check(t.n_prefill >= 1 && t.n_prefill <= t.n_prompt, "n_prefill out of [1, n_prompt]");
  for (const int32_t id : t.tokens) check(id >= 0 && (n_vocab == 0 || id < n_vocab), "id out of range");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto any = parse(text, 0);
  if (any) check_shape(*any, 0);
  const auto in_vocab = parse(text, kVocab);
  if (!in_vocab) return 0;
  check_shape(*in_vocab, kVocab);
  check(any.has_value(), "parses against a vocabulary but not without one");
  check(any->tokens == in_vocab->tokens && any->n_prompt == in_vocab->n_prompt &&
            any->n_prefill == in_vocab->n_prefill,
        "the vocabulary changed what was parsed");
  try {
    moetier::model::check_token_vocab(*any, "fuzz-input", kVocab);
  } catch (const moetier::Error&) {
    check(false, "check_token_vocab rejects what parse_token_input accepted with the same vocabulary");
  }
  return 0;
}
