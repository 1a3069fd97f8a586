// Token ids back to text.
//
// Rules (llama.cpp llama_vocab::impl::token_to_piece; sentencepiece DecodeIds; HF ByteLevel decoder):
//   - normal SentencePiece and Gemma 4 ("gemma4") tokens: U+2581 "▁" becomes a space; byte tokens "<0xXX>" become
//     that byte, so the bytes of a character split by byte fallback join up again when pieces are concatenated
//     (llama.cpp token_to_piece, BPE case with escape_whitespaces);
//   - normal byte-level BPE tokens: each character maps back to its byte (byte_level.h);
//   - user-defined tokens: their text, verbatim;
//   - control and unknown tokens: nothing, unless render_special (then their text, e.g. "<|im_end|>");
//   - unused / undefined tokens: nothing.
// A piece may end inside a UTF-8 sequence; callers that stream must buffer until the sequence completes.
#pragma once

#include <cstdint>
#include <string>

#include "tokenizer/vocab.h"

namespace moetier::tokenizer {

// Appends the text of token `id` (0 <= id < n_vocab, checked by the caller) to `out`.
void append_piece(const Vocab& v, int32_t id, bool render_special, std::string& out);

}  // namespace moetier::tokenizer
