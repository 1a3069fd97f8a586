// A route trace written by `moetier run` lists, for every (step, layer), the oracle's routed expert set: on
// micro-qwen3moe-F16, whose float weights put our routing and argmax in full agreement with the reference's on p1,
// a greedy run of the oracle prompt is the oracle's teacher-forced sequence, row for row.
#include <map>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "cli/run_cli.h"
#include "trace/route_trace.h"
#include "util/json_file.h"

namespace moetier {
namespace {

TEST(RouteTraceOracle, EveryStepAndLayerHasTheReferenceExperts) {
  const auto dir = test::oracle_dir();
  const auto j = util::read_json_lenient(dir / "ref/micro-qwen3moe-F16.p1.json");
  const auto n_prompt = static_cast<int64_t>(j["prompt_tokens"].size());
  const auto n_new = static_cast<int64_t>(j["greedy_tokens"].size());
  const auto trace_path = test::tmp_dir("telemetry_oracle") / "p1.route.csv";
  for (const char* experts : {"--experts resident", "--experts stream --cache-mb 0"}) {
    SCOPED_TRACE(experts);
    const auto r = test::run_cli("run -m '" + (dir / "models/micro-qwen3moe-F16.gguf").string() + "' --temp 0 -n " +
                                 std::to_string(n_new) + " -p '" + j["prompt"].get<std::string>() + "' " + experts +
                                 " --route-trace '" + trace_path.string() + "'");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto trace = trace::read_route_trace(trace_path);
    const auto& routing = j["routing"];
    ASSERT_EQ(static_cast<int64_t>(routing.size()), n_prompt + n_new - 1);  // the last sampled token is not run
    std::map<std::pair<int64_t, int32_t>, std::set<int32_t>> traced;
    for (const auto& row : trace.rows) traced[{row.step, row.layer}].insert(row.expert);
    ASSERT_EQ(traced.size(), routing.size() * routing[0].size());
    for (size_t t = 0; t < routing.size(); ++t)
      for (size_t l = 0; l < routing[t].size(); ++l) {
        const auto want = routing[t][l].get<std::set<int32_t>>();
        const std::pair<int64_t, int32_t> key{static_cast<int64_t>(t), static_cast<int32_t>(l)};
        EXPECT_EQ(traced[key], want) << "step " << t << " layer " << l;
      }
  }
}

}  // namespace
}  // namespace moetier
