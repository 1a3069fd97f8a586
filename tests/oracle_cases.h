// The teacher-forced comparison with the independent reference engine (../shared/oracle/README.md, "How to
// compare"), shared by the resident check (tests/model/oracle_test.cpp) and the streamed one
// (tests/stream/streaming_test.cpp), so both apply the same protocol and tolerances.
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
inline std::vector<OracleCase> run_oracle_cases(model::Model& m, const std::string& ref_name) {
  namespace fs = std::filesystem;
  std::vector<OracleCase> cases;
  for (const char* prompt : {"p1", "p2", "plong"}) {
    const fs::path case_json = oracle_ref(ref_name, prompt);
    if (!fs::exists(case_json)) continue;
    const nlohmann::json j = util::read_json_lenient(case_json);
    const model::TokenInput in = model::read_token_input(case_json.string(), 0);
    OracleCase c{prompt, in.tokens, model::evaluate(m, in.tokens, in.n_prefill), {}, {}};
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
