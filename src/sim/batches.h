// A route trace turned into what the cache sees: steps made of batches, each batch one layer's load, exactly as
// the recording engine counted (../shared/traces/README.md, "How the recording engine counted"):
//   - a turn's prefill is ONE step: a single pass over the layers, one batch per layer holding every prompt
//     token's experts in token order, then slot order;
//   - each decode token is one step: one batch per layer, layers in order.
// Inside a batch each distinct expert is one lookup; its experts are listed in order of LAST use, because a
// repeat refreshes recency (see CachePolicy::access).
// A trace moetier recorded (its header has a `# cache` line, trace::TraceCache) is grouped the way moetier's
// expert store sees it instead:
//   - a prefill longer than the cache line's n_batch tokens is several forward passes (model/generator.cpp): the
//     step holds one batch per (chunk of n_batch tokens from the turn's first prompt position, layer), chunks in
//     order, layers in order within a chunk;
//   - a batch's experts are listed in ascending id order, the order model/moe_ffn.cpp asks the store for them.
#pragma once

#include <cstdint>
#include <vector>

#include "moe/cache_policy.h"
#include "trace/route_trace.h"

namespace moetier::sim {

struct Batch {
  int32_t layer = 0;
  uint32_t expert_begin = 0, expert_end = 0;  // range in BatchedTrace::experts: distinct ids, last use order
  uint32_t row_begin = 0, row_end = 0;        // range in BatchedTrace::rows: the trace rows of this batch
};

struct Step {
  moe::Phase phase = moe::Phase::decode;
  int32_t turn = 0;
  int64_t first_pos = 0;  // trace `step` (context position) of the first token
  int32_t tokens = 0;     // tokens in this step: the prompt length for prefill, 1 for decode
  uint32_t batch_begin = 0, batch_end = 0;  // range in BatchedTrace::batches
};

// One trace row as the simulator compares it: which expert, and whether the recording engine had it resident.
struct RowRef {
  int32_t expert = 0;
  uint8_t recorded_hit = 0;  // residency 1 or 2
};

struct BatchedTrace {
  trace::TraceHeader header;
  std::vector<Step> steps;
  std::vector<Batch> batches;
  std::vector<int32_t> experts;  // all batches' distinct experts, concatenated
  std::vector<RowRef> rows;      // all batches' rows, concatenated (token order, then slot order)
  int64_t prefill_tokens = 0;
  int64_t decode_tokens = 0;
};

// Groups rows by (turn, phase, layer) for prefill (by (turn, chunk, layer) for a moetier trace) and (turn, step,
// layer) for decode. Rows may come in any order (they are sorted when they are not already in that order).
BatchedTrace make_batches(const trace::RouteTrace& trace);

}  // namespace moetier::sim
