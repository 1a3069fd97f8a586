// The hot list of the "static" policy: (layer, expert) entries ordered by how many decode steps routed to them,
// most first (ties: lower layer, then lower expert). Counted over the first `max_decode_steps` decode steps of
// the trace (all when negative). A trace without decode steps counts its prefill batches instead.
#pragma once

#include <cstdint>
#include <vector>

#include "moe/cache_policy.h"
#include "sim/batches.h"

namespace moetier::sim {

std::vector<moe::ExpertKey> hot_list(const BatchedTrace& trace, int64_t max_decode_steps = -1);

}  // namespace moetier::sim
