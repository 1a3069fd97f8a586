// The symbol list the merge-based encoders (SentencePiece, byte-level BPE, Gemma 4's BPE) work on: the text split
// into UTF-8 characters, doubly linked, where merging a pair grows the left symbol and unlinks the right one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/utf8.h"

namespace moetier::tokenizer {

struct Symbol {
  int32_t prev;  // index of the left neighbour, -1 at the start
  int32_t next;  // index of the right neighbour, -1 at the end
  size_t begin;  // byte offset into the text
  size_t len;    // bytes; 0 once merged into its left neighbour
};

// One symbol per UTF-8 character of `text`; an invalid byte is a symbol of its own.
inline void split_symbols(std::string_view text, std::vector<Symbol>& sym) {
  sym.clear();
  sym.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t vl = utf8_valid_len(text, i);
    const size_t len = vl == 0 ? 1 : vl;
    const auto idx = static_cast<int32_t>(sym.size());
    sym.push_back({idx - 1, i + len == text.size() ? -1 : idx + 1, i, len});
    i += len;
  }
}

// Merges sym[right] (the right neighbour of sym[left]) into sym[left].
inline void merge_symbols(std::vector<Symbol>& sym, int32_t left, int32_t right) {
  Symbol& l = sym[static_cast<size_t>(left)];
  Symbol& r = sym[static_cast<size_t>(right)];
  l.len += r.len;
  r.len = 0;
  l.next = r.next;
  if (r.next >= 0) sym[static_cast<size_t>(r.next)].prev = left;
}

}  // namespace moetier::tokenizer
