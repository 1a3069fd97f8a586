// Byte-level BPE encoding of one pre-tokenized word (tokenizer.ggml.model "gpt2").
//
// Algorithm (openai/gpt-2 encoder.py bpe(); HF tokenizers BPE::merge_word; llama.cpp llm_tokenizer_bpe_session):
// start from one symbol per character of the byte-level-encoded word; repeatedly merge the adjacent pair with the
// lowest merge rank (ties: leftmost) until no adjacent pair is a listed merge; emit each symbol's token. With
// ignore_merges (llama3 family, HF "ignore_merges": true) a word that is itself a token is emitted whole.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace moetier::tokenizer {

// `word` is in the byte-level alphabet (byte_level.h). Appends its ids to `out`.
void bpe_encode_word(const Vocab& v, std::string_view word, std::vector<int32_t>& out);

}  // namespace moetier::tokenizer
