// An intrusive doubly linked recency list over entry indices [0, n): O(1) touch and unlink, walk from the
// least recently used end. Arrays instead of nodes so that the steady state does not allocate.
#pragma once

#include <cstdint>
#include <vector>

namespace moetier::moe {

class LruList {
 public:
  explicit LruList(int32_t n) : prev_(static_cast<size_t>(n) + 1, -1), next_(static_cast<size_t>(n) + 1, -1), head_(n) {
    prev_[head_] = next_[head_] = head_;  // the sentinel: next_ is the LRU end, prev_ the MRU end
  }
  bool linked(int32_t i) const { return next_[i] >= 0; }
  // Make i the most recently used (linking it if needed).
  void touch(int32_t i) {
    if (linked(i)) unlink(i);
    const int32_t last = prev_[head_];
    prev_[i] = last;
    next_[i] = head_;
    next_[last] = i;
    prev_[head_] = i;
  }
  void unlink(int32_t i) {
    next_[prev_[i]] = next_[i];
    prev_[next_[i]] = prev_[i];
    prev_[i] = next_[i] = -1;
  }
  // Walk from the least recently used end: first() then after(i); end() when done.
  int32_t first() const { return next_[head_]; }
  int32_t after(int32_t i) const { return next_[i]; }
  int32_t end() const { return head_; }

 private:
  std::vector<int32_t> prev_, next_;
  int32_t head_;  // sentinel index n
};

}  // namespace moetier::moe
