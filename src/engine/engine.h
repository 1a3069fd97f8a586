// The composition root: one function turns an EngineConfig into a loaded engine — the opened file, the model
// built over it, the routed-experts source it computes from (resident in the mapping, or streamed from the file
// through the RAM expert cache), an optional route replay, and the run recorder (metrics CSV, progress, route
// trace, summary) — and records every decision of the start log with its reason. `run`, `chat`, `eval` and
// `serve` load through it, so each command runs a model exactly as the others do.
//
//   engine::EngineConfig cfg{.model = "qwen3-30b-a3b.gguf"};
//   auto e = engine::load_engine(cfg);                  // logs "experts: stream (...)", "cache auto: ...", "model: ..."
//   model::Generator g(e->model(), sampler, e->hooks());
//
// Not thread-safe: one forward pass at a time, on the thread that calls the model.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine_config.h"
#include "engine/heat_keeper.h"
#include "gguf/gguf.h"
#include "model/generator.h"
#include "model/model.h"
#include "model/route_replay.h"
#include "moe/streaming_experts.h"
#include "moe/vram_tier.h"
#include "telemetry/run_metrics.h"

namespace moetier::engine {

// One line of the start log: what was decided (`topic`: experts, cache, dense weights, model, ...) and the
// choice with its reason (`text`), logged as "topic: text".
struct StartDecision {
  std::string topic;
  std::string text;
};

// Tells the streaming store which phase runs and closes its per-step counters (the recorder wraps it); between
// steps, lets the heat keeper save on its schedule.
class StreamStepHooks final : public model::StepHooks {
 public:
  StreamStepHooks(moe::StreamingExperts* stream, HeatKeeper* heat, moe::VramTier* tier)
      : stream_(stream), heat_(heat), tier_(tier) {}
  void begin(bool prefill) override;
  void end(bool prefill, int64_t n_tokens, double seconds) override;

 private:
  moe::StreamingExperts* stream_;  // null when experts are resident
  HeatKeeper* heat_;               // null when no heat profile is kept
  moe::VramTier* tier_;            // null without the VRAM expert tier
};

class Engine {
 public:
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;
  ~Engine();

  const EngineConfig& config() const { return cfg_; }
  const gguf::GgufModel& file() const { return *file_; }
  model::Model& model() { return *model_; }
  const model::ModelInfo& info() const { return model_->info(); }
  // The streaming expert store (owned by the model), or null when the experts are resident or there are none.
  moe::StreamingExperts* stream() { return stream_; }
  // The VRAM expert tier (owned by the model), or null.
  const moe::VramTier* vram_tier() const { return tier_; }
  const moe::StreamingExperts* stream() const { return stream_; }
  // The step hooks a Generator (or model::evaluate) must call: the recorder, which drives the stream's.
  model::StepHooks* hooks() { return recorder_.get(); }
  telemetry::RunRecorder& recorder() { return *recorder_; }
  // Whether the forward passes must fill routing for the hooks (a route trace was asked for).
  bool records_routing() const { return !cfg_.telemetry.route_trace.empty(); }
  // Ends the run's recording (summary line, files closed) and saves the heat profile; returns the summary; call
  // once.
  telemetry::RunSummary finish();
  // The summary as `run` prints it after the text.
  std::string format_summary(const telemetry::RunSummary& s) const;

  const std::vector<StartDecision>& decisions() const { return decisions_; }
  // The dense-weight policy in effect ("mapped" when experts are resident; after any fallback when they stream).
  std::string_view dense_weights() const { return dense_weights_; }
  // What was repacked at load (model::ModelInfo::repack), or why nothing was ("off ...").
  std::string_view repack() const { return repack_; }
  // What the expert cache's warm start did: "off", "none" or "N experts, M MiB read in S s"
  // (HeatKeeper::warm_summary); "off" when the experts do not stream.
  std::string_view cache_warm() const { return heat_ ? std::string_view(heat_->warm_summary()) : "off"; }
  double load_seconds() const { return load_seconds_; }

 private:
  friend std::unique_ptr<Engine> load_engine(const EngineConfig& cfg);
  explicit Engine(EngineConfig cfg) : cfg_(std::move(cfg)) {}
  void decide(std::string topic, std::string text);

  EngineConfig cfg_;  // as given, threads resolved
  std::vector<StartDecision> decisions_;
  std::string dense_weights_ = "mapped";
  std::string repack_;
  double load_seconds_ = 0;
  // Destroyed bottom-up: the recorder reads the stream, the model reads the replay and the file's mapping.
  std::unique_ptr<gguf::GgufModel> file_;
  std::unique_ptr<model::RouteReplay> replay_;  // --route-replay; the model routes through it
  std::unique_ptr<model::Model> model_;
  moe::StreamingExperts* stream_ = nullptr;
  moe::VramTier* tier_ = nullptr;  // the model's VRAM expert tier, or null
  std::unique_ptr<HeatKeeper> heat_;  // when the experts stream
  std::unique_ptr<StreamStepHooks> stream_hooks_;
  std::unique_ptr<telemetry::RunRecorder> recorder_;
};

// Opens, decides and loads, logging each decision (cfg.log, else stderr) as it is made. Throws moetier::Error
// naming the file, the setting or the tensor for a missing or malformed model, an unsupported architecture, a
// setting that does not apply (an --adapt-* value without the adaptive policy) or a file it cannot write.
std::unique_ptr<Engine> load_engine(const EngineConfig& cfg);

}  // namespace moetier::engine
