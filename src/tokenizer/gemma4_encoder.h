// Gemma 4's tokenizer (tokenizer.ggml.model "gemma4"): SentencePiece-style BPE over ranked merges.
//
// Rules (llama.cpp src/llama-vocab.cpp: the "gemma4" branch of llama_vocab::impl::load, which forces
// tokenizer.ggml.pre to "gemma4" = LLAMA_VOCAB_PRE_TYPE_GEMMA4 with escape_whitespaces; llm_tokenizer_bpe's
// GEMMA4 case, which sets the pre-split regex and byte_encode = false; llm_tokenizer_bpe_session::tokenize):
//   - every space of a text fragment becomes U+2581 "▁" (llama_escape_whitespace); no space prefix is added (the
//     BPE branch of llama_vocab::impl::tokenize never adds one, whatever tokenizer.ggml.add_space_prefix says);
//   - the only pre-split is the regex `[^\n]+|[\n]+`: runs of newlines apart from runs of everything else, so a
//     merge never spans a newline;
//   - a chunk made only of newlines that is itself a token ("\n", "\n\n", ...) is emitted whole (the reference's
//     "fix for gemma 4", llama.cpp PR 21343); other chunks are not, as ignore_merges is off for this vocab;
//   - merges run over the raw UTF-8 characters of the chunk (byte_encode = false: no GPT-2 byte alphabet), with
//     the loop of bpe_encoder.h (lowest rank first, ties leftmost);
//   - a final symbol that is not a token is emitted as the byte tokens "<0xXX>" of its bytes; a byte whose token
//     the vocab lacks is dropped, as in the reference (no unknown token is inserted).
// Text that is not valid UTF-8 is not replaced by U+FFFD as in the reference: each invalid byte is a symbol of
// its own and so falls back to its byte token (tokenizer.h, "Differences from the reference").
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace moetier::tokenizer {

// Appends the ids of one raw-text fragment (special tokens already cut out, spaces not yet escaped) to `out`.
void gemma4_encode(const Vocab& v, std::string_view text, std::vector<int32_t>& out);

}  // namespace moetier::tokenizer
