// The warm start of the expert cache (CachePolicy::warm) and the heat profile it is chosen from
// (moe/heat_profile.h), on hand-made batches and files; then replayed on the phone's Qwen3 trace.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <vector>

#include <gtest/gtest.h>

#include "moe/cache_policy.h"
#include "moe/heat_profile.h"
#include "sim/batches.h"
#include "sim/replay.h"
#include "test_support.h"
#include "trace/route_trace.h"
#include "util/error.h"

namespace moetier::test {
namespace {

using moe::AccessResult;
using moe::CacheConfig;
using moe::ExpertKey;
using moe::HeatModel;
using moe::HeatProfile;
using moe::Phase;

CacheConfig one_layer(int64_t entries, bool strict) {
  CacheConfig c;
  c.n_moe_layers = 1;
  c.n_expert = 8;
  c.n_expert_used = 2;
  c.expert_bytes = {100};
  c.capacity_entries = entries;
  c.strict = strict;
  c.cliff_guard = false;
  return c;
}

std::vector<int32_t> ids(std::initializer_list<int32_t> l) { return l; }

TEST(CacheWarm, TakesTheHottestThatFitAndReturnsThemInFileOrder) {
  auto p = moe::make_policy("lru", one_layer(4, true));
  const std::vector<ExpertKey> hot = {{0, 5}, {0, 6}, {0, 5}, {0, 7}, {0, 1}, {0, 2}};  // a repeat counts once
  const std::vector<ExpertKey> got = p->warm(hot);
  EXPECT_EQ(got, (std::vector<ExpertKey>{{0, 1}, {0, 5}, {0, 6}, {0, 7}}));
  EXPECT_EQ(p->resident_entries(), 4);
  EXPECT_FALSE(p->contains({0, 2}));  // the fifth distinct one did not fit
  EXPECT_TRUE(p->warm_hold());
  AccessResult r;
  p->access(0, ids({5, 6}), Phase::decode, r);
  EXPECT_EQ(r.hits, 2);
}

// The first prompt may not replace the warmed set: the misses of its first step (chunk) use free capacity only,
// and are used once otherwise; the end of that step ends the hold; LRU then evicts the coldest warmed entry first.
TEST(CacheWarm, FirstPrefillStepDoesNotEvictAndTheColdestGoFirst) {
  for (const bool strict : {true, false}) {
    SCOPED_TRACE(strict ? "strict" : "budget");
    auto p = moe::make_policy("lru", one_layer(4, strict));
    p->warm(std::vector<ExpertKey>{{0, 5}, {0, 6}, {0, 7}});  // one entry of room left
    AccessResult r;
    p->access(0, ids({0, 2, 3, 5}), Phase::prefill, r);
    EXPECT_EQ(r.hits, 1);
    EXPECT_TRUE(r.evicted.empty());
    EXPECT_EQ(r.not_retained, ids({2, 3}));  // 0 took the free entry
    EXPECT_EQ(p->resident_entries(), 4);
    moe::SwapPlan plan;
    p->end_step(Phase::prefill, plan);
    EXPECT_FALSE(p->warm_hold());
    p->access(0, ids({6, 4}), Phase::decode, r);
    // Recency: 7 (the coldest warmed; 5 and 6 were used since), then 0.
    EXPECT_EQ(r.evicted, (std::vector<ExpertKey>{{0, 7}}));
    p->end_step(Phase::decode, plan);
    p->access(0, ids({1, 2}), Phase::prefill, r);  // later prompts (and chunks) evict as usual
    EXPECT_EQ(r.evicted.size(), 2u);
    EXPECT_TRUE(r.not_retained.empty());
  }
}

TEST(CacheWarm, AfterALookupOrOutOfRangeIsAnError) {
  auto p = moe::make_policy("lru", one_layer(4, true));
  EXPECT_THROW(p->warm(std::vector<ExpertKey>{{1, 0}}), Error);
  EXPECT_THROW(p->warm(std::vector<ExpertKey>{{0, 8}}), Error);
  AccessResult r;
  p->access(0, ids({1}), Phase::decode, r);
  EXPECT_THROW(p->warm(std::vector<ExpertKey>{{0, 2}}), Error);
  // Nothing to warm: no hold.
  auto q = moe::make_policy("lru", one_layer(4, true));
  EXPECT_TRUE(q->warm({}).empty());
  EXPECT_FALSE(q->warm_hold());
}

HeatModel model_2x4() { return HeatModel{"m.gguf", "qwen3moe", 1234, 2, 4}; }

TEST(HeatProfile, CountsDecodeRoutingWithAFadePerToken) {
  HeatProfile h(model_2x4());
  h.record(0, ids({1, 2}));
  h.record(1, ids({3}));
  h.end_decode_step();
  h.record(0, ids({2}));
  h.end_decode_step();
  const double d = HeatProfile::kDecayPerToken;
  EXPECT_DOUBLE_EQ(h.heat({0, 2}), d * d + d);
  EXPECT_DOUBLE_EQ(h.heat({0, 1}), d * d);
  EXPECT_DOUBLE_EQ(h.heat({1, 3}), d * d);
  EXPECT_EQ(h.heat({1, 0}), 0.0);
  EXPECT_EQ(h.decode_tokens(), 2);
  // Hottest first; equal counts in (layer, expert) order; never-routed experts left out.
  EXPECT_EQ(h.hottest(), (std::vector<ExpertKey>{{0, 2}, {0, 1}, {1, 3}}));
}

TEST(HeatProfile, SavesAndLoadsAndSeedsTheNextRun) {
  std::filesystem::remove_all(tmp_dir("heat_profile"));
  const auto dir = tmp_dir("heat_profile");
  HeatProfile h(model_2x4());
  h.record(0, ids({0, 3}));
  h.record(1, ids({2}));
  h.end_decode_step();
  h.record(1, ids({2}));
  h.end_decode_step();
  const auto path = dir / "p.json";
  h.save(path);
  const HeatProfile back = HeatProfile::load(path);
  EXPECT_EQ(back.model().model, "m.gguf");
  EXPECT_EQ(back.model().file_bytes, 1234u);
  EXPECT_EQ(back.decode_tokens(), 2);
  EXPECT_EQ(back.hottest(), h.hottest());
  for (int32_t l = 0; l < 2; ++l) {
    for (int32_t e = 0; e < 4; ++e) EXPECT_NEAR(back.heat({l, e}), h.heat({l, e}), 1e-4);
  }
  // Another quantization of the same model fits; another shape or arch does not.
  HeatModel other_quant = model_2x4();
  other_quant.model = "m-q8.gguf";
  other_quant.file_bytes = 99;
  EXPECT_EQ(back.mismatch(other_quant), "");
  HeatProfile next(other_quant);
  next.seed(back);
  EXPECT_EQ(next.decode_tokens(), 2);
  EXPECT_EQ(next.hottest(), h.hottest());
  HeatProfile wrong(HeatModel{"x.gguf", "qwen3moe", 0, 2, 8});
  EXPECT_NE(back.mismatch(wrong.model()), "");
  EXPECT_THROW(wrong.seed(back), Error);
  EXPECT_NE(back.mismatch(HeatModel{"m.gguf", "gpt-oss", 1234, 2, 4}), "");
  // Saving again replaces the file whole, and leaves no temporary file behind.
  h.end_decode_step();
  h.save(path);
  EXPECT_EQ(HeatProfile::load(path).decode_tokens(), 3);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator()), 1);
}

