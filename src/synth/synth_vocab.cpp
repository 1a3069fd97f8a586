#include "synth/synth_vocab.h"

#include <array>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "util/error.h"

namespace moetier::synth {

gguf::Metadata make_default_vocab(int64_t n_vocab) {
  if (n_vocab < 300) fail("a synthetic vocabulary needs at least 300 tokens, got {}", n_vocab);
  std::vector<gguf::Value> tokens, scores, types;
  auto add = [&](std::string text, float score, int32_t type) {
    tokens.push_back(gguf::Value::of_string(std::move(text)));
    scores.push_back(gguf::Value::of_float32(score));
    types.push_back(gguf::Value::of_int32(type));
  };
  // Token types as llama.cpp numbers them: 1 normal, 2 unknown, 3 control, 6 byte.
  add("<unk>", 0.0f, 2);
  add("<s>", 0.0f, 3);
  add("</s>", 0.0f, 3);
  for (int b = 0; b < 256; ++b) add(fmt::format("<0x{:02X}>", b), 0.0f, 6);
  // Pieces: syllables of one to three consonant-vowel pairs, with and without the SentencePiece word-start
  // marker U+2581; scores fall with length so the SentencePiece merge prefers longer pieces.
  static constexpr std::array<char, 16> kCons{'b', 'd', 'f', 'g', 'h', 'k', 'l', 'm', 'n', 'p', 'r', 's', 't', 'v', 'w', 'z'};
  static constexpr std::array<char, 5> kVow{'a', 'e', 'i', 'o', 'u'};
  const std::string marker = "\xe2\x96\x81";
  std::vector<std::string> syll;
  for (char c : kCons)
    for (char v : kVow) syll.push_back(std::string{c, v});
  int64_t i = 0;
  for (int len = 1; static_cast<int64_t>(tokens.size()) < n_vocab; ++len) {
    int64_t combos = 1;
    for (int k = 0; k < len; ++k) combos *= static_cast<int64_t>(syll.size());
    for (int64_t c = 0; c < combos && static_cast<int64_t>(tokens.size()) < n_vocab; ++c) {
      std::string word;
      for (int64_t k = 0, x = c; k < len; ++k, x /= static_cast<int64_t>(syll.size()))
        word += syll[static_cast<size_t>(x % static_cast<int64_t>(syll.size()))];
      const float score = -static_cast<float>(++i);
      add(marker + word, score, 1);
      if (static_cast<int64_t>(tokens.size()) < n_vocab) add(word, score - 0.5f, 1);
    }
  }
  gguf::Metadata md;
  md.set("tokenizer.ggml.model", gguf::Value::of_string("llama"));
  md.set("tokenizer.ggml.tokens", gguf::Value::of_array(gguf::ValueType::STRING, std::move(tokens)));
  md.set("tokenizer.ggml.scores", gguf::Value::of_array(gguf::ValueType::FLOAT32, std::move(scores)));
  md.set("tokenizer.ggml.token_type", gguf::Value::of_array(gguf::ValueType::INT32, std::move(types)));
  md.set("tokenizer.ggml.unknown_token_id", gguf::Value::of_uint32(0));
  md.set("tokenizer.ggml.bos_token_id", gguf::Value::of_uint32(1));
  md.set("tokenizer.ggml.eos_token_id", gguf::Value::of_uint32(2));
  return md;
}

gguf::Metadata load_vocab(const std::filesystem::path& path) {
  gguf::OpenOptions opts;
  opts.map_data = false;
  const auto model = gguf::GgufModel::open(path, opts);
  gguf::Metadata md;
  for (const auto& [k, v] : model.metadata().entries())
    if (k.rfind("tokenizer.", 0) == 0) md.set(k, v);
  if (!md.has("tokenizer.ggml.tokens"))
    fail("{}: --vocab file has no tokenizer.ggml.tokens: it is not a GGUF with a vocabulary", path.string());
  return md;
}

}  // namespace moetier::synth
