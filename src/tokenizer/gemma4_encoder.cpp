#include "tokenizer/gemma4_encoder.h"

#include <string>

#include "tokenizer/bpe_encoder.h"
#include "tokenizer/symbols.h"

namespace moetier::tokenizer {

namespace {

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581

// One pre-split chunk: whole if it is a newline run that is a token, otherwise merged, with byte fallback.
void encode_chunk(const Vocab& v, std::string_view chunk, std::vector<Symbol>& sym, std::vector<int32_t>& out) {
  if (chunk.front() == '\n') {  // chunks are uniform: the first byte says whether it is a newline run
    if (const auto id = v.find(chunk)) {
      out.push_back(*id);
      return;
    }
  }
  bpe_merge(v, chunk, sym);
  for (int32_t i = 0; i != -1; i = sym[static_cast<size_t>(i)].next) {
    const Symbol& s = sym[static_cast<size_t>(i)];
    const std::string_view piece = chunk.substr(s.begin, s.len);
    if (const auto id = v.find(piece)) {
      out.push_back(*id);
      continue;
    }
    for (const char c : piece) {
      const int32_t b = v.byte_token[static_cast<unsigned char>(c)];
      if (b >= 0) out.push_back(b);
    }
  }
}

}  // namespace

void gemma4_encode(const Vocab& v, std::string_view text, std::vector<int32_t>& out) {
  std::string escaped;
  escaped.reserve(text.size() + text.size() / 2);
  for (const char c : text) {
    if (c == ' ') {
      escaped += kSpmSpace;
    } else {
      escaped.push_back(c);
    }
  }

  // `[^\n]+|[\n]+` matches at every position, so its pieces are exactly the maximal runs of newline and of
  // non-newline bytes. A '\n' byte never occurs inside a multi-byte UTF-8 sequence, so splitting bytes is
  // splitting code points.
  std::vector<Symbol> sym;
  const std::string_view s = escaped;
  size_t begin = 0;
  while (begin < s.size()) {
    const bool newline = s[begin] == '\n';
    size_t end = begin + 1;
    while (end < s.size() && (s[end] == '\n') == newline) ++end;
    encode_chunk(v, s.substr(begin, end - begin), sym, out);
    begin = end;
  }
}

}  // namespace moetier::tokenizer
