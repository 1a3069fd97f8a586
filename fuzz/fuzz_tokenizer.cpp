// libFuzzer entry for the tokenizers: arbitrary bytes -> ids -> text on every vocabulary in MOETIER_FUZZ_VOCABS
// (a ':'-separated list of GGUF files, each loaded once; scripts/fuzz.sh passes ../shared/tokenizer/*.gguf and
// the stories260K model). The first input byte picks the vocabulary (modulo their number), the rest is the text.
//
// Asserted for every input, as tokenizer.h promises: encode never throws and gives ids in [0, n_vocab), with BOS
// first (and EOS last) exactly when the vocab adds them; decode equals the concatenation of token_to_piece;
// decode(encode(s)) == s wherever the vocab can represent s (below). Anything else (a crash, a sanitizer report,
// an exception, a hang past -timeout) is a finding.
//
// Where the round trip is asserted, and why only there:
//   - bytes: every input byte needs a token that decodes to exactly that byte (a "normal" byte-level symbol, or a
//     SentencePiece <0xXX> byte-fallback token), which is what a text falls back to where no longer token fits.
//     Most shared vocabs have all 256; StarCoder lacks the symbols of 0xC0, 0xC1 and 0xF1, 0xF5..0xFF, and
//     DeepSeek-LLM's symbols of 0xC0, 0xC1 and 0xF5..0xFF are user-defined tokens that render as their own
//     UTF-8 text. Inputs with such a byte are checked for everything but the round trip.
//   - SentencePiece decodes its visible space U+2581 as ' ' (the reference does too), so text containing U+2581
//     does not come back on SPM vocabs.
//   - a special or user-defined token cut out of the text ends a "sentence": with add_space_prefix the text after
//     it gets its own space prefix (llama.cpp's is_prev_special), and tokens with lstrip/rstrip swallow the
//     whitespace beside them. Inputs where either happens are not round-tripped.
// Special tokens are parsed in the second encode (parse_special = true), decoded with render_special, so their
// texts must come back too.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/special_split.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"
#include "util/error.h"

