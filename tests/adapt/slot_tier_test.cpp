// The VRAM tier's bookkeeping (moe/slot_tier.h) on hand-made routing: fills into free slots, misses that never
// evict, the adaptive pass's swaps spread over the rounds, a pending load looked up before it lands, and the
// slots it hands out (distinct, never more than it has).
#include <algorithm>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "moe/slot_tier.h"
#include "util/error.h"

namespace moetier::moe {
namespace {

constexpr int32_t kLayers = 2, kExperts = 8, kTopK = 2;

SlotTier make_tier(int64_t slots, int32_t every = 2, int32_t swaps = 8) {
  PolicyParams p;
  p.adapt_every = every;
  p.adapt_swaps = swaps;
  p.adapt_decay = 0.9;
  return SlotTier(kLayers, kExperts, kTopK, std::vector<uint64_t>(kLayers, 100), slots, p);
}

// Every (layer, expert) holding a slot has its own, below n_slots; their count is what the policy holds.
void expect_slots_consistent(const SlotTier& t) {
  std::set<int32_t> used;
  int64_t held = 0;
  for (int32_t l = 0; l < kLayers; ++l) {
    for (int32_t e = 0; e < kExperts; ++e) {
      const int32_t s = t.slot(l, e);
      if (s < 0) continue;
      ++held;
      EXPECT_LT(s, t.n_slots());
      EXPECT_TRUE(used.insert(s).second) << "slot " << s << " given twice";
    }
  }
  EXPECT_EQ(held, t.policy().resident_entries());
  EXPECT_LE(held, t.n_slots());
}

TEST(SlotTier, FillsFreeSlotsThenComputesMissesWhereTheyLiveWithoutEvicting) {
  SlotTier t = make_tier(3);
  t.set_phase(Phase::prefill);
  const int32_t a[] = {0, 1};
  t.lookup(0, a);
  EXPECT_TRUE(t.on_slot(0) && t.on_slot(1));
  EXPECT_EQ(std::vector<int32_t>(t.fills().begin(), t.fills().end()), (std::vector<int32_t>{0, 1}));
  const int32_t b[] = {2, 3};
  t.lookup(1, b);  // one free slot left: expert 2 fills it, expert 3 stays where it lives
  EXPECT_TRUE(t.on_slot(0));
  EXPECT_FALSE(t.on_slot(1));
  EXPECT_EQ(std::vector<int32_t>(t.fills().begin(), t.fills().end()), (std::vector<int32_t>{2}));
  t.lookup(0, a);  // hits, nothing to copy
  EXPECT_TRUE(t.on_slot(0) && t.on_slot(1));
  EXPECT_TRUE(t.fills().empty());
  const int32_t c[] = {4, 5};
  t.lookup(0, c);  // full: both computed where they live, no resident evicted
  EXPECT_FALSE(t.on_slot(0) || t.on_slot(1));
  EXPECT_GE(t.slot(0, 0), 0);
  EXPECT_GE(t.slot(0, 1), 0);
  const SlotTierCounters& k = t.counters();
  EXPECT_EQ(k.lookups, 8u);
  EXPECT_EQ(k.hits, 2u);
  EXPECT_EQ(k.fills, 3u);
  EXPECT_EQ(k.misses_slow, 3u);
  EXPECT_EQ(k.fill_bytes, 300u);
  EXPECT_EQ(k.lookups, k.hits + k.fills + k.misses_slow);
  expect_slots_consistent(t);
}

TEST(SlotTier, SwapsReplaceColdResidentsSpreadOverTheRounds) {
  // 2 slots, a pass every 2 rounds: layer 1's experts 0 and 1 fill the slots in the prefill, then the decode
  // routes its experts 6 and 7 only. The pass swaps both in (a pass pairs candidates with the coldest residents
  // of their own layer); at most one lands a round, not both at once.
  SlotTier t = make_tier(2, /*every=*/2, /*swaps=*/8);
  t.set_phase(Phase::prefill);
  const int32_t first[] = {0, 1};
  t.lookup(1, first);
  EXPECT_TRUE(t.end_step().empty());
  t.set_phase(Phase::decode);
  const int32_t hot[] = {6, 7};
  std::vector<size_t> landed_per_round;
  for (int round = 0; round < 8; ++round) {
    t.lookup(1, hot);
    const std::span<const ExpertKey> loads = t.end_step();
    landed_per_round.push_back(loads.size());
    for (const ExpertKey& k : loads) {
      EXPECT_EQ(k.layer, 1);
      EXPECT_GE(t.slot(k.layer, k.expert), 0);  // its slot is reserved before the copy
      t.landed(k);
    }
    expect_slots_consistent(t);
  }
  const SlotTierCounters& k = t.counters();
  EXPECT_EQ(k.rounds, 8u);
  EXPECT_EQ(k.swaps_planned, 2u);
  // The first lands at the pass's round; the second is routed the round after, before its turn: copied by that
  // lookup (a fill into its reserved slot), not by a swap.
  EXPECT_EQ(k.swaps_landed, 1u);
  EXPECT_EQ(k.swap_bytes, 100u);
  EXPECT_EQ(k.fills, 3u);
  EXPECT_EQ(*std::max_element(landed_per_round.begin(), landed_per_round.end()), 1u) << "swaps landed in a burst";
  EXPECT_LT(t.slot(1, 0), 0);  // the cold residents gave up their slots
  EXPECT_LT(t.slot(1, 1), 0);
  // Both hot experts are now hits.
  t.lookup(1, hot);
  EXPECT_TRUE(t.on_slot(0) && t.on_slot(1));
  EXPECT_TRUE(t.fills().empty());
}

// The first fills took every slot for layer 0; the decode routes layer 1 only. A slot serves any layer, so the
// pass gives layer 1's hot experts the slots of layer 0's cold ones (pairing within a layer never would).
TEST(SlotTier, SwapsTakeSlotsFromAnyLayer) {
  SlotTier t = make_tier(2, /*every=*/1, /*swaps=*/8);
  t.set_phase(Phase::prefill);
  const int32_t first[] = {0, 1};
  t.lookup(0, first);
  (void)t.end_step();
  t.set_phase(Phase::decode);
  const int32_t hot[] = {6, 7};
  for (int round = 0; round < 4; ++round) {
    t.lookup(1, hot);
    for (const ExpertKey& k : t.end_step()) t.landed(k);
  }
  EXPECT_GE(t.slot(1, 6), 0);
  EXPECT_GE(t.slot(1, 7), 0);
  EXPECT_LT(t.slot(0, 0), 0);
  EXPECT_LT(t.slot(0, 1), 0);
  expect_slots_consistent(t);
}

TEST(SlotTier, APendingLoadLookedUpIsCopiedAtOnceAndNotAgain) {
  SlotTier t = make_tier(2, /*every=*/2, /*swaps=*/8);
  t.set_phase(Phase::prefill);
  const int32_t first[] = {0, 1};
  t.lookup(1, first);
  (void)t.end_step();
  t.set_phase(Phase::decode);
  const int32_t hot[] = {6, 7};
  // Rounds 1 and 2: the pass after round 2 plans both loads and lands one of them (spread: one a round).
  t.lookup(1, hot);
  EXPECT_TRUE(t.end_step().empty());
  t.lookup(1, hot);
  std::span<const ExpertKey> loads = t.end_step();
  ASSERT_EQ(loads.size(), 1u);
  const ExpertKey first_load = loads[0];
  t.landed(first_load);
  EXPECT_EQ(t.loads_queued(), 1u);
  // Round 3 routes both: the landed one is a hit, the pending one is copied now (a fill into its reserved slot).
  t.lookup(1, hot);
  EXPECT_TRUE(t.on_slot(0) && t.on_slot(1));
  ASSERT_EQ(t.fills().size(), 1u);
  EXPECT_NE(t.fills()[0], first_load.expert);
  // Its queued load is dropped, not copied a second time.
  loads = t.end_step();
  EXPECT_TRUE(loads.empty());
  EXPECT_EQ(t.counters().swaps_landed, 1u);
  expect_slots_consistent(t);
}

TEST(SlotTier, RejectsAnEmptyTierAndBadExperts) {
  EXPECT_THROW(make_tier(0), Error);
  SlotTier t = make_tier(2);
  const int32_t bad[] = {kExperts};
  EXPECT_THROW(t.lookup(0, bad), Error);
  const int32_t twice[] = {1, 1};
  EXPECT_THROW(t.lookup(0, twice), Error);
}

}  // namespace
}  // namespace moetier::moe
