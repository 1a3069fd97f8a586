#include "tokenizer/spm_encoder.h"

#include <queue>

#include "tokenizer/symbols.h"

namespace moetier::tokenizer {

namespace {

struct Bigram {
  int32_t left;
  int32_t right;
  float score;
  size_t len;  // bytes of the merged text; a stale entry no longer matches its symbols' lengths
};

// Highest score first; among equal scores the leftmost pair.
struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

}  // namespace

void spm_encode(const Vocab& v, std::string_view text, std::vector<int32_t>& out) {
  std::vector<Symbol> sym;
  split_symbols(text, sym);
  if (sym.empty()) return;

  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  const auto try_add = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const Symbol& a = sym[static_cast<size_t>(l)];
    const Symbol& b = sym[static_cast<size_t>(r)];
    const size_t len = a.len + b.len;
    const auto id = v.find(text.substr(a.begin, len));
    if (!id) return;
    queue.push({l, r, v.tokens[static_cast<size_t>(*id)].score, len});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(sym.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Bigram bg = queue.top();
    queue.pop();
    const Symbol& l = sym[static_cast<size_t>(bg.left)];
    const Symbol& r = sym[static_cast<size_t>(bg.right)];
    if (l.len == 0 || r.len == 0 || l.len + r.len != bg.len) continue;
    merge_symbols(sym, bg.left, bg.right);
    try_add(l.prev, bg.left);
    try_add(bg.left, l.next);
  }

  // Every merged symbol is a token by construction, so only unmerged characters can miss the vocab. (The
  // reference also keeps a map to re-split merged symbols, which therefore never fires.)
  for (int32_t i = 0; i != -1; i = sym[static_cast<size_t>(i)].next) {
    const Symbol& s = sym[static_cast<size_t>(i)];
    const std::string_view piece = text.substr(s.begin, s.len);
    if (const auto id = v.find(piece)) {
      out.push_back(*id);
      continue;
    }
    for (const char c : piece) {
      const int32_t b = v.byte_token[static_cast<unsigned char>(c)];
      if (b >= 0) {
        out.push_back(b);
      } else if (const auto single = v.find(std::string_view(&c, 1))) {
        out.push_back(*single);  // vocabs without byte tokens may still have the ASCII character itself
      } else if (v.unk >= 0) {
        out.push_back(v.unk);
      }
    }
  }
}

}  // namespace moetier::tokenizer
