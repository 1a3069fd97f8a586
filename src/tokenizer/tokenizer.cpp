// Tokenizer: loading and the encode pipeline (special-token split, then SentencePiece, pre-tokenizer + byte-level
// BPE, or Gemma 4's SentencePiece-style BPE).
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "gguf/gguf.h"
#include "tokenizer/bpe_encoder.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/gemma4_encoder.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/special_split.h"
#include "tokenizer/spm_encoder.h"
#include "tokenizer/vocab.h"
#include "util/error.h"

namespace moetier::tokenizer {

struct Tokenizer::Impl {
  Vocab vocab;
  std::optional<RegexSplitter> splitter;  // byte-level BPE only
  std::string kind;

  void check_id(int32_t id) const {
    if (id < 0 || id >= vocab.n_vocab()) fail("token id {} is out of range (vocab has {} tokens)", id, vocab.n_vocab());
  }
  void encode_spm(const std::vector<Fragment>& frags, bool add_special, std::vector<int32_t>& out) const;
  void encode_bpe(const std::vector<Fragment>& frags, bool add_special, std::vector<int32_t>& out) const;
  void encode_gemma4(const std::vector<Fragment>& frags, bool add_special, std::vector<int32_t>& out) const;
};

Tokenizer::Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

Tokenizer Tokenizer::from_metadata(const gguf::Metadata& md) {
  auto impl = std::make_shared<Impl>();
  const std::string model = md.get_string("tokenizer.ggml.model");
  PreDefaults defaults;
  const PreTokenizerSpec* spec = nullptr;
  if (model == "gpt2") {
    // SentencePiece ignores tokenizer.ggml.pre (converters write "default" there); byte-level BPE cannot work
    // without knowing its word-splitting rules, so a missing or unknown value is an error, not a guess.
    if (!md.has("tokenizer.ggml.pre")) {
      fail("metadata key 'tokenizer.ggml.pre' is missing (byte-level BPE needs its pre-tokenizer; supported: {})",
           supported_pre_tokenizers());
    }
    const std::string& pre = md.get_string("tokenizer.ggml.pre");
    spec = find_pre_tokenizer(pre);
    if (spec == nullptr) {
      fail("metadata key 'tokenizer.ggml.pre' = '{}' is not a supported pre-tokenizer (supported: {})", pre,
           supported_pre_tokenizers());
    }
    defaults.ignore_merges = spec->ignore_merges;
    defaults.add_bos = spec->add_bos;
  }
  load_vocab(md, defaults, impl->vocab);
  resolve_special_tokens(md, impl->vocab);
  if (spec != nullptr) {
    impl->splitter.emplace(spec->regexes);
    impl->kind = fmt::format("gpt2 (byte-level BPE, pre={})", impl->vocab.pre);
  } else if (impl->vocab.kind == VocabKind::gemma4_bpe) {
    // tokenizer.ggml.pre is not read: the reference forces "gemma4" for this model whatever the file says.
    impl->kind = "gemma4 (SentencePiece-style BPE)";
  } else {
    impl->kind = "llama (SentencePiece)";
  }
  return Tokenizer(std::move(impl));
}

void Tokenizer::Impl::encode_spm(const std::vector<Fragment>& frags, bool add_special,
                                 std::vector<int32_t>& out) const {
  if (add_special && vocab.add_bos) out.push_back(vocab.bos);
  // SentencePiece adds a space in front of the text ("add_dummy_prefix"); after a special token the following
  // text starts a new "sentence" and gets one too (llama.cpp: is_prev_special).
  bool prev_special = true;
  std::string buf;
  for (const Fragment& f : frags) {
    if (f.token >= 0) {
      out.push_back(f.token);
      prev_special = true;
      continue;
    }
    buf.clear();
    if (vocab.add_space_prefix && prev_special) buf += "\xE2\x96\x81";
    for (const char c : f.text) {
      if (c == ' ') {
        buf += "\xE2\x96\x81";  // U+2581, SentencePiece's visible space
      } else {
        buf.push_back(c);
      }
    }
    spm_encode(vocab, buf, out);
    prev_special = false;
  }
  if (add_special && vocab.add_eos) out.push_back(vocab.eos);
}

void Tokenizer::Impl::encode_bpe(const std::vector<Fragment>& frags, bool add_special,
                                 std::vector<int32_t>& out) const {
  if (add_special && vocab.add_bos) out.push_back(vocab.bos);
  for (const Fragment& f : frags) {
    if (f.token >= 0) {
      out.push_back(f.token);
      continue;
    }
    for (std::string_view word : splitter->split(f.text)) bpe_encode_word(vocab, byte_level_encode(word), out);
  }
  if (add_special && vocab.add_eos) out.push_back(vocab.eos);
}

void Tokenizer::Impl::encode_gemma4(const std::vector<Fragment>& frags, bool add_special,
                                    std::vector<int32_t>& out) const {
  if (add_special && vocab.add_bos) out.push_back(vocab.bos);
  for (const Fragment& f : frags) {
    if (f.token >= 0) {
      out.push_back(f.token);
    } else {
      gemma4_encode(vocab, f.text, out);
    }
  }
  if (add_special && vocab.add_eos) out.push_back(vocab.eos);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  const Impl& im = *impl_;
  const std::vector<Fragment> frags = split_special(im.vocab, text, parse_special);
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  switch (im.vocab.kind) {
    case VocabKind::sentence_piece:
      im.encode_spm(frags, add_special, out);
      break;
    case VocabKind::byte_level_bpe:
      im.encode_bpe(frags, add_special, out);
      break;
    case VocabKind::gemma4_bpe:
      im.encode_gemma4(frags, add_special, out);
      break;
  }
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, const DecodeOptions& opts) const {
  const Impl& im = *impl_;
  std::string out;
  bool strip = opts.strip_space_prefix && im.vocab.add_space_prefix;
  for (const int32_t id : ids) {
    im.check_id(id);
    const size_t before = out.size();
    append_piece(im.vocab, id, opts.render_special, out);
    if (strip && out.size() > before) {
      if (out[before] == ' ') out.erase(before, 1);
      strip = false;
    }
  }
  return out;
}

std::string Tokenizer::token_to_piece(int32_t id, bool render_special) const {
  impl_->check_id(id);
  std::string out;
  append_piece(impl_->vocab, id, render_special, out);
  return out;
}

int32_t Tokenizer::n_vocab() const { return impl_->vocab.n_vocab(); }
int32_t Tokenizer::bos() const { return impl_->vocab.bos; }
int32_t Tokenizer::eos() const { return impl_->vocab.eos; }
bool Tokenizer::add_bos() const { return impl_->vocab.add_bos; }

bool Tokenizer::is_eog(int32_t id) const {
  const auto& eog = impl_->vocab.eog;
  return std::binary_search(eog.begin(), eog.end(), id);
}

std::span<const int32_t> Tokenizer::eog_ids() const { return impl_->vocab.eog; }

std::optional<int32_t> Tokenizer::find_token(std::string_view text) const { return impl_->vocab.find(text); }

const std::string& Tokenizer::token_text(int32_t id) const {
  impl_->check_id(id);
  return impl_->vocab.tokens[static_cast<size_t>(id)].text;
}

std::string_view Tokenizer::kind() const { return impl_->kind; }

const Vocab& Tokenizer::vocab() const { return impl_->vocab; }

}  // namespace moetier::tokenizer
