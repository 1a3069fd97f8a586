// The oracle's prompts: every ../shared/oracle/ref/*.json names a model whose vocab (the stories260K
// SentencePiece vocab for all of them) must turn `prompt` into `prompt_tokens` (with BOS) and whose
// `greedy_tokens` must decode to `greedy_text`.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gguf/gguf.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace moetier::test {
namespace {

// The reference files of the random-weight models hold generated text with raw byte-fallback bytes, which is
// not valid UTF-8 and so not JSON nlohmann accepts. Each invalid byte is smuggled through the parser as a
// private-use code point U+F7xx and turned back into byte xx in every string afterwards.
std::string restore_bytes(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c0 = static_cast<unsigned char>(s[i]);
    if (c0 == 0xEF && i + 2 < s.size() && static_cast<unsigned char>(s[i + 1]) >= 0x9C &&
        static_cast<unsigned char>(s[i + 1]) <= 0x9F) {
      const uint32_t cp = ((c0 & 0x0Fu) << 12) | ((static_cast<unsigned char>(s[i + 1]) & 0x3Fu) << 6) |
                          (static_cast<unsigned char>(s[i + 2]) & 0x3Fu);
      if ((cp & 0xFF00u) == 0xF700u) {
        out.push_back(static_cast<char>(cp & 0xFFu));
        i += 2;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

nlohmann::json read_json(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  const std::string raw((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::string clean;
  for (size_t i = 0; i < raw.size();) {
    const size_t n = tokenizer::utf8_valid_len(raw, i);
    if (n == 0) {
      clean += fmt::format("\\u{:04X}", 0xF700u + static_cast<unsigned char>(raw[i]));
      ++i;
    } else {
      clean.append(raw, i, n);
      i += n;
    }
  }
  nlohmann::json j = nlohmann::json::parse(clean);
  for (auto& [key, value] : j.items()) {
    if (value.is_string()) value = restore_bytes(value.get<std::string>());
  }
  return j;
}

void check_ref(const std::filesystem::path& ref) {
  SCOPED_TRACE(ref.filename().string());
  const nlohmann::json j = read_json(ref);
  // The model beside its ref/ folder, in the same oracle root.
  const gguf::GgufModel m =
      gguf::GgufModel::open(ref.parent_path().parent_path() / "models" / j.at("model").get<std::string>());
  const Tokenizer tok = Tokenizer::from_metadata(m.metadata());
  EXPECT_EQ(tok.n_vocab(), j.at("n_vocab").get<int32_t>());

  const auto prompt = j.at("prompt").get<std::string>();
  const auto prompt_tokens = j.at("prompt_tokens").get<std::vector<int32_t>>();
  EXPECT_EQ(tok.encode(prompt, j.at("add_bos").get<bool>(), false), prompt_tokens);
  // The prompt decodes back once BOS and the SentencePiece space prefix are set aside.
  EXPECT_EQ(tok.decode(prompt_tokens, {.strip_space_prefix = true}), prompt);

  // Generated text is the plain concatenation of pieces: its leading space is real, and a BOS the model
  // generated renders as nothing.
  const auto greedy = j.at("greedy_tokens").get<std::vector<int32_t>>();
  const auto greedy_text = j.at("greedy_text").get<std::string>();
  EXPECT_EQ(tok.decode(greedy), greedy_text);
  std::string streamed;
  for (int32_t id : greedy) streamed += tok.token_to_piece(id);
  EXPECT_EQ(streamed, greedy_text);
}

TEST(OraclePrompts, Stories260K) {
  for (const char* p : {"p1", "p2", "plong"}) check_ref(oracle_dir() / "ref" / (std::string("stories260K.") + p + ".json"));
}

TEST(OraclePrompts, EveryReferenceFile) {
  int n = 0;
  for (const auto& root : oracle_roots()) {
    for (const auto& e : std::filesystem::directory_iterator(root / "ref")) {
      if (e.path().extension() != ".json") continue;
      check_ref(e.path());
      ++n;
    }
  }
  EXPECT_GE(n, 3);
}

}  // namespace
}  // namespace moetier::test
