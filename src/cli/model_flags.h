// The flags of every subcommand that loads a model for inference (run, chat, eval): the model, context and
// threads, where the routed experts live and how they stream, and the telemetry sinks. They only map onto
// engine::EngineConfig; the engine decides and logs each `auto` (engine/engine.h).
#pragma once

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "engine/engine_config.h"

namespace moetier::cli {

struct ModelFlags {
  std::string model;
  int64_t n_ctx = 0;  // 0: the model's default context
  int64_t n_batch = 512;
  int threads = 0;  // 0: one per hardware thread
  std::string kv_type = "f16";
  int64_t n_expert_used = 0;
  bool no_repack = false;
  bool no_repack_experts = false;
  // GPU placement (llama.cpp's -ngl, --n-cpu-moe; --device N picks a `moetier devices` index).
  int n_gpu_layers = 0;
  int n_cpu_moe = 0;
  int gpu_device = 0;
  std::string experts_vram = "off";  // off, auto or MiB
  int64_t vram_reserve_mib = 1500;
  std::string vram_misses = "auto";  // auto, cpu or pcie
  // Expert placement and the streaming store.
  std::string experts = "auto";
  std::string cache_mb = "auto";
  uint64_t cache_floor_mb = 1536;
  uint64_t cache_ceil_mb = 0;
  std::string cache_policy = "lru";
  std::optional<int32_t> adapt_every;
  std::optional<int32_t> adapt_swaps;
  std::optional<double> adapt_decay;
  bool adapt_tuned = false;
  std::string route_replay;
  int io_threads = 4;
  std::string io_engine;  // empty: the measured default
  bool overlap = true;
  std::string expert_prefetch = "off";
  bool no_odirect = false;
  std::string dense_weights = "anon";
  std::string heat = "auto";        // --heat: auto, off or a path
  std::string cache_warm = "auto";  // --cache-warm: auto, off or a profile path

  // Registers the flags on `cmd`; `ctx_help` describes -c's default (eval's differs from run's).
  void add_to(CLI::App& cmd, const char* ctx_help = nullptr);
  // The engine configuration; throws moetier::Error naming the flag for a value it cannot take.
  engine::EngineConfig config() const;
};

// --csv, --progress, --route-trace, --steady-skip: what a run records per step (telemetry/run_metrics.h).
struct TelemetryFlags {
  std::string csv;
  std::string progress;
  std::string route_trace;
  int64_t steady_skip = -1;

  void add_to(CLI::App& cmd);
  // Sets cfg.telemetry's sinks and its `command` setting.
  void apply(engine::EngineConfig& cfg, std::string command) const;
};

}  // namespace moetier::cli
