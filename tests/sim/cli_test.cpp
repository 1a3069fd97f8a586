// `moetier replay` end to end: --json output parses and has the documented keys; bad flags fail with a message.
#include <array>
#include <cstdio>
#include <memory>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "trace/trace_fixture.h"

namespace moetier::test {
namespace {

struct Ran {
  int status;
  std::string out;
};

Ran run_cli(const std::string& args) {
  const std::string cmd = cli_path() + " " + args + " 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(cmd.c_str(), "r"), pclose);
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p.get())) > 0) out.append(buf.data(), n);
  const int status = pclose(p.release());
  return {status, out};
}

TEST(ReplayCli, JsonHasTheDocumentedKeys) {
  const Ran r = run_cli("replay " + qwen_trace().string() + " --cache-mb 4000 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  for (const char* k : {"policy", "cache_bytes", "hit_rate", "misses_per_layer_step", "read_mib_per_token"}) {
    EXPECT_TRUE(j.contains(k)) << k;
  }
  EXPECT_EQ(j["policy"], "lru");
  EXPECT_EQ(j["cache_bytes"], uint64_t{4000} << 20);
  for (const char* k : {"all", "prefill", "decode"}) EXPECT_TRUE(j["hit_rate"][k].is_number()) << k;
  EXPECT_NEAR(j["hit_rate"]["all"].get<double>(), 74.9, 0.5);
  EXPECT_FALSE(j.contains("swaps_per_round"));
}

TEST(ReplayCli, AdaptiveOnTwoTracesGivesAnArrayWithSwaps) {
  const Ran r = run_cli("replay " + qwen_trace().string() + " " + gptoss_trace().string() +
                        " --cache-mb 3000 --policy adaptive --adapt-tuned --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 2u);
  for (const auto& e : j) {
    EXPECT_TRUE(e["swaps_per_round"].is_number());
    EXPECT_TRUE(e["swap_mib"].is_number());
  }
}

TEST(ReplayCli, TextOutputAndErrors) {
  const Ran ok = run_cli("replay " + qwen_trace().string() + " --cache-mb 2000 --policy static --static-warm 32");
  EXPECT_EQ(ok.status, 0) << ok.out;
  EXPECT_NE(ok.out.find("hit rate: all"), std::string::npos) << ok.out;
  const Ran no_cache = run_cli("replay " + qwen_trace().string());
  EXPECT_NE(no_cache.status, 0);
  EXPECT_NE(no_cache.out.find("--cache-mb"), std::string::npos) << no_cache.out;
  const Ran bad_policy = run_cli("replay " + qwen_trace().string() + " --cache-mb 10 --policy mru");
  EXPECT_NE(bad_policy.status, 0);
  EXPECT_NE(bad_policy.out.find("--policy: mru is not one of lru, lfu"), std::string::npos) << bad_policy.out;
}

}  // namespace
}  // namespace moetier::test
