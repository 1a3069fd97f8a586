// Cutting special-token texts out of input before pre-tokenization.
//
// Algorithm (llama.cpp src/llama-vocab.cpp, tokenizer_st_partition; HF tokenizers AddedVocabulary::split):
// special tokens are tried one at a time, longest text first; each one splits every remaining raw-text
// fragment at every (leftmost, non-overlapping) occurrence of its text. Control and unknown tokens are only
// recognised when parse_special is set; user-defined tokens always are (they are part of the vocabulary's
// words, e.g. Qwen3's "<think>"). A token with lstrip/rstrip also swallows ASCII whitespace on that side.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace moetier::tokenizer {

// One piece of the input: a special token (token >= 0) or raw text still to be encoded (token == -1).
struct Fragment {
  int32_t token = -1;
  std::string_view text;  // into the caller's input; empty for tokens
};

std::vector<Fragment> split_special(const Vocab& v, std::string_view text, bool parse_special);

}  // namespace moetier::tokenizer
