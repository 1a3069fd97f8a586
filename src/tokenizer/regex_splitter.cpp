// PCRE2-backed RegexSplitter (see pre_tokenizer.h).
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cassert>
#include <new>
#include <string>

#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace moetier::tokenizer {

namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  const int n = pcre2_get_error_message(code, buf, sizeof buf);
  return n < 0 ? std::to_string(code) : std::string(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
}

// The subject actually matched: valid UTF-8 always. When the input is not, each invalid byte is replaced by
// U+FFFD and `orig` maps every code point boundary of the subject back to the input.
struct Subject {
  std::string_view text;        // what PCRE2 sees
  std::string storage;          // owns text when it had to be rewritten
  std::vector<size_t> orig;     // subject offset -> input offset (only when rewritten); size text.size() + 1
};

Subject make_subject(std::string_view input) {
  Subject s;
  size_t i = 0;
  while (i < input.size()) {
    const size_t len = utf8_valid_len(input, i);
    if (len == 0) break;
    i += len;
  }
  if (i == input.size()) {
    s.text = input;
    return s;
  }
  s.storage.reserve(input.size() + 16);
  s.orig.reserve(input.size() + 16);
  i = 0;
  while (i < input.size()) {
    const size_t len = utf8_valid_len(input, i);
    if (len == 0) {
      for (int k = 0; k < 3; ++k) s.orig.push_back(i);
      s.storage += "\xEF\xBF\xBD";
      ++i;
    } else {
      for (size_t k = 0; k < len; ++k) s.orig.push_back(i + k);
      s.storage.append(input.substr(i, len));
      i += len;
    }
  }
  s.orig.push_back(input.size());
  s.text = s.storage;
  return s;
}

// Per-call match state, so split() can run on many threads over one compiled regex.
struct MatchData {
  pcre2_match_data* md;
  explicit MatchData(const pcre2_code* code) : md(pcre2_match_data_create_from_pattern(code, nullptr)) {
    if (md == nullptr) throw std::bad_alloc();
  }
  ~MatchData() { pcre2_match_data_free(md); }
  MatchData(const MatchData&) = delete;
  MatchData& operator=(const MatchData&) = delete;
};

}  // namespace

struct RegexSplitter::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

RegexSplitter::RegexSplitter(std::span<const std::string_view> patterns) {
  for (std::string_view p : patterns) {
    auto c = std::make_unique<Compiled>();
    int err = 0;
    PCRE2_SIZE err_off = 0;
    // UTF + UCP: \s, \p{..}, \w follow Unicode properties as in the HF / tiktoken regex engines.
    // DOLLAR_ENDONLY: `$` means end of subject only, as in ECMAScript and Rust regex (PCRE2 would otherwise also
    // match before a final newline).
    c->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p.data()), p.size(),
                            PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &err, &err_off, nullptr);
    if (c->code == nullptr) {
      // The patterns are compiled-in constants, so this is a build defect, reported with the offending pattern.
      fail("pre-tokenizer regex '{}' does not compile at offset {}: {}", p, err_off, pcre2_message(err));
    }
    // JIT is an optimisation only; without it (unsupported CPU, W^X policy) the interpreter gives the same result.
    (void)pcre2_jit_compile(c->code, PCRE2_JIT_COMPLETE);
    regexes_.push_back(std::move(c));
  }
}

RegexSplitter::~RegexSplitter() = default;
RegexSplitter::RegexSplitter(RegexSplitter&&) noexcept = default;
RegexSplitter& RegexSplitter::operator=(RegexSplitter&&) noexcept = default;

std::vector<std::string_view> RegexSplitter::split(std::string_view input) const {
  const Subject subj = make_subject(input);
  const std::string_view text = subj.text;
  const auto* base = reinterpret_cast<PCRE2_SPTR>(text.data());

  // Pieces as [begin, end) offsets into `text`.
  std::vector<std::pair<size_t, size_t>> pieces;
  if (!text.empty()) pieces.emplace_back(0, text.size());
  std::vector<std::pair<size_t, size_t>> next;

  for (const auto& re : regexes_) {
    const MatchData holder(re->code);
    pcre2_match_data* md = holder.md;
    next.clear();
    for (const auto& [begin, end] : pieces) {
      const PCRE2_SPTR subject = base + begin;
      const size_t len = end - begin;
      size_t pos = 0;   // search start within the piece
      size_t emitted = 0;  // end of what has been emitted so far
      while (pos < len) {
        int rc = pcre2_match(re->code, subject, len, pos, PCRE2_NO_UTF_CHECK, md, nullptr);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
          // Long runs (e.g. 100k spaces) can exhaust the JIT stack; the interpreter uses the heap instead.
          rc = pcre2_match(re->code, subject, len, pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, nullptr);
        }
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) fail("pre-tokenizer regex failed on the input ({})", pcre2_message(rc));
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        const size_t ms = ov[0], me = ov[1];
        if (me == ms) {
          // None of the table's patterns can match empty; should one, skip a code point and keep searching.
          pos = ms + utf8_valid_len(text, begin + ms);
          continue;
        }
        if (ms > emitted) next.emplace_back(begin + emitted, begin + ms);
        next.emplace_back(begin + ms, begin + me);
        emitted = pos = me;
      }
      if (emitted < len) next.emplace_back(begin + emitted, end);
    }
    pieces.swap(next);
  }

  std::vector<std::string_view> out;
  out.reserve(pieces.size());
  for (const auto& [b, e] : pieces) {
    if (subj.orig.empty()) {
      out.push_back(input.substr(b, e - b));
    } else {
      const size_t ob = subj.orig[b], oe = subj.orig[e];
      // A replacement character maps all its three bytes to one input byte; pieces never split it.
      assert(oe > ob);
      out.push_back(input.substr(ob, oe - ob));
    }
  }
  return out;
}

}  // namespace moetier::tokenizer
