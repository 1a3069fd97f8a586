#include "tokenizer/utf8.h"

#include <cassert>

namespace moetier::tokenizer {

namespace {
bool is_cont(unsigned char c) { return (c & 0xC0) == 0x80; }
}  // namespace

size_t utf8_valid_len(std::string_view s, size_t pos) {
  assert(pos < s.size());
  const auto b = [&](size_t i) { return static_cast<unsigned char>(s[pos + i]); };
  const size_t left = s.size() - pos;
  const unsigned char c0 = b(0);
  if (c0 < 0x80) return 1;
  if (c0 < 0xC2) return 0;  // continuation byte, or the overlong lead bytes C0/C1
  if (c0 < 0xE0) return left >= 2 && is_cont(b(1)) ? 2 : 0;
  if (c0 < 0xF0) {
    if (left < 3 || !is_cont(b(1)) || !is_cont(b(2))) return 0;
    if (c0 == 0xE0 && b(1) < 0xA0) return 0;  // overlong
    if (c0 == 0xED && b(1) >= 0xA0) return 0;  // surrogates
    return 3;
  }
  if (c0 < 0xF5) {
    if (left < 4 || !is_cont(b(1)) || !is_cont(b(2)) || !is_cont(b(3))) return 0;
    if (c0 == 0xF0 && b(1) < 0x90) return 0;  // overlong
    if (c0 == 0xF4 && b(1) >= 0x90) return 0;  // above U+10FFFF
    return 4;
  }
  return 0;
}

uint32_t utf8_decode(std::string_view s, size_t pos, size_t len) {
  const auto b = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(s[pos + i])); };
  switch (len) {
    case 1: return b(0);
    case 2: return ((b(0) & 0x1Fu) << 6) | (b(1) & 0x3Fu);
    case 3: return ((b(0) & 0x0Fu) << 12) | ((b(1) & 0x3Fu) << 6) | (b(2) & 0x3Fu);
    case 4: return ((b(0) & 0x07u) << 18) | ((b(1) & 0x3Fu) << 12) | ((b(2) & 0x3Fu) << 6) | (b(3) & 0x3Fu);
    default: assert(false && "utf8_decode needs the length of a valid sequence"); return 0xFFFD;
  }
}

void utf8_append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace moetier::tokenizer
