// SentencePiece BPE encoding (tokenizer.ggml.model "llama").
//
// Algorithm (google/sentencepiece bpe_model.cc, as in llama.cpp llm_tokenizer_spm_session): start from one
// symbol per UTF-8 character; repeatedly merge the adjacent pair whose concatenation is a vocab token with the
// highest score (ties: leftmost pair first) until no pair forms a token. Each final symbol is emitted as its
// token; a symbol that is not a token (a character missing from the vocab) is emitted as byte-fallback tokens
// "<0xXX>", one per byte, or as the unknown token where the vocab has no byte tokens.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace moetier::tokenizer {

// Appends the ids of `text` to `out`. `text` is already escaped: spaces replaced by U+2581 "▁" and the space
// prefix (if any) added by the caller. Invalid UTF-8 bytes become one-byte symbols and so byte fallback.
void spm_encode(const Vocab& v, std::string_view text, std::vector<int32_t>& out);

}  // namespace moetier::tokenizer
