#include "engine/context_memory.h"

#include <algorithm>

namespace moetier::engine {

ContextBytes context_bytes(const model::ArchSummary& s, int64_t n_ctx, model::KvType kv_type, int threads) {
  const uint64_t elem = kv_type == model::KvType::f32 ? 4 : 2;
  const auto ctx = static_cast<uint64_t>(std::max<int64_t>(n_ctx, 0));
  ContextBytes b;
  b.kv = static_cast<uint64_t>(s.kv_elements_per_position) * ctx * elem;
  b.scores = ctx * static_cast<uint64_t>(s.max_query_heads_per_kv) * static_cast<uint64_t>(std::max(threads, 1)) *
             sizeof(float);
  return b;
}

}  // namespace moetier::engine
