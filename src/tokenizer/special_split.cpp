#include "tokenizer/special_split.h"

namespace moetier::tokenizer {

namespace {

// The C locale's isspace, which the reference uses for lstrip/rstrip.
bool is_ascii_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }

// Splits one raw fragment at every occurrence of `needle` (token `id`), appending the parts to `out`.
// Returns false (appending nothing) when the needle does not occur.
bool split_fragment(std::string_view raw, std::string_view needle, int32_t id, const TokenData& tok,
                    std::vector<Fragment>& out) {
  size_t pos = raw.find(needle);
  if (pos == std::string_view::npos) return false;
  while (pos != std::string_view::npos) {
    std::string_view left = raw.substr(0, pos);
    if (tok.lstrip) {
      while (!left.empty() && is_ascii_space(left.back())) left.remove_suffix(1);
    }
    if (!left.empty()) out.push_back({-1, left});
    out.push_back({id, {}});
    raw.remove_prefix(pos + needle.size());
    if (tok.rstrip) {
      while (!raw.empty() && is_ascii_space(raw.front())) raw.remove_prefix(1);
    }
    pos = raw.find(needle);
  }
  if (!raw.empty()) out.push_back({-1, raw});
  return true;
}

}  // namespace

std::vector<Fragment> split_special(const Vocab& v, std::string_view text, bool parse_special) {
  std::vector<Fragment> frags;
  if (text.empty()) return frags;
  frags.push_back({-1, text});
  std::vector<Fragment> next;
  for (const int32_t id : v.special_tokens) {
    const TokenData& tok = v.tokens[static_cast<size_t>(id)];
    if (!parse_special && tok.type != TokenType::user_defined) continue;
    const std::string_view needle = tok.text;
    bool changed = false;
    next.clear();
    for (const Fragment& f : frags) {
      if (f.token >= 0 || f.text.size() < needle.size() || !split_fragment(f.text, needle, id, tok, next)) {
        next.push_back(f);
      } else {
        changed = true;
      }
    }
    if (changed) frags.swap(next);
  }
  return frags;
}

}  // namespace moetier::tokenizer
