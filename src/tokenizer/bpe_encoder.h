// BPE over ranked merges: the merge loop shared by byte-level BPE ("gpt2") and Gemma 4's SentencePiece-style BPE
// ("gemma4", gemma4_encoder.h), and the byte-level encoding of one pre-tokenized word.
//
// Algorithm (openai/gpt-2 encoder.py bpe(); HF tokenizers BPE::merge_word; llama.cpp llm_tokenizer_bpe_session):
// start from one symbol per character of the word; repeatedly merge the adjacent pair with the lowest merge rank
// (ties: leftmost) until no adjacent pair is a listed merge; emit each symbol's token. With ignore_merges (llama3
// family, HF "ignore_merges": true) a word that is itself a token is emitted whole.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/symbols.h"
#include "tokenizer/vocab.h"

namespace moetier::tokenizer {

// Runs the merge loop over the UTF-8 characters of `word` (an invalid byte is a character of its own). On return
// `sym` holds the final symbols as a list linked from index 0 (symbols with len 0 were merged away); `word` must
// not be empty. `sym` is overwritten, so a caller may reuse one vector across words.
void bpe_merge(const Vocab& v, std::string_view word, std::vector<Symbol>& sym);

// `word` is in the byte-level alphabet (byte_level.h). Appends its ids to `out`.
void bpe_encode_word(const Vocab& v, std::string_view word, std::vector<int32_t>& out);

}  // namespace moetier::tokenizer
