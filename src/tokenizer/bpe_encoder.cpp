#include "tokenizer/bpe_encoder.h"

#include <queue>
#include <string>

namespace moetier::tokenizer {

namespace {

struct Bigram {
  int32_t left;
  int32_t right;
  int32_t rank;
  size_t left_len;   // symbol lengths when queued: a symbol only ever grows, so a changed length marks the entry
  size_t right_len;  // as stale (its text is no longer the pair that was ranked)
};

// Lowest rank first; among equal ranks the leftmost pair.
struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

}  // namespace

void bpe_merge(const Vocab& v, std::string_view word, std::vector<Symbol>& sym) {
  split_symbols(word, sym);

  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  std::string scratch;
  const auto try_add = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const Symbol& a = sym[static_cast<size_t>(l)];
    const Symbol& b = sym[static_cast<size_t>(r)];
    const int32_t rank = v.rank(word.substr(a.begin, a.len), word.substr(b.begin, b.len), scratch);
    if (rank < 0) return;
    queue.push({l, r, rank, a.len, b.len});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(sym.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Bigram bg = queue.top();
    queue.pop();
    const Symbol& l = sym[static_cast<size_t>(bg.left)];
    const Symbol& r = sym[static_cast<size_t>(bg.right)];
    if (l.len != bg.left_len || r.len != bg.right_len || l.len == 0 || r.len == 0) continue;
    merge_symbols(sym, bg.left, bg.right);
    try_add(l.prev, bg.left);
    try_add(bg.left, l.next);
  }
}

void bpe_encode_word(const Vocab& v, std::string_view word, std::vector<int32_t>& out) {
  if (word.empty()) return;
  if (v.ignore_merges) {
    if (const auto id = v.find(word)) {
      out.push_back(*id);
      return;
    }
  }

  std::vector<Symbol> sym;
  bpe_merge(v, word, sym);

  for (int32_t i = 0; i != -1; i = sym[static_cast<size_t>(i)].next) {
    const Symbol& s = sym[static_cast<size_t>(i)];
    const std::string_view piece = word.substr(s.begin, s.len);
    if (const auto id = v.find(piece)) {
      out.push_back(*id);
      continue;
    }
    // A merge result that is not a token (inconsistent vocab) or a byte whose symbol the vocab lacks (StarCoder
    // has none for bytes that never occur in UTF-8): like the reference, try single-byte lookups and drop what
    // is not found. An unknown token is used only if the vocab has a genuine one; some name "<|endoftext|>"
    // as unknown, and inserting an end-of-text marker into a prompt would be worse than dropping a byte.
    bool any = false;
    for (const char c : piece) {
      if (const auto b = v.find(std::string_view(&c, 1))) {
        out.push_back(*b);
        any = true;
      }
    }
    if (!any && v.unk >= 0 && v.tokens[static_cast<size_t>(v.unk)].type == TokenType::unknown) out.push_back(v.unk);
  }
}

}  // namespace moetier::tokenizer
