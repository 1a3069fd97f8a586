// Flags shared by the subcommands that load a model for inference (run, chat), and the loading itself: where
// the routed experts live (resident or streamed through the RAM expert cache), how they are read, and the start
// log that says what each `auto` resolved to.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "gguf/gguf.h"
#include "model/generator.h"
#include "model/model.h"
#include "model/route_replay.h"
#include "moe/streaming_experts.h"

namespace moetier::cli {

struct ModelFlags {
  std::string model;
  int64_t n_ctx = 0;  // 0: the model's training context, at most 4096
  int64_t n_batch = 512;
  int threads = 0;  // 0: one per hardware thread
  std::string kv_type = "f16";
  int64_t n_expert_used = 0;
  // Expert placement and the streaming store.
  std::string experts = "auto";
  std::string cache_mb = "auto";
  uint64_t cache_floor_mb = 1536;
  uint64_t cache_ceil_mb = 0;
  std::string cache_policy = "lru";
  // Adaptive tier (--cache-policy adaptive): unset = decided by moe::decide_adapt (adapt_rule.h).
  std::optional<int32_t> adapt_every;  // decode steps between swap passes
  std::optional<int32_t> adapt_swaps;  // most swap-ins per pass
  std::optional<double> adapt_decay;   // count multiplier after each pass
  bool adapt_tuned = false;            // force the tuned parameters
  std::string route_replay;            // route_trace v1 file whose routing replaces the router (lossy)
  int io_threads = 4;
  std::string io_engine;  // empty: the measured default
  bool overlap = true;
  bool no_odirect = false;
  std::string dense_weights = "anon";

  // Registers the flags on `cmd`.
  void add_to(CLI::App& cmd);
  model::ModelOptions options() const;  // throws moetier::Error for a bad value, naming the flag
};

// An opened file, the model built over it (it points into the file's mapping) and, when experts stream, the
// streaming source (owned by the model) for its counters.
struct LoadedModel {
  std::unique_ptr<gguf::GgufModel> file;
  std::unique_ptr<model::RouteReplay> replay;  // --route-replay; the model routes through it, so it outlives it
  std::unique_ptr<model::Model> model;
  moe::StreamingExperts* stream = nullptr;
  double load_seconds = 0.0;
  std::string dense_weights = "mapped";  // the dense policy in effect after any fallback (streaming only)
};

// Opens and loads, logging each decision on stderr (placement and why, cache budget, direct I/O, dense policy,
// context, an --n-expert-used override being lossy).
LoadedModel load(const ModelFlags& f);

// Generator hooks that tell the streaming store which phase runs and close its per-step counters; the totals
// are then in `stream->totals()`.
class StreamStepHooks final : public model::StepHooks {
 public:
  explicit StreamStepHooks(moe::StreamingExperts* stream) : stream_(stream) {}
  void begin(bool prefill) override;
  void end(bool prefill, int64_t n_tokens, double seconds) override;

 private:
  moe::StreamingExperts* stream_;
};

}  // namespace moetier::cli
