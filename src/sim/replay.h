// Trace replay: drives a CachePolicy with a batched route trace and counts what the engine would see.
// Batch semantics are the recording engine's (sim/batches.h); the policy object is the one the engine uses.
// A trace moetier recorded (a `# cache` line, trace::TraceCache) is replayed as moetier's expert store runs:
// capacity in slots (a byte budget is floor(bytes / slot_bytes) slots, at most one per (layer, expert)), strict
// capacity, the cliff guard as recorded, experts in ascending id order, prefill in chunks of n_batch tokens. Then
// a deterministic policy (all but adaptive) at the recorded capacity reproduces the residency column on every
// row. Adaptive's background reads land when the drive delivers them, so the engine may still miss an expert
// whose swap had not landed when its layer came; replay lands every swap before the next step.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "moe/cache_policy.h"
#include "moe/heat_profile.h"
#include "sim/batches.h"

namespace moetier::sim {

struct ReplayOptions {
  std::string policy = "lru";  // a make_policy name or "belady"
  uint64_t cache_bytes = 0;    // byte budget (--cache-mb × 2^20) ...
  int64_t cache_entries = 0;   // ... or a slot count (--cache-experts); exactly one > 0
  bool decode_only = false;    // skip prefill batches: the cache starts cold at the first decode step
  bool strict = false;         // strict capacity (engine slots) instead of the recording engine's budget rule;
                               // always on for a moetier trace
  bool cliff_guard = false;    // off: the phone engine had none; on for a moetier trace that recorded it on
  moe::PolicyParams params;    // adaptive / lfu-decay / static parameters (static_hot filled by the caller)
  // Warm start (moe::CachePolicy::warm): these experts, hottest first (a heat profile's order), are made resident
  // while they fit before the first batch, as the engine's --cache-warm does.
  std::vector<moe::ExpertKey> warm;
  bool count_heat = false;     // fill ReplayResult::heat with the decode routing, as the engine counts it
};

struct PhaseCounts {
  int64_t lookups = 0;      // distinct (layer, expert) per batch
  int64_t hits = 0;
  uint64_t miss_bytes = 0;  // bytes read on demand
  double hit_pct() const { return lookups ? 100.0 * static_cast<double>(hits) / static_cast<double>(lookups) : 0.0; }
};

struct ReplayResult {
  std::string policy;
  uint64_t cache_bytes = 0;
  int64_t cache_entries = 0;
  PhaseCounts prefill, decode;
  int64_t prefill_tokens = 0;  // replayed
  int64_t decode_tokens = 0;   // replayed decode steps
  int32_t n_moe_layers = 0;  // the trace's MoE layers
  std::vector<int64_t> decode_misses_by_layer;  // [n_moe_layers], by MoE ordinal
  int64_t rounds = 0;        // decode steps ended
  int64_t swap_passes = 0;   // end_step calls that planned at least one move
  int64_t swap_loads = 0;    // background loads
  uint64_t swap_bytes = 0;
  int64_t rows_compared = 0;  // trace rows whose recorded residency was compared with the prediction
  int64_t rows_matching = 0;
  bool cliff_guard_engaged = false;
  uint64_t working_set_bytes = 0;  // one token's routed experts over all layers
  int64_t warm_experts = 0;        // made resident by the warm start
  std::vector<PhaseCounts> decode_steps;  // [decode_tokens] each decode step's lookups and hits
  std::optional<moe::HeatProfile> heat;   // ReplayOptions::count_heat: the decode routing counts

  // Lookups and hits of decode steps [first, last) (clipped to those replayed): the warm-up and steady windows.
  PhaseCounts decode_window(int64_t first, int64_t last) const;
  double hit_pct_all() const;
  // Decode misses per (step, layer).
  double misses_per_layer_step() const;
  // MiB read per decode token: demand misses plus background swap loads.
  double read_mib_per_token() const;
  double swaps_per_round() const { return rounds ? static_cast<double>(swap_loads) / static_cast<double>(rounds) : 0; }
  double residency_match_pct() const;
};

// Throws moetier::Error for an unknown policy or a bad capacity. A moetier trace replayed with a byte budget below
// one slot has no cache: every lookup misses, as in the engine.
ReplayResult replay(const BatchedTrace& trace, const ReplayOptions& options);

}  // namespace moetier::sim
