// The byte-level alphabet of GPT-2 style BPE vocabularies.
//
// Source: openai/gpt-2 src/encoder.py, bytes_to_unicode(). Every byte value gets a printable code point so that
// BPE can work on text without whitespace or control characters: the bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF
// stand for themselves (Latin-1), and the remaining 68 bytes, in increasing order, become U+0100, U+0101, ...
// (so ' ' is 'Ġ' U+0120 and '\n' is 'Ċ' U+010A). Vocab tokens and merges of "gpt2" vocabs are written in this
// alphabet.
#pragma once

#include <string>
#include <string_view>

namespace moetier::tokenizer {

// Maps every byte of `bytes` to its code point in the byte-level alphabet, UTF-8 encoded.
std::string byte_level_encode(std::string_view bytes);

// Inverse of byte_level_encode, appended to `out`. A code point outside the alphabet (or invalid UTF-8) has no
// byte to stand for; it is copied through unchanged so nothing is silently lost.
void byte_level_decode(std::string_view text, std::string& out);

}  // namespace moetier::tokenizer
