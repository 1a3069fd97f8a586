// Shared by the adapt tests: a small synthetic model and a synthetic route trace of the same shape, the engine run
// under --route-replay semantics (RouteReplay + StreamingExperts + Generator), and the simulator on the same trace.
#pragma once

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "model/generator.h"
#include "model/model.h"
#include "model/route_replay.h"
#include "moe/streaming_experts.h"
#include "sample/sampler.h"
#include "sim/batches.h"
#include "sim/replay.h"
#include "synth/synth.h"
#include "test_support.h"
#include "trace/route_trace.h"

namespace moetier::adapt_test {

namespace fs = std::filesystem;

inline constexpr int32_t kLayers = 8, kExperts = 64, kTopK = 4;

// tiny qwen3moe with 8 layers x 64 experts, top-4 (written once per build tree).
inline fs::path synthetic_model() {
  const fs::path p = test::tmp_dir("adapt") / "tiny-8x64-Q4_K_M.gguf";
  if (fs::exists(p)) return p;
  synth::SynthOptions o;
  o.shape = synth::find_preset("tiny");
  o.shape.n_layer = kLayers;
  o.shape.n_expert = kExperts;
  o.shape.n_expert_used = kTopK;
  o.type = "Q4_K_M";
  // ctest runs tests of this binary in parallel processes: each writes its own part file, the first publishes it.
  o.output = p.string() + ".part" + std::to_string(getpid());
  synth::write_synthetic_model(o);
  test::publish_once(o.output, p);
  return p;
}

// A route trace with real-looking structure: per layer a Zipf(1.1) popularity over a random permutation of the
// experts, and temporal locality (each slot repeats one of the previous token's experts with probability 0.5).
inline trace::RouteTrace synthetic_trace(int64_t n_prompt, int64_t n_decode, uint64_t seed, uint64_t expert_bytes) {
  trace::RouteTrace t;
  t.header.model = "synthetic";
  t.header.arch = "qwen3moe";
  t.header.n_moe_layers = kLayers;
  t.header.n_expert = kExperts;
  t.header.n_expert_used = kTopK;
  t.header.layers.assign(kLayers, trace::TraceLayer{expert_bytes, 1});
  std::mt19937_64 rng(seed);
  std::vector<double> zipf(kExperts);
  for (int32_t i = 0; i < kExperts; ++i) zipf[static_cast<size_t>(i)] = 1.0 / std::pow(i + 1.0, 1.1);
  std::discrete_distribution<int32_t> pick(zipf.begin(), zipf.end());
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<std::vector<int32_t>> perm(kLayers), prev(kLayers);
  for (auto& p : perm) {
    for (int32_t i = 0; i < kExperts; ++i) p.push_back(i);
    std::shuffle(p.begin(), p.end(), rng);
  }
  for (int64_t pos = 0; pos < n_prompt + n_decode; ++pos) {
    const uint8_t phase = pos < n_prompt ? 0 : 1;
    for (int32_t l = 0; l < kLayers; ++l) {
      std::vector<int32_t> chosen;
      while (static_cast<int32_t>(chosen.size()) < kTopK) {
        auto& pv = prev[static_cast<size_t>(l)];
        const int32_t e = !pv.empty() && u(rng) < 0.5
                              ? pv[static_cast<size_t>(rng() % pv.size())]
                              : perm[static_cast<size_t>(l)][static_cast<size_t>(pick(rng))];
        if (std::find(chosen.begin(), chosen.end(), e) == chosen.end()) chosen.push_back(e);
      }
      prev[static_cast<size_t>(l)] = chosen;
      for (int32_t s = 0; s < kTopK; ++s) {
        trace::TraceRow r;
        r.phase = phase;
        r.step = pos;
        r.layer = l;
        r.slot = s;
        r.expert = chosen[static_cast<size_t>(s)];
        r.weight = phase == 0 ? std::nanf("") : 1.0f / static_cast<float>(s + 2);  // both weight paths
        t.rows.push_back(r);
      }
    }
  }
  return t;
}

struct EngineRun {
  std::vector<int64_t> decode_misses_by_layer;  // [n_layer]
  int64_t prefill_misses = 0;
  moe::StreamCounters totals;
  int64_t cache_slots = 0;
};

class Hooks final : public model::StepHooks {
 public:
  explicit Hooks(moe::StreamingExperts* s) : s_(s) {}
  void begin(bool prefill) override { s_->set_phase(prefill ? moe::Phase::prefill : moe::Phase::decode); }
  void end(bool prefill, int64_t, double) override {
    s_->end_step();
    if (prefill) after_prefill.assign(s_->misses_by_moe_layer().begin(), s_->misses_by_moe_layer().end());
  }
  std::vector<uint64_t> after_prefill;

 private:
  moe::StreamingExperts* s_;
};

// The engine on `trace`: a prompt of the trace's prefill length, then every decode step, through a cache of
// `slots` slots under `policy`.
inline EngineRun run_engine(const fs::path& model_path, const trace::RouteTrace& trace, int64_t slots,
                            const std::string& policy, const moe::PolicyParams& params = {}) {
  const auto file = gguf::GgufModel::open(model_path);
  model::RouteReplay replay(trace, "synthetic trace");
  moe::StreamingOptions so;
  {
    const moe::ExpertStore store(file);
    so.cache_bytes = store.slot_bytes() * static_cast<uint64_t>(slots);
  }
  so.policy = policy;
  so.policy_params = params;
  auto src = std::make_unique<moe::StreamingExperts>(file, so);
  moe::StreamingExperts* s = src.get();
  model::ModelOptions mo;
  mo.n_ctx = replay.prefill_tokens() + replay.decode_tokens() + 1;
  mo.routing_override = &replay;
  const auto m = model::load_model(file, mo, std::move(src));
  replay.check_model(m->info().n_moe_layers, m->info().n_expert, m->info().n_expert_used);
  sample::SamplerParams sp;
  sp.temperature = 0.0f;
  sample::Sampler sampler(sp, m->info().n_vocab);
  Hooks hooks(s);
  model::Generator g(*m, sampler, &hooks);
  std::vector<int32_t> prompt(static_cast<size_t>(replay.prefill_tokens()));
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(1 + i);
  g.prefill(prompt);
  for (int64_t i = 0; i < replay.decode_tokens(); ++i) g.decode(g.sample());
  EngineRun r;
  r.cache_slots = s->cache_slots();
  for (size_t l = 0; l < hooks.after_prefill.size(); ++l) {
    r.prefill_misses += static_cast<int64_t>(hooks.after_prefill[l]);
    r.decode_misses_by_layer.push_back(static_cast<int64_t>(s->misses_by_moe_layer()[l] - hooks.after_prefill[l]));
  }
  r.totals = s->totals();
  return r;
}

// The simulator as the engine runs: slot capacity, strict, cliff guard on.
inline sim::ReplayResult run_sim(const trace::RouteTrace& trace, int64_t slots, const std::string& policy,
                                 const moe::PolicyParams& params = {}) {
  sim::ReplayOptions ro;
  ro.policy = policy;
  ro.cache_entries = slots;
  ro.strict = true;
  ro.cliff_guard = true;
  ro.params = params;
  return sim::replay(sim::make_batches(trace), ro);
}

}  // namespace moetier::adapt_test
