// Pre-tokenization of byte-level BPE vocabs: splitting text into words with a sequence of regexes before BPE
// merges run inside each word.
//
// Which regexes a vocab uses is named by tokenizer.ggml.pre. The table (pre_tokenizer_table.cpp) gives, per
// name, the regexes of the model's own tokenizer.json / tiktoken definition, as collected by llama.cpp
// (src/llama-vocab.cpp, llm_tokenizer_bpe). Where llama.cpp rewrote a pattern because std::regex lacks
// (?i:...) or \p{Lu}, the original is used: PCRE2 supports it.
//
// Semantics of a regex sequence (HF tokenizers Split with behavior "Isolated", chained by Sequence; llama.cpp
// unicode_regex_split): the first regex splits the text into the matches and the text between matches; each
// following regex splits every piece the same way, seeing only that piece as its subject (so `$` and
// look-ahead stop at the piece's end).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace moetier::tokenizer {

struct PreTokenizerSpec {
  std::string_view family;                 // label of the regex family (aliases share it); kind() shows the stored name
  std::vector<std::string_view> names;     // accepted tokenizer.ggml.pre values
  std::vector<std::string_view> regexes;   // applied in order
  bool ignore_merges = false;              // llama3 family: a word that is a token is not merged further
  bool add_bos = false;                    // default for tokenizer.ggml.add_bos_token
};

// nullptr when `name` is not supported.
const PreTokenizerSpec* find_pre_tokenizer(std::string_view name);
// Comma-separated accepted names, for error messages.
std::string supported_pre_tokenizers();

// A compiled regex sequence. Compiled once per tokenizer (PCRE2 with UTF and UCP, JIT when available);
// split() is const and thread-safe (match data is per call).
class RegexSplitter {
 public:
  explicit RegexSplitter(std::span<const std::string_view> patterns);
  ~RegexSplitter();
  RegexSplitter(RegexSplitter&&) noexcept;
  RegexSplitter& operator=(RegexSplitter&&) noexcept;

  // Consecutive pieces covering `text` exactly, as views into it. Text that is not valid UTF-8 is accepted:
  // each invalid byte is matched as if it were U+FFFD (a symbol, so it groups with punctuation) and stays its
  // own byte in the output, so byte-level BPE still encodes it losslessly.
  std::vector<std::string_view> split(std::string_view text) const;

 private:
  struct Compiled;
  std::vector<std::unique_ptr<Compiled>> regexes_;
};

}  // namespace moetier::tokenizer
