#include "engine/context_memory.h"

#include <algorithm>
#include <limits>

namespace moetier::engine {

namespace {

// a x b, or UINT64_MAX where it would wrap: a context too large for memory must read as too large, not as a
// small number (-c 4611686018427387904 would otherwise pass the memory check).
uint64_t mul_sat(uint64_t a, uint64_t b) {
  uint64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? std::numeric_limits<uint64_t>::max() : r;
}

}  // namespace

ContextBytes context_bytes(const model::ArchSummary& s, int64_t n_ctx, model::KvType kv_type, int threads, int n_seq) {
  const uint64_t elem = kv_type == model::KvType::f32 ? 4 : 2;
  const auto ctx = static_cast<uint64_t>(std::max<int64_t>(n_ctx, 0));
  ContextBytes b;
  b.kv = mul_sat(mul_sat(mul_sat(static_cast<uint64_t>(s.kv_elements_per_position), ctx), elem),
                 static_cast<uint64_t>(std::max(n_seq, 1)));
  b.scores = mul_sat(mul_sat(mul_sat(ctx, static_cast<uint64_t>(s.max_query_heads_per_kv)),
                             static_cast<uint64_t>(std::max(threads, 1))),
                     sizeof(float));
  b.recurrent = mul_sat(mul_sat(static_cast<uint64_t>(std::max<int64_t>(s.recurrent_floats_per_sequence, 0)),
                                static_cast<uint64_t>(std::max(n_seq, 1))),
                        sizeof(float));
  return b;
}

}  // namespace moetier::engine