namespace {

using moetier::tokenizer::DecodeOptions;
using moetier::tokenizer::Fragment;
using moetier::tokenizer::TokenType;
using moetier::tokenizer::Tokenizer;
using moetier::tokenizer::VocabKind;

struct LoadedVocab {
  std::string path;
  Tokenizer tok;
  std::array<bool, 256> byte_ok{};  // byte b has a token decoding to exactly b (see the file comment)
};

std::vector<LoadedVocab>* g_vocabs = nullptr;

// Which bytes the vocab's own tokens spell back exactly, from its structure (not from encoding).
std::array<bool, 256> byte_coverage(const Tokenizer& tok) {
  const auto& v = tok.vocab();
  std::array<bool, 256> ok{};
  for (int b = 0; b < 256; ++b) {
    if (v.kind == VocabKind::sentence_piece) {
      ok[static_cast<size_t>(b)] = v.byte_token[static_cast<size_t>(b)] >= 0;
    } else {
      const auto id = v.find(moetier::tokenizer::byte_level_encode(std::string(1, static_cast<char>(b))));
      ok[static_cast<size_t>(b)] = id && v.tokens[static_cast<size_t>(*id)].type == TokenType::normal;
    }
  }
  return ok;
}

// Whether the text's special-token split leaves it unchanged by the encoder's sentence and strip rules.
bool split_keeps_text(const Tokenizer& tok, std::string_view text, bool parse_special) {
  const auto& v = tok.vocab();
  for (const Fragment& f : moetier::tokenizer::split_special(v, text, parse_special)) {
    if (f.token < 0) continue;
    if (v.kind == VocabKind::sentence_piece && v.add_space_prefix) return false;
    const auto& t = v.tokens[static_cast<size_t>(f.token)];
    if (t.lstrip || t.rstrip) return false;
  }
  return true;
}

void check(bool ok, const char* what, const LoadedVocab& lv) {
  if (ok) return;
  std::fprintf(stderr, "fuzz_tokenizer: %s (vocab %s)\n", what, lv.path.c_str());
  std::abort();
}

void check_ids(const LoadedVocab& lv, std::span<const int32_t> ids) {
  for (const int32_t id : ids) check(id >= 0 && id < lv.tok.n_vocab(), "encode gave an id out of range", lv);
  // Streaming equals decoding the whole: decode is the concatenation of the pieces.
  for (const bool render : {false, true}) {
    std::string pieces;
    for (const int32_t id : ids) pieces += lv.tok.token_to_piece(id, render);
    check(pieces == lv.tok.decode(ids, {.render_special = render}), "decode differs from its token pieces", lv);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* list = std::getenv("MOETIER_FUZZ_VOCABS");
  if (list == nullptr || *list == '\0') {
    std::fprintf(stderr, "fuzz_tokenizer: set MOETIER_FUZZ_VOCABS to a ':'-separated list of GGUF vocab files\n");
    std::exit(2);
  }
  static std::vector<LoadedVocab> vocabs;
  std::string_view rest = list;
  while (!rest.empty()) {
    const size_t colon = rest.find(':');
    const std::string path(rest.substr(0, colon));
    rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
    if (path.empty()) continue;
    try {
      const auto model = moetier::gguf::GgufModel::open(path);
      Tokenizer tok = Tokenizer::from_metadata(model.metadata());
      const auto cover = byte_coverage(tok);
      const auto n_ok = std::count(cover.begin(), cover.end(), true);
      std::fprintf(stderr, "fuzz_tokenizer: vocab %zu = %s (%s, %d tokens, %td/256 bytes round-trip)\n",
                   vocabs.size(), path.c_str(), std::string(tok.kind()).c_str(), tok.n_vocab(), n_ok);
      vocabs.push_back({path, std::move(tok), cover});
    } catch (const moetier::Error& e) {
      std::fprintf(stderr, "fuzz_tokenizer: cannot load %s: %s\n", path.c_str(), e.what());
      std::exit(2);
    }
  }
  g_vocabs = &vocabs;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || g_vocabs->empty()) return 0;
  const LoadedVocab& lv = (*g_vocabs)[data[0] % g_vocabs->size()];
  const Tokenizer& tok = lv.tok;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const bool spm = tok.vocab().kind == VocabKind::sentence_piece;
  const bool representable = std::all_of(text.begin(), text.end(),
                                         [&](char c) { return lv.byte_ok[static_cast<unsigned char>(c)]; });
  const bool spm_space_free = !spm || text.find("\xE2\x96\x81") == std::string_view::npos;
  const DecodeOptions whole{.render_special = false, .strip_space_prefix = true};

  // Plain text: user-defined tokens are the only ones cut out.
  const std::vector<int32_t> plain = tok.encode(text, false, false);
  check_ids(lv, plain);
  if (representable && spm_space_free && split_keeps_text(tok, text, false)) {
    check(tok.decode(plain, whole) == text, "decode(encode(s)) != s", lv);
  }

  // With BOS/EOS and special tokens parsed, as a chat prompt is encoded.
  const std::vector<int32_t> special = tok.encode(text, true, true);
  check_ids(lv, special);
  const auto& v = tok.vocab();
  std::span<const int32_t> body(special);
  if (v.add_bos) {
    check(!body.empty() && body.front() == v.bos, "add_special did not start with BOS", lv);
    body = body.subspan(1);
  }
  if (v.add_eos) {
    check(!body.empty() && body.back() == v.eos, "add_special did not end with EOS", lv);
    body = body.first(body.size() - 1);
  }
  if (representable && spm_space_free && split_keeps_text(tok, text, true)) {
    check(tok.decode(body, {.render_special = true, .strip_space_prefix = true}) == text,
          "decode(encode(s, parse_special), render_special) != s", lv);
  }
  return 0;
}
