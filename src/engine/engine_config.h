// Everything that decides how a model is loaded and run, as one value: what `run`, `chat`, `eval` and
// `serve` fill from their flags and hand to load_engine() (engine/engine.h). Fields are parsed values, not flag
// text: the CLI checks and converts its inputs, naming the flag, and the engine decides each `auto` (logging the
// choice and its reason). Sizes are MiB where the flag is MiB.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/kv_cache.h"
#include "moe/cache_policy.h"
#include "moe/tier_costs.h"
#include "moe/dense_weights.h"
#include "moe/io/read_engine.h"
#include "moe/placement.h"
#include "quant/matmul.h"

namespace moetier::engine {

// The telemetry sinks of a run (telemetry/run_metrics.h). Empty paths write nothing; the recorder is made in
// every case, for the end-of-run summary.
struct TelemetryConfig {
  std::string csv;            // per-step metrics CSV (moetier_metrics v1)
  std::string progress;       // "", "text" or "json": one line per step on stderr
  std::string route_trace;    // route_trace v1 of every routed (step, MoE layer, slot)
  int64_t steady_skip = -1;   // decode tokens of warm-up left out of the steady tok/s; -1: auto
  std::string command;        // the CSV's `command` setting: "run", "chat", "eval", ...
  // The caller's own resolved settings (sampling, n_predict, ...), appended to the CSV's `# config` lines after
  // the engine's.
  std::vector<std::pair<std::string, std::string>> settings;
};

// The largest MiB value a setting takes (1 EiB): anything larger is a wrapped negative number, and below it the
// byte counts (MiB x 2^20, plus the dense and context bytes) cannot overflow.
inline constexpr uint64_t kMaxMib = uint64_t{1} << 40;

// The cache policies a run takes (EngineConfig::cache_policy): moe::policy_names() but "static", whose hot list
// comes from a profile trace that only `moetier replay --profile` reads; without one it would never fill.
inline std::vector<std::string_view> run_policy_names() {
  std::vector<std::string_view> names;
  for (const std::string_view n : moe::policy_names()) {
    if (n != "static") names.push_back(n);
  }
  return names;
}

struct EngineConfig {
  std::string model;        // GGUF path (for a split model, any shard)
  int64_t n_ctx = 0;        // KV cache positions; 0: the architecture's default (model::default_context)
  int64_t n_batch = 512;    // most prompt tokens per forward pass (capped at n_ctx)
  int n_seq = 1;            // sequences with their own KV cache of n_ctx positions (serve --parallel), at most
                            // model::kMaxSequences
  int threads = 0;          // compute threads; 0: one per hardware thread
  model::KvType kv_type = model::KvType::f16;
  int64_t n_expert_used = 0;  // top-k override (lossy); 0: the model's (or a route replay's)
  quant::ActivationRounding rounding = quant::ActivationRounding::match_ggml;
  bool repack = true;  // model::ModelOptions::repack (--no-repack clears it)
  // With repack, the resident routed experts too, where the model fits in RAM (model::ModelOptions::repack_experts;
  // --no-repack-experts clears it)
  bool repack_experts = true;
  // GPU placement (model::ModelOptions, model/gpu_placement.h): the last n_gpu_layers blocks' products on Vulkan
  // device gpu_device (more than the block count: the output head too), the experts of the first n_cpu_moe blocks
  // on the CPU. 0 layers: CPU only.
  int n_gpu_layers = 0;
  int n_cpu_moe = 0;
  int gpu_device = 0;
  // The VRAM expert tier (model::ModelOptions::experts_vram_mib, moe/vram_tier.h): 0 off, model::kVramAuto (-1)
  // auto, else MiB of expert slots, at most kMaxMib; vram_reserve_mib is what auto leaves free, at most kMaxMib.
  int64_t experts_vram_mib = 0;
  double experts_vram_pct = 0;  // instead of MiB: slots for this % of the experts (model::ModelOptions)
  int64_t vram_reserve_mib = 1500;
  moe::MissRoute vram_misses = moe::MissRoute::measured;  // where the tier's misses run (--vram-misses)

  // Where the routed experts live and, when they stream, the RAM expert cache over the file.
  moe::Placement placement = moe::Placement::automatic;
  // Expert cache budget, at most kMaxMib; nullopt: auto (available RAM minus the rest).
  std::optional<uint64_t> cache_mib;
  uint64_t cache_floor_mib = 1536;    // RAM that cache auto leaves to the system, at most kMaxMib
  uint64_t cache_ceil_mib = 0;        // upper bound of cache auto, at most kMaxMib; 0: none
  std::string cache_policy = "lru";   // one of run_policy_names()
  // The adaptive tier's parameters; unset: decided by moe::decide_adapt (moe/adapt_rule.h).
  std::optional<int32_t> adapt_every;  // decode steps between swap passes, >= 1
  std::optional<int32_t> adapt_swaps;  // most swap-ins per pass, >= 0
  std::optional<double> adapt_decay;   // count multiplier after each pass, in (0, 1]
  bool adapt_tuned = false;            // force the tuned parameters
  moe::DensePolicy dense_policy = moe::DensePolicy::anon;  // the dense weights, when experts stream
  int io_lanes = 4;                        // expert reads in flight
  std::optional<moe::io::EngineKind> io_engine;  // unset: the measured default
  bool overlap = true;                     // compute cached experts while missing ones are read
  // --expert-prefetch next: read ahead the experts the next MoE block's router guesses from each block's output
  // (model/next_layer_guess.h), into n_expert_used slots of their own; streamed experts only.
  bool expert_prefetch = false;
  bool direct_io = true;                   // O_DIRECT expert reads
  // The heat profile of the streamed experts (engine/heat_keeper.h): "off", "auto" (a file in the user's cache
  // directory) or a path; kept only when the experts stream.
  std::string heat = "off";
  // The expert cache's warm start from a heat profile: "off", "auto" (the kept profile, when there is one that
  // fits) or a profile path.
  std::string cache_warm = "off";

  std::string route_replay;  // route_trace v1 whose routing replaces the router (lossy); empty: none
  TelemetryConfig telemetry;

  // Where the start log goes, one line per call; unset: stderr.
  std::function<void(std::string_view)> log;
};

}  // namespace moetier::engine