TEST(HeatProfile, BadFilesAreErrorsNamingTheFile) {
  const auto dir = tmp_dir("heat_profile_bad");
  HeatProfile h(model_2x4());
  h.record(0, ids({1}));
  h.end_decode_step();
  h.save(dir / "good.json");
  std::ifstream in(dir / "good.json");
  const std::string good((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto expect_error = [&](const std::string& text, const std::string& says) {
    SCOPED_TRACE(text.substr(0, 120));
    const auto p = dir / "bad.json";
    std::ofstream(p) << text;
    try {
      HeatProfile::load(p);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(p.string()), std::string::npos) << what;
      EXPECT_NE(what.find(says), std::string::npos) << what;
    }
  };
  const auto replace = [&](const std::string& from, const std::string& to) {
    std::string t = good;
    const auto at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return t.replace(at, from.size(), to);
  };
  expect_error("", "not a JSON object");
  expect_error(good.substr(0, good.size() / 2), "not a JSON object");
  expect_error("[1, 2]", "not a JSON object");
  expect_error(replace("\"version\":1", "\"version\":7"), "version");
  expect_error(replace("\"format\":\"moetier heat profile\"", "\"format\":\"other\""), "format");
  expect_error(replace("\"n_expert\":4", "\"n_expert\":5"), "counts");
  expect_error(replace("\"n_moe_layers\":2", "\"n_moe_layers\":3"), "rows");
  expect_error(replace("\"n_moe_layers\":2", "\"n_moe_layers\":-2"), "n_moe_layers");
  expect_error(replace("0.995,0.0,0.0]", "-1,0.0,0.0]"), "heat[0][1]");
  expect_error(replace("\"decode_tokens\":1", "\"decode_tokens\":\"1\""), "decode_tokens");
  expect_error(replace("\"format\":\"moetier heat profile\"", "\"format\":1"), "format");
  expect_error(replace("\"decode_tokens\":1", "\"decode_tokens\":18446744073709551615"), "decode_tokens");
  expect_error(replace("0.995,0.0,0.0]", "1e308,0.0,0.0]"), "heat[0][1]");
  // A stated shape far beyond what the file holds is refused before anything of that size is allocated.
  expect_error(replace("\"n_moe_layers\":2", "\"n_moe_layers\":60000"), "rows");
  expect_error(R"({"format":"moetier heat profile","version":1,"model":"m","arch":"a","file_bytes":0,)"
               R"("n_moe_layers":60000,"n_expert":60000,"decode_tokens":0,"heat":[]})",
               "rows");
  EXPECT_THROW(HeatProfile::load(dir / "missing.json"), Error);
}

// On the phone's Qwen3-30B trace at its recorded cache (LRU, 4000 MiB): a profile of the trace's last 64 decode
// tokens, judged on its first 32 (held out), lifts the first 8 tokens' hit rate to within 10% of the steady one,
// which a cold start is far from, and changes nothing after the warm-up.
TEST(CacheWarm, ReplayedOnThePhoneTraceAHeldOutProfileShortensTheWarmUp) {
  const sim::BatchedTrace t = sim::make_batches(trace::read_route_trace(shared_dir() / "traces" /
                                                                        "bigmoeonedge-2026-07-15" / "qwen.route.csv"));
  sim::ReplayOptions o;
  o.cache_bytes = uint64_t{4000} << 20;
  o.count_heat = true;
  const sim::ReplayResult cold = sim::replay(t, o);
  ASSERT_EQ(cold.decode_tokens, 128);
  // The profile of decode steps 64..127 only: replay those after the prompt.
  sim::BatchedTrace late = t;
  late.steps.clear();
  int64_t decode = 0;
  for (const sim::Step& s : t.steps) {
    if (s.phase == Phase::prefill || decode++ >= 64) late.steps.push_back(s);
  }
  const sim::ReplayResult late_run = sim::replay(late, o);
  ASSERT_TRUE(late_run.heat.has_value());
  ASSERT_EQ(late_run.heat->decode_tokens(), 64);

  sim::ReplayOptions w = o;
  w.count_heat = false;
  w.warm = late_run.heat->hottest();
  const sim::ReplayResult warm = sim::replay(t, w);
  EXPECT_GT(warm.warm_experts, 1000);
  const double steady = cold.decode_window(32, 128).hit_pct();
  const double cold8 = cold.decode_window(0, 8).hit_pct();
  const double warm8 = warm.decode_window(0, 8).hit_pct();
  EXPECT_LT(cold8, 0.9 * steady);
  EXPECT_GE(warm8, 0.9 * steady) << "cold " << cold8 << "%, warm " << warm8 << "%, steady " << steady << "%";
  EXPECT_DOUBLE_EQ(warm.decode_window(32, 128).hit_pct(), steady);
  EXPECT_GT(warm.prefill.hits, 0);  // the prompt reads less, too
  EXPECT_LT(warm.prefill.miss_bytes, cold.prefill.miss_bytes);
}

}  // namespace
}  // namespace moetier::test
