#include "sim/replay.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <optional>
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

PhaseCounts ReplayResult::decode_window(int64_t first, int64_t last) const {
  PhaseCounts c;
  const auto n = static_cast<int64_t>(decode_steps.size());
  for (int64_t s = std::max<int64_t>(first, 0); s < std::min(last, n); ++s) {
    c.lookups += decode_steps[static_cast<size_t>(s)].lookups;
    c.hits += decode_steps[static_cast<size_t>(s)].hits;
    c.miss_bytes += decode_steps[static_cast<size_t>(s)].miss_bytes;
  }
  return c;
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
  if ((o.cache_bytes > 0) == (o.cache_entries > 0)) {
    fail("replay: give exactly one of a cache size in bytes ({}) and in experts ({})", o.cache_bytes,
         o.cache_entries);
  }
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
  if (const std::optional<trace::TraceCache>& rec = t.header.cache) {
    // A moetier trace: its store's cache is fixed slots, each holding any expert, so a byte budget buys
    // floor(bytes / slot_bytes) of them, at most one per (layer, expert), exactly as StreamingExperts sizes its
    // arena (the working slots it adds for experts not retained hold nothing between batches); the capacity is
    // strict and the cliff guard is as the run had it.
    if (o.cache_bytes > 0) {
      const uint64_t n_keys = static_cast<uint64_t>(cfg.n_moe_layers) * static_cast<uint64_t>(cfg.n_expert);
      cfg.capacity_entries = static_cast<int64_t>(std::min(o.cache_bytes / rec->slot_bytes, n_keys));
      cfg.capacity_bytes = 0;
    }
    cfg.strict = true;
    cfg.cliff_guard = o.cliff_guard || rec->cliff_guard;
  }

  // The batches replayed, in order, and for Bélády their future.
  std::vector<uint32_t> replayed;
  for (const Step& s : t.steps) {
    if (o.decode_only && s.phase != moe::Phase::decode) continue;
    for (uint32_t b = s.batch_begin; b < s.batch_end; ++b) replayed.push_back(b);
  }
  std::unique_ptr<moe::CachePolicy> policy;
  BeladyPolicy* belady = nullptr;
  std::vector<int64_t> next;
  // A budget below one slot: the store has no cache and every lookup misses (the policy name is still checked).
  const bool no_cache = cfg.capacity_bytes == 0 && cfg.capacity_entries == 0;
  if (no_cache) cfg.capacity_entries = 1;
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
  r.cache_entries = no_cache ? 0 : cfg.capacity_entries;
  r.n_moe_layers = t.header.n_moe_layers;
  r.decode_misses_by_layer.assign(static_cast<size_t>(t.header.n_moe_layers), 0);
  r.cliff_guard_engaged = !no_cache && policy->cliff_guard_engaged();
  if (no_cache) policy.reset();
  if (policy && !o.warm.empty()) r.warm_experts = static_cast<int64_t>(policy->warm(o.warm).size());
  if (o.count_heat) {
    r.heat.emplace(moe::HeatModel{std::filesystem::path(t.header.model).filename().string(), t.header.arch, 0,
                                  t.header.n_moe_layers, t.header.n_expert});
  }
  for (const trace::TraceLayer& l : t.header.layers) r.working_set_bytes += t.header.n_expert_used * l.expert_bytes;

  moe::AccessResult res;
  moe::SwapPlan plan;
  std::vector<int32_t> pos_of(static_cast<size_t>(t.header.n_expert), -1);  // expert -> position in the batch
  for (const Step& s : t.steps) {
    if (o.decode_only && s.phase != moe::Phase::decode) continue;
    const bool decode = s.phase == moe::Phase::decode;
    PhaseCounts& pc = decode ? r.decode : r.prefill;
    (decode ? r.decode_tokens : r.prefill_tokens) += s.tokens;
    if (decode) r.decode_steps.emplace_back();
    for (uint32_t bi = s.batch_begin; bi < s.batch_end; ++bi) {
      const Batch& b = t.batches[bi];
      const std::span<const int32_t> experts(t.experts.data() + b.expert_begin, b.expert_end - b.expert_begin);
      if (belady) belady->set_next_uses(std::span<const int64_t>(next.data() + b.expert_begin, experts.size()));
      if (policy) {
        policy->access(b.layer, experts, s.phase, res);
      } else {
        res.clear();
        res.hit.assign(experts.size(), 0);
        res.misses = static_cast<int32_t>(experts.size());
        res.miss_bytes = experts.size() * t.header.layers[b.layer].expert_bytes;
      }
      pc.lookups += static_cast<int64_t>(experts.size());
      pc.hits += res.hits;
      pc.miss_bytes += res.miss_bytes;
      if (decode) {
        PhaseCounts& step = r.decode_steps.back();
        step.lookups += static_cast<int64_t>(experts.size());
        step.hits += res.hits;
        step.miss_bytes += res.miss_bytes;
        if (r.heat) r.heat->record(b.layer, experts);
      }
      if (decode) r.decode_misses_by_layer[b.layer] += res.misses;
      // The recorded residency of every row against the prediction for its expert.
      for (size_t k = 0; k < experts.size(); ++k) pos_of[experts[k]] = static_cast<int32_t>(k);
      for (uint32_t ri = b.row_begin; ri < b.row_end; ++ri) {
        const RowRef& row = t.rows[ri];
        r.rows_matching += res.hit[pos_of[row.expert]] == row.recorded_hit ? 1 : 0;
      }
      r.rows_compared += b.row_end - b.row_begin;
    }
    plan.clear();
    if (policy) policy->end_step(s.phase, plan);
    if (decode) ++r.rounds;
    if (decode && r.heat) r.heat->end_decode_step();
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
