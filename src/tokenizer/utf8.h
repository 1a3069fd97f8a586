// UTF-8 helpers for the tokenizer. Input text is untrusted: every function here accepts arbitrary bytes and
// reports invalid sequences instead of reading past them, so a malformed prompt never crashes the encoder.
//
// Validity follows RFC 3629 / Unicode 15 table 3-7: no overlong forms, no surrogates (U+D800..U+DFFF), nothing
// above U+10FFFF, no truncated sequences, no stray continuation bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace moetier::tokenizer {

// Length (1..4) of the well-formed UTF-8 sequence starting at s[pos], or 0 when the bytes there do not form one.
// pos must be < s.size().
size_t utf8_valid_len(std::string_view s, size_t pos);

// Decodes the well-formed sequence of length `len` (as returned by utf8_valid_len) at s[pos].
uint32_t utf8_decode(std::string_view s, size_t pos, size_t len);

// Appends the UTF-8 encoding of code point cp (cp <= 0x10FFFF, not a surrogate).
void utf8_append(std::string& out, uint32_t cp);

}  // namespace moetier::tokenizer
