#include "tokenizer/byte_level.h"

#include <array>
#include <cstdint>

#include "tokenizer/utf8.h"

namespace moetier::tokenizer {

namespace {

// Highest code point the alphabet uses: U+0100 + 67 (68 remapped bytes).
constexpr uint32_t kMaxCodePoint = 0x143;

struct Tables {
  std::array<uint32_t, 256> byte_to_cp{};
  std::array<int16_t, kMaxCodePoint + 1> cp_to_byte{};
  std::array<std::string, 256> byte_to_utf8;

  Tables() {
    cp_to_byte.fill(-1);
    const auto self = [](int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE); };
    uint32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      const uint32_t cp = self(b) ? static_cast<uint32_t>(b) : next++;
      byte_to_cp[static_cast<size_t>(b)] = cp;
      cp_to_byte[cp] = static_cast<int16_t>(b);
      utf8_append(byte_to_utf8[static_cast<size_t>(b)], cp);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

std::string byte_level_encode(std::string_view bytes) {
  const Tables& t = tables();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) out += t.byte_to_utf8[static_cast<unsigned char>(c)];
  return out;
}

void byte_level_decode(std::string_view text, std::string& out) {
  const Tables& t = tables();
  size_t i = 0;
  while (i < text.size()) {
    const size_t len = utf8_valid_len(text, i);
    if (len == 0) {
      out.push_back(text[i++]);
      continue;
    }
    const uint32_t cp = utf8_decode(text, i, len);
    if (cp <= kMaxCodePoint && t.cp_to_byte[cp] >= 0) {
      out.push_back(static_cast<char>(static_cast<uint8_t>(t.cp_to_byte[cp])));
    } else {
      out.append(text.substr(i, len));
    }
    i += len;
  }
}

}  // namespace moetier::tokenizer
