// A tokenizer vocabulary as stored in GGUF metadata (keys tokenizer.ggml.*), resolved into lookup tables.
//
// Source of the key meanings and defaults: ggml docs/gguf.md ("Tokenizer") and llama.cpp src/llama-vocab.cpp
// (llama_vocab::impl::load), whose behaviour the test vectors in ../shared/tokenizer pin down:
//   - tokenizer.ggml.model "llama" = SentencePiece (BPE over scores with byte fallback), "gpt2" = byte-level BPE
//     over ranked merges, "gemma4" = SentencePiece-style BPE over ranked merges (gemma4_encoder.h);
//   - SentencePiece defaults: add BOS, no EOS, add a space prefix; byte-level BPE defaults: no BOS, no EOS, no
//     space prefix; tokenizer.ggml.add_bos_token / add_eos_token / add_space_prefix override them, and the
//     llama3-family pre-tokenizers default to adding BOS;
//   - "gemma4": BOS is always added, even where tokenizer.ggml.add_bos_token is false (the reference's
//     "workaround for Gemma 4", llama.cpp PR 21500); no space prefix, whatever the key says (its encoder never
//     adds one); tokenizer.ggml.pre is ignored (the reference forces "gemma4");
//   - token types: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace moetier::gguf {
class Metadata;
}

namespace moetier::tokenizer {

// tokenizer.ggml.token_type values, numbered as llama.cpp's LLAMA_TOKEN_TYPE_*.
enum class TokenType : uint8_t {
  undefined = 0, normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6,
};

enum class VocabKind : uint8_t {
  sentence_piece,  // "llama"
  byte_level_bpe,  // "gpt2"
  gemma4_bpe,      // "gemma4": merges over raw UTF-8 with "▁" for spaces and "<0xXX>" byte fallback
};

struct TokenData {
  std::string text;
  float score = 0.0f;
  TokenType type = TokenType::normal;
  // Special-token splitting: strip whitespace to the left/right of this token's match (HF AddedToken
  // lstrip/rstrip). GGUF does not carry these; see special_tokens.cpp for where they come from.
  bool lstrip = false;
  bool rstrip = false;
};

// Everything the encoders and the detokenizer read. Immutable after load_vocab; safe to share across threads.
// Not copyable: text_to_id holds views into `tokens`.
struct Vocab {
  VocabKind kind = VocabKind::sentence_piece;
  std::string model;  // tokenizer.ggml.model as stored
  std::string pre;    // tokenizer.ggml.pre as stored ("" when absent)

  std::vector<TokenData> tokens;                          // [n_vocab]
  std::unordered_map<std::string_view, int32_t> text_to_id;  // views into tokens[i].text

  // BPE ("gpt2", "gemma4"): "left right" (the merge line itself) -> rank (index in tokenizer.ggml.merges).
  std::unordered_map<std::string, int32_t> merge_rank;
  bool ignore_merges = false;  // a pre-tokenized word that is itself a token is emitted whole (llama3 family)

  // Byte fallback of "llama" and "gemma4" vocabs: id of "<0xXX>" per byte, -1 where the vocab lacks it.
  std::array<int32_t, 256> byte_token{};

  int32_t bos = -1, eos = -1, eot = -1, eom = -1, unk = -1, pad = -1;
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = false;

  // Control, user-defined and unknown tokens, longest text first (ties by id): the order in which their texts
  // are cut out of the input before pre-tokenization.
  std::vector<int32_t> special_tokens;
  std::vector<int32_t> eog;  // end-of-generation ids, sorted

  Vocab() = default;
  Vocab(const Vocab&) = delete;
  Vocab& operator=(const Vocab&) = delete;

  int32_t n_vocab() const { return static_cast<int32_t>(tokens.size()); }
  std::optional<int32_t> find(std::string_view text) const {
    const auto it = text_to_id.find(text);
    if (it == text_to_id.end()) return std::nullopt;
    return it->second;
  }
  // Rank of merging `left` and `right`, or -1 when they do not merge. `scratch` is reused between calls to
  // build the lookup key without allocating.
  int32_t rank(std::string_view left, std::string_view right, std::string& scratch) const;
};

// Reads the vocabulary keys; throws moetier::Error naming the missing or malformed key and what was expected.
// Does not decide the pre-tokenizer: the caller has validated tokenizer.ggml.pre and passes what it implies.
struct PreDefaults {
  bool ignore_merges = false;
  bool add_bos = false;  // default for add_bos before tokenizer.ggml.add_bos_token overrides it
};
void load_vocab(const gguf::Metadata& md, const PreDefaults& pre, Vocab& v);

// Post-load passes over the token list (special_tokens.cpp): types and strip flags of control-looking tokens,
// the special-token cutting order and the end-of-generation set.
void resolve_special_tokens(const gguf::Metadata& md, Vocab& v);

}  // namespace moetier::tokenizer
