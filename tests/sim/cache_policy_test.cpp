// The shared cache-policy component on hand-made batches: the batch rule, strict capacity, swaps, the factory.
#include <algorithm>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "moe/cache_policy.h"
#include "util/error.h"

namespace moetier::test {
namespace {

using moe::AccessResult;
using moe::CacheConfig;
using moe::ExpertKey;
using moe::Phase;

CacheConfig small(int64_t entries, bool strict = false) {
  CacheConfig c;
  c.n_moe_layers = 2;
  c.n_expert = 8;
  c.n_expert_used = 2;
  c.expert_bytes = {100, 100};
  c.capacity_entries = entries;
  c.strict = strict;
  c.cliff_guard = false;
  return c;
}

std::vector<int32_t> ids(std::initializer_list<int32_t> l) { return l; }

TEST(CachePolicy, LruHitsMissesAndEvictionAfterTheBatch) {
  auto p = moe::make_policy("lru", small(3));
  AccessResult r;
  p->access(0, ids({1, 2, 3}), Phase::decode, r);
  EXPECT_EQ(r.misses, 3);
  EXPECT_EQ(r.miss_bytes, 300u);
  EXPECT_TRUE(r.evicted.empty());
  p->access(0, ids({1, 4}), Phase::decode, r);  // 1 hits; 4 evicts the LRU entry, 2
  EXPECT_EQ(r.hit, std::vector<uint8_t>({1, 0}));
  ASSERT_EQ(r.evicted.size(), 1u);
  EXPECT_EQ(r.evicted[0], (ExpertKey{0, 2}));
  EXPECT_FALSE(p->contains({0, 2}));
  EXPECT_TRUE(p->contains({0, 4}));
  EXPECT_EQ(p->resident_entries(), 3);
}

TEST(CachePolicy, BudgetModeNeverEvictsTheBatchAndMayStayOver) {
  auto p = moe::make_policy("lru", small(2));
  AccessResult r;
  p->access(0, ids({1, 2, 3, 4}), Phase::prefill, r);  // the batch alone exceeds the capacity
  EXPECT_TRUE(r.evicted.empty());
  EXPECT_TRUE(r.not_retained.empty());
  EXPECT_EQ(p->resident_entries(), 4);
  p->access(1, ids({5}), Phase::prefill, r);  // now the over-budget entries go, LRU first
  EXPECT_EQ(r.evicted.size(), 3u);
  EXPECT_EQ(r.evicted[0], (ExpertKey{0, 1}));
  EXPECT_EQ(p->resident_entries(), 2);
}

TEST(CachePolicy, StrictModeReportsWhatItCannotKeep) {
  auto p = moe::make_policy("lru", small(2, /*strict=*/true));
  AccessResult r;
  p->access(0, ids({1}), Phase::decode, r);
  p->access(0, ids({1, 2, 3, 4}), Phase::prefill, r);
  EXPECT_EQ(r.hits, 1);
  EXPECT_EQ(r.not_retained, ids({4, 3}));  // last in order first; the hit (1) and 2 stay
  EXPECT_LE(p->resident_entries(), 2);
  EXPECT_TRUE(p->contains({0, 1}));
  EXPECT_TRUE(p->contains({0, 2}));
}

TEST(CachePolicy, RepeatsAndRangesAreErrors) {
  auto p = moe::make_policy("lru", small(2));
  AccessResult r;
  EXPECT_THROW(p->access(0, ids({1, 1}), Phase::decode, r), Error);
  EXPECT_THROW(p->access(2, ids({1}), Phase::decode, r), Error);
  EXPECT_THROW(p->access(0, ids({8}), Phase::decode, r), Error);
  EXPECT_THROW(moe::make_policy("mru", small(2)), Error);
  CacheConfig both = small(2);
  both.capacity_bytes = 100;
  EXPECT_THROW(moe::make_policy("lru", both), Error);
}

TEST(CachePolicy, LfuKeepsTheFrequentEntry) {
  auto p = moe::make_policy("lfu", small(2));
  AccessResult r;
  for (int i = 0; i < 3; ++i) p->access(0, ids({1}), Phase::decode, r);
  p->access(0, ids({2}), Phase::decode, r);
  p->access(0, ids({3}), Phase::decode, r);  // LRU would evict 1; LFU evicts 2
  EXPECT_TRUE(p->contains({0, 1}));
  EXPECT_FALSE(p->contains({0, 2}));
}

// Three decode steps route experts 1, 2, 3 of layer 0 (count 3 each); the fourth routes 2, 3, 4, and 4 evicts
// 1 (LRU). The pass then swaps 1 (count 3) back in for 4 (count 1): gain 2 >= the 1.5 margin.
std::unique_ptr<moe::CachePolicy> adaptive_after_displacement(moe::SwapPlan& plan) {
  CacheConfig c = small(3);
  c.params.adapt_every = 1;
  c.params.adapt_decay = 1.0;
  auto p = moe::make_policy("adaptive", c);
  AccessResult r;
  for (int s = 0; s < 3; ++s) {
    p->access(0, ids({1, 2, 3}), Phase::decode, r);
    p->end_step(Phase::decode, plan);
    EXPECT_TRUE(plan.load.empty());
  }
  p->access(0, ids({2, 3, 4}), Phase::decode, r);
  EXPECT_EQ(r.evicted, std::vector<ExpertKey>({{0, 1}}));
  p->end_step(Phase::decode, plan);
  return p;
}

TEST(CachePolicy, AdaptiveSwapsInHotExpertsInTheBackground) {
  moe::SwapPlan plan;
  auto p = adaptive_after_displacement(plan);
  EXPECT_EQ(plan.evict, std::vector<ExpertKey>({{0, 4}}));
  EXPECT_EQ(plan.load, std::vector<ExpertKey>({{0, 1}}));
  EXPECT_FALSE(p->contains({0, 4}));  // evicted at once
  EXPECT_TRUE(p->pending({0, 1}));    // not resident until the read lands
  EXPECT_FALSE(p->contains({0, 1}));
  EXPECT_EQ(p->resident_entries(), 3);  // the reservation holds its slot
  p->swap_landed({0, 1});
  EXPECT_TRUE(p->contains({0, 1}));
  AccessResult r;
  p->access(0, ids({1}), Phase::decode, r);
  EXPECT_EQ(r.hits, 1);
}

TEST(CachePolicy, PendingSwapLookedUpIsAMissThatStays) {
  moe::SwapPlan plan;
  auto p = adaptive_after_displacement(plan);
  AccessResult r;
  p->access(0, ids({1}), Phase::decode, r);  // before the read landed
  EXPECT_EQ(r.misses, 1);
  EXPECT_TRUE(r.evicted.empty());  // it uses its reserved slot
  EXPECT_TRUE(p->contains({0, 1}));
  p->swap_landed({0, 1});  // late landing: ignored
  EXPECT_EQ(p->resident_entries(), 3);
  p->swap_cancelled({0, 1});  // not in flight any more: ignored
  EXPECT_TRUE(p->contains({0, 1}));
}

TEST(CachePolicy, StaticPinsItsListAndAdmitsNothingElse) {
  CacheConfig c = small(2);
  c.params.static_hot = {{0, 3}, {1, 4}, {0, 5}};
  auto p = moe::make_policy("static", c);
  EXPECT_TRUE(p->contains({0, 3}));
  EXPECT_TRUE(p->contains({1, 4}));
  EXPECT_FALSE(p->contains({0, 5}));  // did not fit
  AccessResult r;
  p->access(0, ids({3, 6}), Phase::decode, r);
  EXPECT_EQ(r.hit, std::vector<uint8_t>({1, 0}));
  EXPECT_EQ(r.not_retained, ids({6}));
  EXPECT_FALSE(p->contains({0, 6}));
}

}  // namespace
}  // namespace moetier::test
