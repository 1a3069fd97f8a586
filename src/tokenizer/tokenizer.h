// Text <-> token ids for the vocabularies stored in GGUF files: SentencePiece ("llama"), byte-level BPE ("gpt2")
// with the pre-tokenizers listed by supported_pre_tokenizers(), and Gemma 4's SentencePiece-style BPE ("gemma4").
//
// The behaviour is that of llama.cpp's tokenizer (src/llama-vocab.cpp), which is what GGUF models are
// published and evaluated with; ../shared/tokenizer holds its vectors, and tests/tokenizer reproduces them all.
// Algorithms and their sources are documented per file: vocab.h (keys and defaults), special_split.h,
// pre_tokenizer.h, spm_encoder.h, bpe_encoder.h, byte_level.h, gemma4_encoder.h, detokenizer.h. No reference
// vectors exist yet for "gemma4"; its rules are read from the reference source (gemma4_encoder.h).
//
// Differences from the reference, by design: text that is not valid UTF-8 is encoded byte by byte (byte
// fallback / byte-level symbols) instead of being replaced by U+FFFD, so encode/decode round-trips any bytes;
// decode() never applies the reference's "clean up tokenization spaces" pass.
//
// A Tokenizer is immutable after from_metadata and cheap to copy (shared state); all const members are
// thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace moetier::gguf {
class Metadata;
}

namespace moetier::tokenizer {

struct Vocab;

struct DecodeOptions {
  // Include the text of control and unknown tokens ("<|im_start|>", "<s>"); by default they render as nothing.
  bool render_special = false;
  // The ids encode a whole text that encode() started with a space prefix (SentencePiece vocabs with
  // add_space_prefix): drop that one leading space, so decode(encode(s)) == s. Leave false when decoding a
  // continuation (generated tokens), whose leading space is real.
  bool strip_space_prefix = false;
};

class Tokenizer {
 public:
  // Reads tokenizer.ggml.* keys. Throws moetier::Error naming a missing or malformed key; an unsupported
  // tokenizer.ggml.model or tokenizer.ggml.pre is an error that names it and lists the supported values.
  static Tokenizer from_metadata(const gguf::Metadata& md);

  // add_special: BOS (and EOS) where the vocab says (tokenizer.ggml.add_bos_token / add_eos_token, with the
  // per-model defaults of vocab.h). parse_special: texts of control tokens in `text` become their ids;
  // user-defined tokens are always recognised, unknown-token text only with parse_special. Any bytes are
  // accepted.
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;

  // Concatenation of the tokens' pieces (see token_to_piece), so decoding a whole sequence equals streaming it
  // token by token. Throws moetier::Error on an id outside [0, n_vocab).
  std::string decode(std::span<const int32_t> ids, const DecodeOptions& opts = {}) const;

  // Text of one token for streaming output; may be part of a UTF-8 sequence (byte tokens, byte-level BPE).
  // Control and unknown tokens give "" unless render_special. Throws on an id outside [0, n_vocab).
  std::string token_to_piece(int32_t id, bool render_special = false) const;

  int32_t n_vocab() const;
  int32_t bos() const;  // -1 when the vocab has none
  int32_t eos() const;  // -1 when the vocab has none
  bool add_bos() const;  // whether encode(..., add_special=true, ...) starts with bos()
  // End of generation: eos, eot, eom and the vocab's end-of-turn markers (<|im_end|>, <|eot_id|>,
  // <|endoftext|>, <|end|>, <|return|>, <end_of_turn>, ...). For gpt-oss vocabs (which have <|return|>),
  // <|end|> only closes a message and is not end of generation.
  bool is_eog(int32_t id) const;
  std::span<const int32_t> eog_ids() const;  // sorted
  // Id of the token whose vocab text is exactly `text` (as stored: "▁the", "Ġthe", "<|im_end|>").
  std::optional<int32_t> find_token(std::string_view text) const;
  const std::string& token_text(int32_t id) const;  // vocab text as stored; throws on a bad id
  // "llama (SentencePiece)", "gpt2 (byte-level BPE, pre=qwen2)" or "gemma4 (SentencePiece-style BPE)".
  std::string_view kind() const;

  const Vocab& vocab() const;  // for diagnostics and tests

 private:
  struct Impl;
  explicit Tokenizer(std::shared_ptr<const Impl> impl);
  std::shared_ptr<const Impl> impl_;
};

}  // namespace moetier::tokenizer

namespace moetier {
using tokenizer::Tokenizer;  // the one public type of the module, also reachable as moetier::Tokenizer
}  // namespace moetier
