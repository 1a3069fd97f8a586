#include "sim/vram_replay.h"

#include <algorithm>

#include "util/error.h"

namespace moetier::sim {

VramReplayResult replay_vram(const BatchedTrace& t, const VramReplayOptions& o) {
  if (o.slots < 1) fail("replay --tier vram: {} slots (at least 1)", o.slots);
  std::vector<uint64_t> bytes;
  for (const trace::TraceLayer& l : t.header.layers) bytes.push_back(l.expert_bytes);
  moe::SlotTier tier(t.header.n_moe_layers, t.header.n_expert, t.header.n_expert_used, bytes, o.slots, o.params);
  VramReplayResult r;
  r.slots = tier.n_slots();
  r.n_moe_layers = t.header.n_moe_layers;
  std::vector<int32_t> sorted;
  sorted.reserve(static_cast<size_t>(t.header.n_expert));
  for (const Step& s : t.steps) {
    if (o.decode_only && s.phase != moe::Phase::decode) continue;
    const bool decode = s.phase == moe::Phase::decode;
    (decode ? r.decode_tokens : r.prefill_tokens) += s.tokens;
    const moe::SlotTierCounters before = tier.counters();
    tier.set_phase(s.phase);
    for (uint32_t bi = s.batch_begin; bi < s.batch_end; ++bi) {
      const Batch& b = t.batches[bi];
      sorted.assign(t.experts.begin() + b.expert_begin, t.experts.begin() + b.expert_end);
      std::sort(sorted.begin(), sorted.end());
      tier.lookup(b.layer, sorted);
    }
    for (const moe::ExpertKey& k : tier.end_step()) tier.landed(k);
    (decode ? r.decode : r.prefill) += tier.counters() - before;
  }
  return r;
}

}  // namespace moetier::sim
