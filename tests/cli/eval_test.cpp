// `moetier eval` loads through the engine like `run`: every model flag works on it, a streamed evaluation gives
// the resident one's logits bit for bit, and the route trace it records is the routing it dumps.
#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/run_cli.h"
#include "test_support.h"
#include "trace/route_trace.h"
#include "util/f32_file.h"

namespace moetier {
namespace {

namespace fs = std::filesystem;

// The routing JSON [row][MoE layer][slot] as rows of (step, layer, slot, expert), sorted.
std::vector<std::array<int64_t, 4>> routing_rows(const fs::path& json) {
  std::ifstream in(json);
  const nlohmann::json j = nlohmann::json::parse(in);
  std::vector<std::array<int64_t, 4>> rows;
  for (size_t t = 0; t < j.size(); ++t)
    for (size_t l = 0; l < j[t].size(); ++l)
      for (size_t k = 0; k < j[t][l].size(); ++k)
        rows.push_back({static_cast<int64_t>(t), static_cast<int64_t>(l), static_cast<int64_t>(k),
                        j[t][l][k].get<int64_t>()});
  std::sort(rows.begin(), rows.end());
  return rows;
}

std::vector<std::array<int64_t, 4>> trace_rows(const trace::RouteTrace& t) {
  std::vector<std::array<int64_t, 4>> rows;
  for (const auto& r : t.rows) rows.push_back({r.step, r.layer, r.slot, r.expert});
  std::sort(rows.begin(), rows.end());
  return rows;
}

TEST(EvalStreaming, StreamedLogitsAreTheResidentOnesAndTheTraceIsTheRouting) {
  const auto models = test::moe_model_names();
  ASSERT_FALSE(models.empty()) << "no MoE models under " << test::oracle_dir();
  const fs::path dir = test::tmp_dir("eval_stream");
  for (const auto& name : models) {
    SCOPED_TRACE(name);
    const std::string model = test::oracle_model(name).string();
    const std::string tokens = test::oracle_ref(name, "p1").string();
    const fs::path base = dir / name;
    auto r = test::run_cli("eval -m '" + model + "' --tokens '" + tokens + "' -t 2 --experts resident --logits-out '" +
                           base.string() + ".resident.f32' --routing-out '" + base.string() + ".routing.json'");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("experts: resident"), std::string::npos) << r.output;
    const std::string b = base.string();
    r = test::run_cli("eval -m '" + model + "' --tokens '" + tokens + "' -t 2 --experts stream --cache-mb 1 " +
                      "--logits-out '" + b + ".stream.f32' --routing-out '" + b + ".stream.json' --csv '" + b +
                      ".csv' --route-trace '" + b + ".route.csv'");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("experts: stream"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("cache: 1 MiB as given"), std::string::npos) << r.output;

    const auto resident = util::read_f32(base.string() + ".resident.f32");
    const auto streamed = util::read_f32(base.string() + ".stream.f32");
    ASSERT_FALSE(resident.empty());
    EXPECT_TRUE(resident == streamed) << "streamed logits differ from resident ones";

    // The streamed run's route trace is its routing dump, which is the resident run's.
    const auto tr = trace::read_route_trace(base.string() + ".route.csv");
    const auto streamed_routing = routing_rows(base.string() + ".stream.json");
    ASSERT_FALSE(streamed_routing.empty());
    EXPECT_EQ(trace_rows(tr), streamed_routing);
    EXPECT_EQ(streamed_routing, routing_rows(base.string() + ".routing.json"));

    // The metrics CSV says what ran: the command, the streamed experts and the cache of 1 MiB as given.
    std::ifstream csv(base.string() + ".csv");
    const std::string text((std::istreambuf_iterator<char>(csv)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("# config command=eval"), std::string::npos) << text.substr(0, 600);
    EXPECT_NE(text.find("# config experts=stream"), std::string::npos) << text.substr(0, 600);
    EXPECT_NE(text.find("# config cache_mb_flag=1"), std::string::npos) << text.substr(0, 600);
    EXPECT_NE(text.find("# summary "), std::string::npos);
  }
}

TEST(Eval, TakesTheModelFlagsOfRun) {
  const std::string model = (test::oracle_dir() / "models/tiny-qwen3moe-Q4_K_M.gguf").string();
  auto r = test::run_cli("eval -m '" + model + "' -p 'Hello there' --experts stream --cache-policy lfu "
                         "--io-threads 2 --no-overlap --dense-weights mmap --kv-type f32");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("perplexity:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("dense weights: mmap"), std::string::npos) << r.output;
  r = test::run_cli("eval -m '" + model + "' -p hi --cache-mb -5 --experts stream");
  EXPECT_GT(r.exit_code, 100) << r.output;  // rejected as the command line is parsed (CLI11's status)
  EXPECT_NE(r.output.find("--cache-mb"), std::string::npos) << r.output;
  r = test::run_cli("eval -m '" + model + "' -p hi --adapt-every 2");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("--cache-policy adaptive"), std::string::npos) << r.output;
}

// Settings that cannot work fail before the model is loaded, naming the flag, instead of crashing or wrapping.
TEST(Eval, ImpossibleSettingsFailNamingTheFlag) {
  const std::string model = (test::oracle_dir() / "models/tiny-qwen3moe-Q4_K_M.gguf").string();
  const std::string stories = (test::oracle_dir() / "models/stories260K.gguf").string();
  const std::pair<std::string, std::string> cases[] = {
      {"-m '" + model + "' -p hi -c 99999999999", "-c 99999999999"},
      {"-m '" + model + "' -p hi --n-expert-used 99", "--n-expert-used 99"},
      {"-m '" + model + "' -p hi --cache-floor-mb -1", "--cache-floor-mb"},
      {"-m '" + model + "' -p hi --cache-policy lru-ish --experts resident", "lru-ish"},
      {"-m '" + model + "' -p 'a b c d e f' -c 2", "raise -c"},
      {"-m '" + stories + "' -p hi --route-trace /dev/null", "no routed experts"},
  };
  for (const auto& [args, says] : cases) {
    const auto r = test::run_cli("eval " + args);
    EXPECT_FALSE(r.signaled) << args << "\n" << r.output;
    EXPECT_NE(r.exit_code, 0) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(says), std::string::npos) << args << "\n" << r.output;
  }
}

}  // namespace
}  // namespace moetier
