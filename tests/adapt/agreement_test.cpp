// The simulator and the engine agree: the same route trace replayed by `moetier replay` semantics (src/sim, strict
// slots, cliff guard) and by the engine (--route-replay over a synthetic model of the trace's shape, streaming
// through the same number of cache slots) gives decode misses per layer within 3% of each other, for lru and for
// adaptive (whose swap-ins the engine reads in the background).
#include <algorithm>
#include <cstdio>

#include <gtest/gtest.h>

#include "adapt_test_util.h"

namespace moetier::adapt_test {
namespace {

constexpr int64_t kPrompt = 24, kDecode = 192;

void expect_agreement(const std::string& policy, int64_t slots, const moe::PolicyParams& params) {
  const fs::path model = synthetic_model();
  const trace::RouteTrace trace = synthetic_trace(kPrompt, kDecode, 7, 1 << 20);
  const EngineRun e = run_engine(model, trace, slots, policy, params);
  ASSERT_EQ(e.cache_slots, slots);
  const sim::ReplayResult s = run_sim(trace, slots, policy, params);
  ASSERT_EQ(s.decode_misses_by_layer.size(), e.decode_misses_by_layer.size());
  int64_t eng_all = 0, sim_all = 0;
  for (size_t l = 0; l < e.decode_misses_by_layer.size(); ++l) {
    const int64_t a = e.decode_misses_by_layer[l], b = s.decode_misses_by_layer[l];
    eng_all += a;
    sim_all += b;
    EXPECT_LE(std::abs(a - b), std::max<int64_t>(1, (3 * b + 99) / 100))
        << policy << " layer " << l << ": engine " << a << " misses, simulator " << b;
  }
  std::printf("[agreement] %s, %lld slots: decode misses engine %lld, simulator %lld; prefill misses engine %lld, "
              "simulator %lld; swaps engine %llu, simulator %lld\n",
              policy.c_str(), static_cast<long long>(slots), static_cast<long long>(eng_all),
              static_cast<long long>(sim_all), static_cast<long long>(e.prefill_misses),
              static_cast<long long>(s.prefill.lookups - s.prefill.hits),
              static_cast<unsigned long long>(e.totals.swaps), static_cast<long long>(s.swap_loads));
  EXPECT_EQ(e.prefill_misses, s.prefill.lookups - s.prefill.hits);
}

TEST(SimEngineAgreement, LruMissesPerLayerWithinThreePercent) { expect_agreement("lru", 160, {}); }

TEST(SimEngineAgreement, AdaptiveMissesPerLayerWithinThreePercent) {
  expect_agreement("adaptive", 160, {});
}

TEST(SimEngineAgreement, AdaptiveTunedMissesPerLayerWithinThreePercent) {
  expect_agreement("adaptive", 160, moe::PolicyParams::adaptive_tuned());
}

TEST(AdaptiveTier, SwapsAreReadInTheBackgroundAndCounted) {
  const fs::path model = synthetic_model();
  const trace::RouteTrace trace = synthetic_trace(kPrompt, kDecode, 11, 1 << 20);
  const EngineRun e = run_engine(model, trace, 160, "adaptive", moe::PolicyParams::adaptive_tuned());
  EXPECT_GT(e.totals.swaps, 0u);
  EXPECT_GT(e.totals.swap_bytes, 0u);
  EXPECT_GE(e.totals.bytes_read, e.totals.swap_bytes);
  const EngineRun lru = run_engine(model, trace, 160, "lru");
  EXPECT_EQ(lru.totals.swaps, 0u);
  EXPECT_EQ(lru.totals.swap_bytes, 0u);
}

}  // namespace
}  // namespace moetier::adapt_test
