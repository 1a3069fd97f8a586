// Where the routed experts live for a run: resident in the mapping, or streamed from the file through the RAM
// expert cache, with the cache budget (`auto`: what the available RAM leaves), the cache policy and, for the
// adaptive tier, its parameters, the read lanes and the dense-weight policy. Each choice is logged with its
// reason through `log(topic, text)`.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "engine/context_memory.h"
#include "engine/engine_config.h"
#include "gguf/gguf.h"
#include "moe/adapt_rule.h"
#include "moe/expert_layout.h"
#include "moe/expert_source.h"
#include "moe/streaming_experts.h"

namespace moetier::engine {

// Logs "topic: text" (or text alone for an empty topic) and keeps it among the engine's decisions.
using DecisionLog = std::function<void(std::string topic, std::string text)>;

// Where the lines logged after loading go (the store's I/O fallbacks, a failed heat-profile save): cfg.log as
// written, else stderr. A copy of the sink, so it outlives the config.
std::function<void(std::string_view)> later_log(const EngineConfig& cfg);

// The adaptive tier's parameters for a fast tier of cache_slots over total_experts: the rule over tiers
// (moe::decide_adapt, logged as "adapt-tuned"), then the explicit --adapt-* values (logged when given).
moe::PolicyParams adapt_params(const EngineConfig& cfg, int64_t cache_slots, int64_t total_experts,
                               moe::SlowTier slow, const DecisionLog& log);

struct ExpertSetup {
  std::unique_ptr<moe::ExpertSource> source;  // null: the model takes its experts from the mapping
  moe::StreamingExperts* stream = nullptr;    // `source` when it streams, else null
  std::string dense_weights = "mapped";       // the dense policy in effect after any fallback
  // Resident experts, and the model, its context memory and placement auto's headroom fit in the available memory
  // (moe::decide_placement's test), so that a copy of the experts in anonymous memory cannot run the host short
  // (model::ModelOptions::repack_experts).
  bool fits_ram = false;
  // fits_ram, and RAM also holds a copy of every expert beside the whole file in the page cache, so a copy's file
  // pages need not leave the page cache (model::ModelOptions::evict_repacked_experts).
  bool fits_beside_file = false;
};

// `layout` is the file's (moe::ExpertLayout::from_model). n_expert_used: the top-k in force (an override's, a replay's, or 0 for the file's), for the cliff guard.
// mem_available: bytes, what the start log's memory line says (moe::read_memory). `log` is
// called during this call only; the streaming store's later lines go to cfg.log (stderr when unset).
// Throws moetier::Error naming the setting for --adapt-* values without the adaptive policy, an --adapt-decay
// outside (0, 1], an unknown policy, or a file the store cannot open.
ExpertSetup setup_experts(const gguf::GgufModel& file, const moe::ExpertLayout& layout, const EngineConfig& cfg,
                          int64_t n_expert_used, const ContextBytes& ctx_bytes, uint64_t mem_available,
                          const DecisionLog& log);

}  // namespace moetier::engine
