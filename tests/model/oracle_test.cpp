// Teacher-forced comparison against the independent reference engine's outputs in ../shared/oracle/ref, with the
// tolerances of oracle/README.md per model class, and the golden greedy-generation check on stories260K.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gguf/gguf.h"
#include "model/eval.h"
#include "model/model.h"
#include "oracle_cases.h"
#include "test_support.h"
#include "util/json_file.h"

namespace moetier::model {
namespace {

namespace fs = std::filesystem;

class OracleTest : public ::testing::TestWithParam<std::string> {};

TEST_P(OracleTest, TeacherForcedMatchesReference) {
  const std::string name = GetParam();
  const gguf::GgufModel file = gguf::GgufModel::open(test::oracle_model(name));
  ModelOptions opts;
  opts.n_ctx = 512;
  const auto model = load_model(file, opts);
  const std::vector<test::OracleCase> cases = test::run_oracle_cases(*model, test::reference_for(name));
  ASSERT_EQ(cases.size(), 3u) << "expected p1, p2 and plong references for " << name;
  for (const test::OracleCase& c : cases) {
    // Our rows depend only on the tokens up to them, not on how the prompt was batched: rows of a prefix shared
    // with p1 are bit-identical to p1's.
    const test::OracleCase& first = cases.front();
    size_t shared = 0;
    while (shared < std::min(first.tokens.size(), c.tokens.size()) && first.tokens[shared] == c.tokens[shared])
      ++shared;
    const size_t V = static_cast<size_t>(c.result.n_vocab);
    for (size_t row = 0; row < std::min<size_t>(shared, static_cast<size_t>(c.result.n_rows)); ++row)
      EXPECT_EQ(0, std::memcmp(&first.result.logits[row * V], &c.result.logits[row * V], sizeof(float) * V))
          << name << " " << c.prompt << " row " << row << " differs from p1's";
    fmt::print("  {:<24} {:<6} rows {:>3}  mean rel {:.2e}  max rel {:.2e}  argmax {:>3}/{:<3}  routing {:>4}/{:<4}\n",
               name, c.prompt, c.logits.n_rows, c.logits.mean_rel, c.logits.max_rel, c.logits.argmax_same,
               c.logits.n_rows, c.routing.same, c.routing.total);
  }
  const test::OracleTotals t = test::oracle_totals(cases);
  if (const char* problem = test::reference_problem(name))
    GTEST_SKIP() << name << ": mean rel " << t.mean_rel << " not judged: " << problem;
  test::expect_within_oracle_tolerance(t, file, name);
  fmt::print("| {} | {:.2e} | {:.2e} | {:.1f}% | {} |\n", name, t.mean_rel, t.max_rel,
             100.0 * static_cast<double>(t.argmax_same) / static_cast<double>(t.rows),
             t.route_total > 0 ? fmt::format("{:.1f}%", 100.0 * static_cast<double>(t.route_same) /
                                                            static_cast<double>(t.route_total))
                               : std::string("-"));
}

INSTANTIATE_TEST_SUITE_P(Oracle, OracleTest, ::testing::ValuesIn(test::oracle_model_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string s = info.param;
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

TEST(Oracle, SharedDataPresent) { EXPECT_GE(test::oracle_model_names().size(), 16u) << "oracle models missing"; }

// The golden end-to-end check: free-running greedy generation reproduces the reference text token for token.
TEST(Greedy, Stories260KReproducesReference) {
  const fs::path oracle = test::oracle_dir();
  const gguf::GgufModel file = gguf::GgufModel::open(oracle / "models" / "stories260K.gguf");
  const auto model = load_model(file, ModelOptions{.n_ctx = 512});
  for (const char* prompt : {"p1", "p2", "plong"}) {
    const nlohmann::json j = util::read_json_lenient(oracle / "ref" / fmt::format("stories260K.{}.json", prompt));
    const auto prompt_tokens = j["prompt_tokens"].get<std::vector<int32_t>>();
    const auto expected = j["greedy_tokens"].get<std::vector<int32_t>>();
    const std::vector<int32_t> got =
        generate_greedy(*model, prompt_tokens, static_cast<int64_t>(expected.size()));
    EXPECT_EQ(got, expected) << prompt;
  }
}

}  // namespace
}  // namespace moetier::model
