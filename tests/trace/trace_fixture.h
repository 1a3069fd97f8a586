// Where the shared route traces are, and a synthetic trace builder for tests that need exact control.
#pragma once

#include <cstdint>
#include <filesystem>
#include <random>

#include "trace/route_trace.h"
#include "test_support.h"

namespace moetier::test {

inline std::filesystem::path traces_dir() { return shared_dir() / "traces" / "bigmoeonedge-2026-07-15"; }
inline std::filesystem::path qwen_trace() { return traces_dir() / "qwen.route.csv"; }
inline std::filesystem::path gptoss_trace() { return traces_dir() / "gptoss.route.csv"; }

// A synthetic trace: `prompt` prefill tokens then `decode` decode tokens, top-k routing drawn from a skewed
// (Zipf-like) distribution per layer so that caches see realistic reuse. Uniform expert_bytes.
inline trace::RouteTrace synthetic_trace(int32_t n_moe_layers, int32_t n_expert, int32_t top_k, int32_t prompt,
                                         int32_t decode, uint64_t expert_bytes, uint32_t seed = 1) {
  trace::RouteTrace t;
  t.header.model = "/synthetic/model.gguf";
  t.header.arch = "synthetic";
  t.header.n_moe_layers = n_moe_layers;
  t.header.n_expert = n_expert;
  t.header.n_expert_used = top_k;
  t.header.layers.assign(static_cast<size_t>(n_moe_layers), {expert_bytes, expert_bytes / 4});
  std::mt19937 rng(seed);
  std::vector<double> w(static_cast<size_t>(n_expert));
  for (int32_t e = 0; e < n_expert; ++e) w[e] = 1.0 / (1.0 + e);
  std::discrete_distribution<int32_t> pick(w.begin(), w.end());
  auto route = [&](int32_t turn, uint8_t phase, int64_t step, int32_t layer) {
    std::vector<int32_t> chosen;
    while (static_cast<int32_t>(chosen.size()) < top_k) {
      const int32_t e = (pick(rng) + layer * 7) % n_expert;  // each layer its own hot set
      bool dup = false;
      for (int32_t c : chosen) dup |= c == e;
      if (!dup) chosen.push_back(e);
    }
    for (int32_t s = 0; s < top_k; ++s) {
      trace::TraceRow r;
      r.turn = turn;
      r.phase = phase;
      r.step = step;
      r.layer = layer;
      r.slot = s;
      r.expert = chosen[s];
      r.weight = 1.0f / static_cast<float>(s + 2);
      t.rows.push_back(r);
    }
  };
  t.rows.reserve(static_cast<size_t>(prompt + decode) * n_moe_layers * top_k);
  for (int32_t l = 0; l < n_moe_layers; ++l)
    for (int32_t p = 0; p < prompt; ++p) route(0, 0, p, l);
  for (int32_t d = 0; d < decode; ++d)
    for (int32_t l = 0; l < n_moe_layers; ++l) route(0, 1, prompt + d, l);
  return t;
}

}  // namespace moetier::test
