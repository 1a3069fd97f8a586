// The teacher-forced comparison with the independent reference engine (../shared/oracle/README.md, "How to
// compare"), shared by the resident check (tests/model/oracle_test.cpp) and the streamed one
// (tests/stream/streaming_test.cpp) and the GPU one (tests/gpu/oracle_gpu_test.cpp), so all apply the same protocol,
// tolerances and judgement of the references.
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gguf/gguf.h"
#include "model/eval.h"
#include "model/model.h"
#include "model/token_input.h"
#include "quant/ggml_type.h"
#include "test_support.h"
#include "util/f32_file.h"
#include "util/json_file.h"

namespace moetier::test {

struct OracleTolerance {
  double mean_rel;      // per-row relative L2 error, mean over rows
  double argmax_frac;   // rows whose argmax agrees
  double routing_frac;  // (row, layer) pairs whose expert sets agree
};

// oracle/README.md, "How to compare", by weight type: the float tolerance when every weight is F32, F16 or BF16,
// else the quantized one (wider for gpt-oss, whose biases and clamped activations amplify 8-bit rounding).
inline OracleTolerance oracle_tolerance(const gguf::GgufModel& file) {
  const bool all_float = std::all_of(file.tensors().begin(), file.tensors().end(), [](const gguf::TensorInfo& t) {
    return t.type == quant::GgmlType::F32 || t.type == quant::GgmlType::F16 || t.type == quant::GgmlType::BF16;
  });
  if (all_float) return {1e-2, 0.98, 0.99};
  if (file.architecture() == "gpt-oss") return {9e-2, 0.88, 0.92};
  return {3.5e-2, 0.90, 0.96};
}

// The reference case a model is compared with: its own, except stories260K-BF16, whose shipped reference is
// broken — its greedy continuation is " play play play ..." and 51 of its 52 p1 rows put the argmax on the
// *input* token — while the same weights as F32 and F16 match their references at mean rel 4e-4, and the BF16
// tensors dequantize bit-exactly to oracle/dequant. BF16 only rounds the F32 weights to 8 mantissa bits, so the
// BF16 model is held to the F32 model's reference at the same float tolerance (see the issue note).
inline std::string reference_for(const std::string& model) {
  return model == "stories260K-BF16" ? std::string("stories260K") : model;
}

// References shown to be unusable at the README's tolerance, with the evidence (see the issue note). A case listed
// here is reported as skipped, never as passed.
//   tiny-mixtral-IQ4_XS: the reference's logits depend on its prompt batch size, and its small-batch IQ4_XS
//   products overflow. p1 (a 21-token batch) and plong (a 334-token batch) share their first 6 tokens, so any
//   engine must give identical rows 0..5 for both (ours are bit-identical, checked by tests/model/oracle_test.cpp for every model); the
//   reference's differ from each other by rel 0.022, 0.056, 0.037, 0.037, 0.048, 0.055, while its Q8_0 and F16
//   files agree to 8e-8 and 0. The reason, from its source (ik_llama.cpp's AVX2 kernels) and reproduced by an
//   emulation: below 32 rows per product its IQ4_XS kernel multiplies the grid values stored with +128 (up to
//   241) by the 8-bit activations with pmaddubsw, whose int16 pair sums saturate (241 * 127 * 2 = 61214 > 32767);
//   at 32 rows or more it first requantizes the weights to 8 bits (Q8_K_R8). Emulating the saturation brings p1's
//   row 0 from rel 0.023 to 1.2e-7; an engine whose result does not depend on the batch cannot follow both paths.
inline const char* reference_problem(const std::string& model) {
  if (model == "tiny-mixtral-IQ4_XS")
    return "the reference's IQ4_XS products saturate below 32 rows and requantize the weights above (see the comment)";
  return nullptr;
}

// One reference case run through a model and compared with the reference.
struct OracleCase {
  std::string prompt;             // p1, p2 or plong
  std::vector<int32_t> tokens;    // prompt_tokens + greedy_tokens[:-1]
  model::EvalResult result;       // our logits [rows, n_vocab] and routing
  model::LogitsComparison logits;
  model::RoutingComparison routing;
};

// Runs every case of reference `ref_name` (p1, p2, plong) through m: the prompt as one batch, then one token at
// a time, as the reference did. Fails the calling test (non-fatally) on a shape mismatch; a missing case is
// left out (the caller checks the count).
// `hooks`, when given, sees each evaluation's steps (model::evaluate).
inline std::vector<OracleCase> run_oracle_cases(model::Model& m, const std::string& ref_name,
                                                model::StepHooks* hooks = nullptr) {
  namespace fs = std::filesystem;
  std::vector<OracleCase> cases;
  for (const char* prompt : {"p1", "p2", "plong"}) {
    const fs::path case_json = oracle_ref(ref_name, prompt);
    if (!fs::exists(case_json)) continue;
    const nlohmann::json j = util::read_json_lenient(case_json);
    const model::TokenInput in = model::read_token_input(case_json.string(), 0);
    OracleCase c{prompt, in.tokens, model::evaluate(m, in.tokens, in.n_prefill, hooks), {}, {}};
    const std::vector<float> ref = util::read_f32(case_json.parent_path() / j["logits_file"].get<std::string>());
    EXPECT_EQ(j["logits_rows"].get<int64_t>(), c.result.n_rows) << case_json;
    EXPECT_EQ(static_cast<int64_t>(ref.size()), c.result.n_rows * c.result.n_vocab) << case_json;
    if (static_cast<int64_t>(ref.size()) != c.result.n_rows * c.result.n_vocab) continue;
    c.logits = model::compare_logits(c.result.logits, ref, c.result.n_vocab);
    std::vector<int32_t> ref_routing;
    for (const auto& row : j["routing"]) {
      for (const auto& layer : row) {
        for (const auto& id : layer) ref_routing.push_back(id.get<int32_t>());
      }
    }
    if (c.result.n_moe_layers > 0) {
      EXPECT_EQ(j["expert_used"].get<int64_t>(), c.result.n_expert_used) << case_json;
      EXPECT_EQ(ref_routing.size(), c.result.routing.size()) << case_json;
      if (ref_routing.size() == c.result.routing.size())
        c.routing = model::compare_routing(c.result.routing, ref_routing, c.result.n_expert_used);
    } else {
      EXPECT_TRUE(ref_routing.empty()) << case_json;
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

// The cases' rows taken together. The README's tolerances are means over rows; they are applied to all rows of
// a model's three cases together, because in a 52-row case one flipped near-tie routing decision can move a few
// rows far.
struct OracleTotals {
  double mean_rel = 0.0, max_rel = 0.0;
  int64_t rows = 0, argmax_same = 0, route_same = 0, route_total = 0;
};
inline OracleTotals oracle_totals(const std::vector<OracleCase>& cases) {
  OracleTotals t;
  double rel_sum = 0.0;
  for (const OracleCase& c : cases) {
    rel_sum += c.logits.mean_rel * static_cast<double>(c.logits.n_rows);
    t.max_rel = std::max(t.max_rel, c.logits.max_rel);
    t.rows += c.logits.n_rows;
    t.argmax_same += c.logits.argmax_same;
    t.route_same += c.routing.same;
    t.route_total += c.routing.total;
  }
  t.mean_rel = t.rows > 0 ? rel_sum / static_cast<double>(t.rows) : 0.0;
  return t;
}

inline void expect_within_oracle_tolerance(const OracleTotals& t, const gguf::GgufModel& file,
                                           const std::string& model) {
  const OracleTolerance tol = oracle_tolerance(file);
  EXPECT_GT(t.rows, 0) << model;
  EXPECT_LE(t.mean_rel, tol.mean_rel) << model;
  EXPECT_GE(static_cast<double>(t.argmax_same), tol.argmax_frac * static_cast<double>(t.rows)) << model;
  if (t.route_total > 0) {
    EXPECT_GE(static_cast<double>(t.route_same), tol.routing_frac * static_cast<double>(t.route_total)) << model;
  }
}

}  // namespace moetier::test
