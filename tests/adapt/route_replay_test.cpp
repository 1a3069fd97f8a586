// --route-replay: the MoE block takes its experts from the trace, prompt tokens from its prefill rows and
// generated tokens from its decode steps; shape mismatches fail with both shapes named.
#include <gtest/gtest.h>

#include "adapt_test_util.h"
#include "util/error.h"

namespace moetier::adapt_test {
namespace {

TEST(RouteReplay, TheModelRoutesAsTheTraceSays) {
  const trace::RouteTrace trace = synthetic_trace(6, 3, 3, 4096);
  model::RouteReplay replay(trace, "t.csv");
  EXPECT_EQ(replay.prefill_tokens(), 6);
  EXPECT_EQ(replay.decode_tokens(), 3);
  const auto file = gguf::GgufModel::open(synthetic_model());
  model::ModelOptions mo;
  mo.n_ctx = 16;
  mo.routing_override = &replay;
  const auto m = model::load_model(file, mo);
  const int64_t L = kLayers, K = kTopK, V = m->info().n_vocab;
  std::vector<float> logits(static_cast<size_t>(V));
  std::vector<int32_t> routing(static_cast<size_t>(6 * L * K));
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6};
  m->forward(prompt, 0, logits, model::LogitsMode::last, routing);
  auto expect_rows = [&](int64_t pos0, int64_t n) {
    for (const auto& r : trace.rows) {
      if (r.step < pos0 || r.step >= pos0 + n) continue;
      EXPECT_EQ(routing[static_cast<size_t>(((r.step - pos0) * L + r.layer) * K + r.slot)], r.expert)
          << "step " << r.step << " layer " << r.layer << " slot " << r.slot;
    }
  };
  expect_rows(0, 6);
  for (int64_t p = 6; p < 9; ++p) {
    const int32_t tok = 7;
    routing.resize(static_cast<size_t>(L * K));
    m->forward({&tok, 1}, p, logits, model::LogitsMode::last, routing);
    expect_rows(p, 1);
  }
  for (float x : logits) ASSERT_TRUE(std::isfinite(x));
  // The trace has no tenth token.
  const int32_t tok = 7;
  EXPECT_THROW(m->forward({&tok, 1}, 9, logits, model::LogitsMode::last), Error);
}

TEST(RouteReplay, ALayerWithoutRowsReplaysTheNearestTokenOfItsPhase) {
  // As recorded by engines that skip the last layer for every prompt token but the last.
  trace::RouteTrace trace = synthetic_trace(4, 1, 5, 4096);
  std::erase_if(trace.rows, [](const trace::TraceRow& r) { return r.phase == 0 && r.step < 3 && r.layer == 7; });
  model::RouteReplay replay(trace, "t.csv");
  EXPECT_EQ(replay.filled(), 3);
  std::vector<int32_t> ids(4 * kTopK);
  std::vector<float> w(4 * kTopK);
  replay.route(7, 4, ids.data(), w.data());
  for (int t = 0; t < 3; ++t) {
    for (int s = 0; s < kTopK; ++s) EXPECT_EQ(ids[static_cast<size_t>(t * kTopK + s)], ids[static_cast<size_t>(3 * kTopK + s)]);
  }
}

TEST(RouteReplay, ShapeMismatchNamesBothShapes) {
  trace::RouteTrace trace = synthetic_trace(2, 1, 3, 4096);
  const model::RouteReplay replay(trace, "qwen.route.csv");
  try {
    replay.check_model(48, 128, 4);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("qwen.route.csv"), std::string::npos) << w;
    EXPECT_NE(w.find("8 layers x 64 experts"), std::string::npos) << w;
    EXPECT_NE(w.find("48 MoE layers x 128 experts"), std::string::npos) << w;
  }
  EXPECT_THROW(replay.check_model(8, 64, 6), Error);  // top-k differs
  EXPECT_NO_THROW(replay.check_model(8, 64, 4));
}

}  // namespace
}  // namespace moetier::adapt_test
