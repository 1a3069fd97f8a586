#include "sim/replay.h"

#include <memory>
#include <span>

#include "sim/belady.h"
#include "util/error.h"

namespace moetier::sim {

double ReplayResult::hit_pct_all() const {
  const int64_t l = prefill.lookups + decode.lookups;
  return l ? 100.0 * static_cast<double>(prefill.hits + decode.hits) / static_cast<double>(l) : 0.0;
}

double ReplayResult::misses_per_layer_step() const {
  const int64_t d = decode_tokens * n_moe_layers;
  return d ? static_cast<double>(decode.lookups - decode.hits) / static_cast<double>(d) : 0.0;
}

double ReplayResult::read_mib_per_token() const {
  if (decode_tokens == 0) return 0.0;
  return static_cast<double>(decode.miss_bytes + swap_bytes) / static_cast<double>(decode_tokens) / (1024.0 * 1024.0);
}

double ReplayResult::residency_match_pct() const {
  return rows_compared ? 100.0 * static_cast<double>(rows_matching) / static_cast<double>(rows_compared) : 0.0;
}

namespace {

// For each replayed batch entry, the index of the next replayed batch that uses the same (layer, expert).
std::vector<int64_t> next_uses(const BatchedTrace& t, const std::vector<uint32_t>& replayed) {
  std::vector<int64_t> next(t.experts.size(), BeladyPolicy::kNever);
  const size_t n = static_cast<size_t>(t.header.n_moe_layers) * static_cast<size_t>(t.header.n_expert);
  std::vector<int64_t> last(n, BeladyPolicy::kNever);
  for (size_t r = replayed.size(); r-- > 0;) {
    const Batch& b = t.batches[replayed[r]];
    for (uint32_t k = b.expert_begin; k < b.expert_end; ++k) {
      const size_t key = static_cast<size_t>(b.layer) * static_cast<size_t>(t.header.n_expert) + t.experts[k];
      next[k] = last[key];
      last[key] = static_cast<int64_t>(r);
    }
  }
  return next;
}

}  // namespace

ReplayResult replay(const BatchedTrace& t, const ReplayOptions& o) {
  moe::CacheConfig cfg;
  cfg.n_moe_layers = t.header.n_moe_layers;
  cfg.n_expert = t.header.n_expert;
  cfg.n_expert_used = t.header.n_expert_used;
  for (const trace::TraceLayer& l : t.header.layers) cfg.expert_bytes.push_back(l.expert_bytes);
  cfg.capacity_bytes = o.cache_bytes;
  cfg.capacity_entries = o.cache_entries;
  cfg.strict = o.strict;
  cfg.cliff_guard = o.cliff_guard;
  cfg.params = o.params;

  // The batches replayed, in order, and for Bélády their future.
  std::vector<uint32_t> replayed;
  for (const Step& s : t.steps) {
    if (o.decode_only && s.phase != moe::Phase::decode) continue;
    for (uint32_t b = s.batch_begin; b < s.batch_end; ++b) replayed.push_back(b);
  }
  std::unique_ptr<moe::CachePolicy> policy;
  BeladyPolicy* belady = nullptr;
  std::vector<int64_t> next;
  if (o.policy == "belady") {
    auto p = std::make_unique<BeladyPolicy>(cfg);
    belady = p.get();
    policy = std::move(p);
    next = next_uses(t, replayed);
  } else {
    policy = moe::make_policy(o.policy, cfg);
  }

  ReplayResult r;
  r.policy = std::string(policy->name());
  r.cache_bytes = o.cache_bytes;
  r.cache_entries = o.cache_entries;
  r.n_moe_layers = t.header.n_moe_layers;
  r.decode_misses_by_layer.assign(static_cast<size_t>(t.header.n_moe_layers), 0);
  r.cliff_guard_engaged = policy->cliff_guard_engaged();
  for (const trace::TraceLayer& l : t.header.layers) r.working_set_bytes += t.header.n_expert_used * l.expert_bytes;

  moe::AccessResult res;
  moe::SwapPlan plan;
  std::vector<int32_t> pos_of(static_cast<size_t>(t.header.n_expert), -1);  // expert -> position in the batch
  for (const Step& s : t.steps) {
    if (o.decode_only && s.phase != moe::Phase::decode) continue;
    const bool decode = s.phase == moe::Phase::decode;
    PhaseCounts& pc = decode ? r.decode : r.prefill;
    (decode ? r.decode_tokens : r.prefill_tokens) += s.tokens;
    for (uint32_t bi = s.batch_begin; bi < s.batch_end; ++bi) {
      const Batch& b = t.batches[bi];
      const std::span<const int32_t> experts(t.experts.data() + b.expert_begin, b.expert_end - b.expert_begin);
      if (belady) belady->set_next_uses(std::span<const int64_t>(next.data() + b.expert_begin, experts.size()));
      policy->access(b.layer, experts, s.phase, res);
      pc.lookups += static_cast<int64_t>(experts.size());
      pc.hits += res.hits;
      pc.miss_bytes += res.miss_bytes;
      if (decode) r.decode_misses_by_layer[b.layer] += res.misses;
      // The recorded residency of every row against the prediction for its expert.
      for (size_t k = 0; k < experts.size(); ++k) pos_of[experts[k]] = static_cast<int32_t>(k);
      for (uint32_t ri = b.row_begin; ri < b.row_end; ++ri) {
        const RowRef& row = t.rows[ri];
        r.rows_matching += res.hit[pos_of[row.expert]] == row.recorded_hit ? 1 : 0;
      }
      r.rows_compared += b.row_end - b.row_begin;
    }
    policy->end_step(s.phase, plan);
    if (decode) ++r.rounds;
    if (!plan.load.empty() || !plan.evict.empty()) ++r.swap_passes;
    // Background reads land before the next step: resident from then on.
    for (const moe::ExpertKey& k : plan.load) {
      ++r.swap_loads;
      r.swap_bytes += t.header.layers[k.layer].expert_bytes;
      policy->swap_landed(k);
    }
  }
  return r;
}

}  // namespace moetier::sim
