// Reading the tokenizer.ggml.* keys into a Vocab.
#include <string>

#include <fmt/format.h>

#include "gguf/gguf.h"
#include "tokenizer/vocab.h"
#include "util/error.h"

namespace moetier::tokenizer {

namespace {

constexpr std::string_view kModel = "tokenizer.ggml.model";
constexpr std::string_view kTokens = "tokenizer.ggml.tokens";
constexpr std::string_view kScores = "tokenizer.ggml.scores";
constexpr std::string_view kTypes = "tokenizer.ggml.token_type";
constexpr std::string_view kMerges = "tokenizer.ggml.merges";

TokenType to_token_type(int64_t t) {
  // Out-of-range types are kept as Undefined, like the reference loader: such tokens are never produced by
  // the encoders' special-token pass and render as nothing.
  return t >= 1 && t <= 6 ? static_cast<TokenType>(t) : TokenType::undefined;
}

// Optional token-id key: -1 when absent. 0xFFFFFFFF (and -1) is how converters write "no such token"
// (stories260K's padding id); any other id outside the vocab is a broken file.
int32_t read_id(const gguf::Metadata& md, std::string_view key, int32_t n_vocab) {
  const gguf::Value* v = md.find(key);
  if (v == nullptr) return -1;
  const int64_t id = v->type == gguf::ValueType::INT32 || v->type == gguf::ValueType::INT64
                         ? md.get_int(key)
                         : static_cast<int64_t>(md.get_uint(key));
  if (id == -1 || id == 0xFFFFFFFFll) return -1;
  if (id < 0 || id >= n_vocab) fail("metadata key '{}' = {} is not a token id (vocab has {} tokens)", key, id, n_vocab);
  return static_cast<int32_t>(id);
}

bool read_flag(const gguf::Metadata& md, std::string_view key, bool fallback) {
  return md.has(key) ? md.get_bool(key) : fallback;
}

void load_merges(const gguf::Metadata& md, Vocab& v) {
  if (!md.has(kMerges)) fail("metadata key '{}' is missing (required for tokenizer.ggml.model '{}')", kMerges, v.model);
  std::vector<std::string> merges = md.get_string_array(kMerges);
  v.merge_rank.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    // Search from 1: the left part is never empty, and this is how the reference splits the line.
    const size_t sp = merges[i].find(' ', 1);
    if (sp == std::string::npos || sp + 1 >= merges[i].size()) {
      fail("metadata key '{}' entry {} ('{}') is not of the form 'left right'", kMerges, i, merges[i]);
    }
    // First occurrence wins: a repeated merge keeps its best rank.
    v.merge_rank.emplace(std::move(merges[i]), static_cast<int32_t>(i));
  }
}

}  // namespace

int32_t Vocab::rank(std::string_view left, std::string_view right, std::string& scratch) const {
  scratch.assign(left).push_back(' ');
  scratch.append(right);
  const auto it = merge_rank.find(scratch);
  return it == merge_rank.end() ? -1 : it->second;
}

void load_vocab(const gguf::Metadata& md, const PreDefaults& pre, Vocab& v) {
  v.model = md.get_string(kModel);
  if (v.model == "llama") {
    v.kind = VocabKind::sentence_piece;
  } else if (v.model == "gpt2") {
    v.kind = VocabKind::byte_level_bpe;
  } else if (v.model == "gemma4") {
    v.kind = VocabKind::gemma4_bpe;
  } else {
    fail(
        "metadata key '{}' = '{}' is not supported (supported: 'llama' for SentencePiece, 'gpt2' for byte-level "
        "BPE, 'gemma4' for Gemma 4's SentencePiece-style BPE)",
        kModel, v.model);
  }
  v.pre = md.get_string_or("tokenizer.ggml.pre", "");

  std::vector<std::string> texts = md.get_string_array(kTokens);
  if (texts.empty()) fail("metadata key '{}' is empty (expected the token list)", kTokens);
  if (texts.size() > static_cast<size_t>(INT32_MAX)) fail("metadata key '{}' has too many tokens", kTokens);
  const auto n = static_cast<int32_t>(texts.size());

  std::vector<float> scores;
  if (md.has(kScores)) {
    scores = md.get_float_array(kScores);
    if (scores.size() != texts.size()) {
      fail("metadata key '{}' has {} entries, expected {} (one per token)", kScores, scores.size(), texts.size());
    }
  }
  std::vector<int64_t> types;
  if (md.has(kTypes)) {
    types = md.get_int_array(kTypes);
    if (types.size() != texts.size()) {
      fail("metadata key '{}' has {} entries, expected {} (one per token)", kTypes, types.size(), texts.size());
    }
  }

  v.tokens.resize(texts.size());
  v.text_to_id.reserve(texts.size());
  for (int32_t i = 0; i < n; ++i) {
    TokenData& t = v.tokens[static_cast<size_t>(i)];
    t.text = std::move(texts[static_cast<size_t>(i)]);
    // An empty token could never be matched and would alias every empty lookup; give it a unique inert name.
    if (t.text.empty()) t.text = fmt::format("[EMPTY_{}]", i);
    t.score = scores.empty() ? 0.0f : scores[static_cast<size_t>(i)];
    t.type = types.empty() ? TokenType::normal : to_token_type(types[static_cast<size_t>(i)]);
  }
  // Views are taken only after every string reached its final place. A duplicated text maps to its last id.
  for (int32_t i = 0; i < n; ++i) v.text_to_id.insert_or_assign(std::string_view(v.tokens[static_cast<size_t>(i)].text), i);

  v.byte_token.fill(-1);
  if (v.kind != VocabKind::sentence_piece) {
    load_merges(md, v);
    v.ignore_merges = pre.ignore_merges;
  }
  if (v.kind != VocabKind::byte_level_bpe) {
    for (int b = 0; b < 256; ++b) {
      if (auto id = v.find(fmt::format("<0x{:02X}>", b))) v.byte_token[static_cast<size_t>(b)] = *id;
    }
  }

  v.bos = read_id(md, "tokenizer.ggml.bos_token_id", n);
  v.eos = read_id(md, "tokenizer.ggml.eos_token_id", n);
  v.eot = read_id(md, "tokenizer.ggml.eot_token_id", n);
  v.eom = read_id(md, "tokenizer.ggml.eom_token_id", n);
  v.unk = read_id(md, "tokenizer.ggml.unknown_token_id", n);
  v.pad = read_id(md, "tokenizer.ggml.padding_token_id", n);

  const bool spm = v.kind == VocabKind::sentence_piece;
  v.add_bos = read_flag(md, "tokenizer.ggml.add_bos_token", spm || pre.add_bos);
  v.add_eos = read_flag(md, "tokenizer.ggml.add_eos_token", false);
  v.add_space_prefix = read_flag(md, "tokenizer.ggml.add_space_prefix", spm);
  if (v.kind == VocabKind::gemma4_bpe) {
    // The reference overrides add_bos_token = false for Gemma 4 (llama.cpp PR 21500). Its BPE encoder never adds
    // a space prefix; a true add_space_prefix would only make decode's strip_space_prefix drop a real space.
    v.add_bos = true;
    v.add_space_prefix = false;
  }
  if (v.add_bos && v.bos < 0) {
    fail("the vocab adds BOS (tokenizer.ggml.add_bos_token or its default) but 'tokenizer.ggml.bos_token_id' is absent");
  }
  if (v.add_eos && v.eos < 0) {
    fail("'tokenizer.ggml.add_eos_token' is true but 'tokenizer.ggml.eos_token_id' is absent");
  }
}

}  // namespace moetier::tokenizer
