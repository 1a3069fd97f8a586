#include "tokenizer/detokenizer.h"

#include "tokenizer/byte_level.h"

namespace moetier::tokenizer {

namespace {

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581

void append_unescaped(std::string_view text, std::string& out) {
  size_t pos = 0;
  while (true) {
    const size_t hit = text.find(kSpmSpace, pos);
    if (hit == std::string_view::npos) break;
    out.append(text.substr(pos, hit - pos)).push_back(' ');
    pos = hit + kSpmSpace.size();
  }
  out.append(text.substr(pos));
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

void append_piece(const Vocab& v, int32_t id, bool render_special, std::string& out) {
  const TokenData& t = v.tokens[static_cast<size_t>(id)];
  switch (t.type) {
    case TokenType::control:
    case TokenType::unknown:
      if (render_special) out += t.text;
      return;
    case TokenType::user_defined:
      out += t.text;
      return;
    case TokenType::byte: {
      // "<0xXX>"; anything else typed as a byte token is a malformed vocab entry and renders as its text.
      const std::string& s = t.text;
      if (s.size() == 6 && s.starts_with("<0x") && s[5] == '>' && hex_digit(s[3]) >= 0 && hex_digit(s[4]) >= 0) {
        out.push_back(static_cast<char>(hex_digit(s[3]) * 16 + hex_digit(s[4])));
      } else {
        out += s;
      }
      return;
    }
    case TokenType::normal:
      if (v.kind == VocabKind::byte_level_bpe) {
        byte_level_decode(t.text, out);
      } else {
        append_unescaped(t.text, out);  // SentencePiece and Gemma 4 write spaces as "▁"
      }
      return;
    case TokenType::unused:
    case TokenType::undefined:
      return;
  }
}

}  // namespace moetier::tokenizer
