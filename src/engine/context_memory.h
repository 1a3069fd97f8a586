// Memory that grows with the context and with the number of sequences, which the expert placement and the cache
// budget must leave room for: the KV cache (K and V of every layer, kv_elements_per_position elements of the KV
// type per position, per sequence), the attention's score rows (model/attention.h: per compute thread, one KV
// head's query heads' scores over n_ctx positions, float32) and a recurrent model's state (per sequence, float32,
// independent of the context). Sizes come from the architecture (model::ArchSummary), not from raw metadata reads.
#pragma once

#include <cstdint>

#include "model/kv_cache.h"
#include "model/model.h"

namespace moetier::engine {

struct ContextBytes {
  uint64_t kv = 0;         // KV cache, bytes
  uint64_t scores = 0;     // attention score rows, bytes
  uint64_t recurrent = 0;  // recurrent state (DeltaNet), bytes
  // Saturates like the parts (context_bytes): UINT64_MAX means "more than any memory".
  uint64_t total() const {
    const uint64_t a = kv > UINT64_MAX - scores ? UINT64_MAX : kv + scores;
    return a > UINT64_MAX - recurrent ? UINT64_MAX : a + recurrent;
  }
};

// n_seq: KV caches of n_ctx positions and recurrent states, one each per sequence (ModelOptions::n_seq); the
// score rows are per thread, shared by them.
ContextBytes context_bytes(const model::ArchSummary& s, int64_t n_ctx, model::KvType kv_type, int threads,
                           int n_seq = 1);

}  // namespace moetier::engine
