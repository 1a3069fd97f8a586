#include "telemetry/live_stats.h"

#include <algorithm>
#include <string_view>

#include "util/error.h"

namespace moetier::telemetry {
namespace {

void add(LiveTotals& a, const LiveTotals& b) {
  a.steps += b.steps;
  a.prefill_tokens += b.prefill_tokens;
  a.decode_tokens += b.decode_tokens;
  a.prefill_ms += b.prefill_ms;
  a.decode_ms += b.decode_ms;
  a.hits += b.hits;
  a.misses += b.misses;
  a.read_bytes += b.read_bytes;
  a.decode_read_bytes += b.decode_read_bytes;
  a.stall_ms += b.stall_ms;
  a.swaps += b.swaps;
}

}  // namespace

uint64_t routed_expert_bytes(const gguf::GgufModel& file) {
  uint64_t n = 0;
  for (const auto& t : file.tensors())
    if (std::string_view(t.name).find("_exps.") != std::string_view::npos) n += t.n_bytes;
  return n;
}

LiveStats::LiveStats(model::StepHooks* inner, const moe::StreamingExperts* stream, const model::ModelInfo& info,
                     int64_t window)
    : inner_(inner), stream_(stream), window_(window) {
  if (window < 1) fail("live stats window of {} steps: must be at least 1", window);
  L_ = info.n_moe_layers;
  E_ = info.n_expert;
  K_ = info.n_expert_used;
  LE_ = static_cast<size_t>(L_ * E_);
  const auto L = static_cast<size_t>(L_), W = static_cast<size_t>(window);
  misses_at_begin_.assign(L, 0);
  cur_routed_.assign(LE_, 0);
  cur_lookups_.assign(L, 0);
  seen_in_pass_.assign(LE_, -1);
  ring_.assign(W, Step{});
  ring_routed_.assign(W * LE_, 0);
  ring_hits_.assign(W * L, 0);
  ring_misses_.assign(W * L, 0);
  win_routed_.assign(LE_, 0);
  win_hits_.assign(L, 0);
  win_misses_.assign(L, 0);
}

void LiveStats::set_mapped_expert_bytes(uint64_t bytes) {
  const std::lock_guard lock(mu_);
  mapped_bytes_ = bytes;
}

void LiveStats::begin(bool prefill) {
  if (inner_) inner_->begin(prefill);
  if (stream_ != nullptr) {
    at_begin_ = stream_->totals();
    const auto m = stream_->misses_by_moe_layer();
    std::copy_n(m.begin(), std::min(m.size(), misses_at_begin_.size()), misses_at_begin_.begin());
  }
  std::fill(cur_routed_.begin(), cur_routed_.end(), 0u);
  std::fill(cur_lookups_.begin(), cur_lookups_.end(), 0u);
}

void LiveStats::routed(int64_t pos, int64_t n, std::span<const int32_t> routing) {
  if (inner_) inner_->routed(pos, n, routing);
  if (LE_ == 0) return;
  // One routed() call is one forward pass: the MoE block asks the store once per layer for the distinct experts
  // its tokens chose (model/moe_ffn.cpp), so a repeat within the pass is not another lookup.
  const int64_t pass = routed_calls_++;
  for (int64_t t = 0; t < n; ++t)
    for (int64_t l = 0; l < L_; ++l)
      for (int64_t s = 0; s < K_; ++s) {
        const int32_t e = routing[static_cast<size_t>((t * L_ + l) * K_ + s)];
        if (e < 0 || e >= E_) continue;  // not a routed expert id: nothing was asked of the store
        const auto k = static_cast<size_t>(l * E_ + e);
        ++cur_routed_[k];
        if (seen_in_pass_[k] != pass) {
          seen_in_pass_[k] = pass;
          ++cur_lookups_[static_cast<size_t>(l)];
        }
      }
}

void LiveStats::end(bool prefill, int64_t n_tokens, double seconds) {
  if (inner_) inner_->end(prefill, n_tokens, seconds);
  LiveTotals d;
  d.steps = 1;
  (prefill ? d.prefill_tokens : d.decode_tokens) = n_tokens;
  (prefill ? d.prefill_ms : d.decode_ms) = seconds * 1e3;
  const std::span<const uint64_t> layer_misses =
      stream_ != nullptr ? stream_->misses_by_moe_layer() : std::span<const uint64_t>();
  if (stream_ != nullptr) {
    const moe::StreamCounters c = stream_->totals() - at_begin_;
    d.hits = c.hits;
    d.misses = c.misses;
    d.read_bytes = c.bytes_read;
    if (!prefill) d.decode_read_bytes = c.bytes_read;
    d.stall_ms = c.stall_ms;
    d.swaps = c.swaps;
  }
  // The cache's contents change on this thread only: sampled here, not read by snapshot()'s thread.
  const uint64_t resident = stream_ != nullptr ? stream_->resident_bytes() : 0;

  const std::lock_guard lock(mu_);
  const auto slot = static_cast<size_t>(next_);
  const auto L = static_cast<size_t>(L_);
  uint32_t* rr = ring_routed_.data() + slot * LE_;
  uint64_t* rh = ring_hits_.data() + slot * L;
  uint64_t* rm = ring_misses_.data() + slot * L;
  // The step leaving the ring (if it is full) comes out of the window's sums, this one goes in.
  for (size_t k = 0; k < LE_; ++k) {
    win_routed_[k] += cur_routed_[k] - rr[k];
    rr[k] = cur_routed_[k];
  }
  for (size_t l = 0; l < L; ++l) {
    const uint64_t miss = l < layer_misses.size() ? layer_misses[l] - misses_at_begin_[l] : 0;
    // Lookups are known from the routing; the store says which missed. Without routing: no lookups counted.
    const uint64_t hit = cur_lookups_[l] > miss ? cur_lookups_[l] - miss : 0;
    win_hits_[l] += hit - rh[l];
    win_misses_[l] += miss - rm[l];
    rh[l] = hit;
    rm[l] = miss;
  }
  ring_[slot] = Step{prefill, d};
  next_ = (next_ + 1) % window_;
  n_in_ring_ = std::min(n_in_ring_ + 1, window_);
  add(total_, d);
  if (prefill) {
    last_prefill_tokens_ = n_tokens;
    last_prefill_ms_ = d.prefill_ms;
  }
  last_end_ = std::chrono::steady_clock::now();
  any_step_ = true;
  cache_resident_bytes_ = resident;
}

LiveSnapshot LiveStats::snapshot() const {
  LiveSnapshot s;
  s.window = window_;
  s.streamed = stream_ != nullptr;
  s.n_moe_layers = L_;
  s.n_expert = E_;
  s.n_expert_used = K_;
  const std::lock_guard lock(mu_);
  s.total = total_;
  // Summed afresh from the ring: running sums of milliseconds would drift.
  for (int64_t i = 0; i < n_in_ring_; ++i) add(s.recent, ring_[static_cast<size_t>(i)].d);
  s.window_steps = n_in_ring_;
  s.last_prefill_tokens = last_prefill_tokens_;
  s.last_prefill_ms = last_prefill_ms_;
  if (any_step_)
    s.last_step_age_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - last_end_).count();
  if (stream_ != nullptr && stream_->cache_slots() > 0) {
    s.has_cache = true;
    s.cache_resident_bytes = cache_resident_bytes_;
    s.cache_capacity_bytes = static_cast<uint64_t>(stream_->cache_slots()) * stream_->slot_bytes();
  }
  s.mapped_expert_bytes = mapped_bytes_;
  s.routed = win_routed_;
  s.layer_hits = win_hits_;
  s.layer_misses = win_misses_;
  return s;
}

}  // namespace moetier::telemetry
