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

// The reference case a model is compared with: its own, except stories260K-BF16, whose shipped reference is
// broken — its greedy continuation is " play play play ..." and 51 of its 52 p1 rows put the argmax on the
// *input* token — while the same weights as F32 and F16 match their references at mean rel 4e-4, and the BF16
// tensors dequantize bit-exactly to oracle/dequant. BF16 only rounds the F32 weights to 8 mantissa bits, so the
// BF16 model is held to the F32 model's reference at the same float tolerance (see the issue note).
std::string reference_for(const std::string& model) {
  return model == "stories260K-BF16" ? std::string("stories260K") : model;
}

// References shown to be unusable at the README's tolerance, with the evidence (see the issue note). A case listed
// here is reported as skipped, never as passed.
//   tiny-mixtral-IQ4_XS: the reference's logits depend on its prompt batch size, and its small-batch IQ4_XS
//   products overflow. p1 (a 21-token batch) and plong (a 334-token batch) share their first 6 tokens, so any
//   engine must give identical rows 0..5 for both (ours are bit-identical, checked below for every model); the
//   reference's differ from each other by rel 0.022, 0.056, 0.037, 0.037, 0.048, 0.055, while its Q8_0 and F16
//   files agree to 8e-8 and 0. The reason, from its source (ik_llama.cpp's AVX2 kernels) and reproduced by an
//   emulation: below 32 rows per product its IQ4_XS kernel multiplies the grid values stored with +128 (up to
//   241) by the 8-bit activations with pmaddubsw, whose int16 pair sums saturate (241 * 127 * 2 = 61214 > 32767);
//   at 32 rows or more it first requantizes the weights to 8 bits (Q8_K_R8). Emulating the saturation brings p1's
//   row 0 from rel 0.023 to 1.2e-7; an engine whose result does not depend on the batch cannot follow both paths.
const char* reference_problem(const std::string& model) {
  if (model == "tiny-mixtral-IQ4_XS")
    return "the reference's IQ4_XS products saturate below 32 rows and requantize the weights above (see the comment)";
  return nullptr;
}

class OracleTest : public ::testing::TestWithParam<std::string> {};

TEST_P(OracleTest, TeacherForcedMatchesReference) {
  const std::string name = GetParam();
  const gguf::GgufModel file = gguf::GgufModel::open(test::oracle_model(name));
  ModelOptions opts;
  opts.n_ctx = 512;
  const auto model = load_model(file, opts);
  const std::vector<test::OracleCase> cases = test::run_oracle_cases(*model, reference_for(name));
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
  if (const char* problem = reference_problem(name))
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
