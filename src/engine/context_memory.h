// Memory that grows with the context (and with the number of sequences, which each keep one), which the expert
// placement and the cache budget must leave room for: the KV cache (K and V of every layer, kv_elements_per_position elements of the KV type per position) and the
// attention's score rows (model/attention.h: per compute thread, one KV head's query heads' scores over n_ctx
// positions, float32). Sizes come from the architecture (model::ArchSummary), not from raw metadata reads.
#pragma once

#include <cstdint>

#include "model/kv_cache.h"
#include "model/model.h"

namespace moetier::engine {

struct ContextBytes {
  uint64_t kv = 0;      // KV cache, bytes
  uint64_t scores = 0;  // attention score rows, bytes
  // Saturates like the parts (context_bytes): UINT64_MAX means "more than any memory".
  uint64_t total() const { return kv > UINT64_MAX - scores ? UINT64_MAX : kv + scores; }
};

// n_seq: KV caches of n_ctx positions each (ModelOptions::n_seq); the score rows are per thread, shared by them.
ContextBytes context_bytes(const model::ArchSummary& s, int64_t n_ctx, model::KvType kv_type, int threads,
                           int n_seq = 1);

}  // namespace moetier::engine
