// `moetier replay TRACE --tier vram`: the VRAM expert tier over a route trace, driving the very SlotTier object
// the engine's tier drives (moe/slot_tier.h): per batch (one layer's distinct experts of a step, looked up in
// ascending id order as the engine's MoE block does), each expert a hit, a fill (copied into a free or reserved
// slot) or a miss computed by the CPU; end_step() after each step and every load it hands out landed before the
// next, as the engine copies them between steps. The same trace and settings give the engine's counts.
#pragma once

#include <cstdint>
#include <vector>

#include "moe/cache_policy.h"
#include "moe/slot_tier.h"
#include "sim/batches.h"

namespace moetier::sim {

struct VramReplayOptions {
  int64_t slots = 0;         // VRAM slots, > 0
  bool decode_only = false;  // skip prefill batches
  moe::PolicyParams params;  // the adaptive pass's
};

struct VramReplayResult {
  int64_t slots = 0;
  int32_t n_moe_layers = 0;
  int64_t prefill_tokens = 0, decode_tokens = 0;
  moe::SlotTierCounters prefill, decode;  // each phase's share of the tier's counters
  // Decode misses computed by the CPU per MoE layer and round.
  double cpu_per_layer_round() const {
    const int64_t d = decode_tokens * n_moe_layers;
    return d > 0 ? static_cast<double>(decode.misses_slow) / static_cast<double>(d) : 0.0;
  }
};

// Throws moetier::Error for no slots or an inconsistent trace.
VramReplayResult replay_vram(const BatchedTrace& trace, const VramReplayOptions& options);

}  // namespace moetier::sim
