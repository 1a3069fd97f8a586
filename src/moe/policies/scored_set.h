// Resident entries ordered by a score (lowest first), ties broken by recency (least recent first): the victim
// order of the frequency-based policies. O(log n) per update.
#pragma once

#include <cstdint>
#include <set>
#include <vector>

namespace moetier::moe {

class ScoredSet {
 public:
  explicit ScoredSet(int32_t n) : where_(static_cast<size_t>(n)), in_(static_cast<size_t>(n), 0) {}
  bool contains(int32_t i) const { return in_[i] != 0; }
  // Insert i or move it to (score, now): `tick` increases with every update, so ties go to the oldest.
  void set(int32_t i, double score) {
    if (in_[i]) items_.erase(where_[i]);
    where_[i] = items_.insert(Item{score, ++tick_, i}).first;
    in_[i] = 1;
  }
  void erase(int32_t i) {
    if (!in_[i]) return;
    items_.erase(where_[i]);
    in_[i] = 0;
  }
  // Rescale every score by `f` (> 0): order is unchanged, so the items are rewritten in place.
  void rescale(double f) {
    std::set<Item> next;
    for (const Item& it : items_) where_[it.idx] = next.insert(next.end(), Item{it.score * f, it.tick, it.idx});
    items_.swap(next);
  }
  template <class Pred>
  int32_t first_where(Pred ok) const {
    for (const Item& it : items_) {
      if (ok(it.idx)) return it.idx;
    }
    return -1;
  }

 private:
  struct Item {
    double score;
    uint64_t tick;
    int32_t idx;
    bool operator<(const Item& o) const { return score != o.score ? score < o.score : tick < o.tick; }
  };
  std::set<Item> items_;
  std::vector<std::set<Item>::iterator> where_;
  std::vector<uint8_t> in_;
  uint64_t tick_ = 0;
};

}  // namespace moetier::moe
