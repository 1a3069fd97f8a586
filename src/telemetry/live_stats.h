// Live telemetry for a long-running engine (`moetier serve`): the step hooks the server puts in front of the
// engine's, keeping cumulative totals and a window of the most recent steps for the monitor page and /metrics.
// Every buffer (the window's ring, the per-layer and per-expert counts) is allocated in the constructor; the hooks
// allocate nothing. The hooks run on the engine's thread; snapshot() may be called from any thread (a mutex).
//
// A step is what model::Generator calls the hooks around: a prefill (a whole prompt, in one or more chunks) or one
// decode token. The expert store's counters of a step are the difference of StreamingExperts::totals() between
// begin() and end() (read after the inner hooks closed the store's step), exactly as telemetry::RunRecorder reads
// them, so the totals here equal the recorder's rows summed.
//
// The heat map needs the routing: the generator must record it (Generator::record_routing). Without routed()
// calls the routed counts and the per-layer hits stay 0 (the per-layer misses are still the store's).
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

#include "gguf/gguf.h"
#include "model/generator.h"
#include "model/model.h"
#include "moe/streaming_experts.h"

namespace moetier::telemetry {

struct LiveTotals {
  int64_t steps = 0;                      // steps (prefills and decode tokens)
  int64_t prefill_tokens = 0, decode_tokens = 0;
  double prefill_ms = 0, decode_ms = 0;  // wall time of the steps, milliseconds
  // Expert cache lookups: 0 and 0 with resident experts; with streamed experts and no cache (cache 0) every
  // lookup is a miss (the store's counters, as the metrics CSV has them).
  uint64_t hits = 0, misses = 0;
  uint64_t read_bytes = 0;                // bytes the expert store read (page-aligned windows)
  uint64_t decode_read_bytes = 0;         // the part of read_bytes read during decode steps
  double stall_ms = 0;                    // compute thread waiting for expert reads, milliseconds
  uint64_t swaps = 0;                     // adaptive tier swap-ins that landed (0 without an adaptive tier)
};

struct LiveSnapshot {
  LiveTotals total;   // since the start
  LiveTotals recent;  // over the last `window` steps
  int64_t window = 0;        // the window's size in steps (the constructor's `window`)
  int64_t window_steps = 0;  // steps in `recent` (<= window)
  bool has_cache = false;     // experts stream through the RAM cache (hit rates mean something)
  bool streamed = false;      // experts are streamed from the file (false: resident in the mapping)
  // The most recent prefill step (the window may hold none): its tokens and wall time, ms; 0 and 0 before any.
  int64_t last_prefill_tokens = 0;
  double last_prefill_ms = 0;
  double last_step_age_s = -1;  // seconds since the latest step ended; -1 before any
  // Tiers: bytes each holds now. Resident experts: all in `mapped_expert_bytes` (the file mapping).
  uint64_t cache_resident_bytes = 0;  // expert bytes in the RAM cache's slots (after the latest step)
  uint64_t cache_capacity_bytes = 0;  // the cache's slots, all of them (cache_slots x slot_bytes)
  uint64_t mapped_expert_bytes = 0;   // experts read through the mapping (resident placement; set_mapped_expert_bytes)
  // Heat map over the recent window, by MoE ordinal: routed[m * n_expert + e] = times expert e of MoE layer m was
  // chosen (token x top-k slot); layer_hits[m] / layer_misses[m] = expert lookups of layer m that hit / missed.
  // A lookup is one distinct expert per forward pass (a prefill chunk asks for each chosen expert once), so
  // hits + misses <= routed summed over the layer. Misses come from StreamingExperts::misses_by_moe_layer();
  // resident experts have no cache: every lookup counts as a hit, misses 0 (total.hits stays 0 there).
  int64_t n_moe_layers = 0, n_expert = 0, n_expert_used = 0;
  std::vector<uint32_t> routed;                  // [n_moe_layers * n_expert]
  std::vector<uint64_t> layer_hits, layer_misses;  // [n_moe_layers]
};

// Bytes of the routed experts' tensors (every blk.N.ffn_*_exps.*) of a model file: what the mapping holds when
// experts are resident (LiveStats::set_mapped_expert_bytes).
uint64_t routed_expert_bytes(const gguf::GgufModel& file);

class LiveStats final : public model::StepHooks {
 public:
  // `inner`: the engine's hooks (may be null), called before this records in begin() and in end() (so the
  // store's step is closed when its counters are read) and passed routed(). `stream` null when experts are
  // resident. `window`: how many recent steps `recent` and the heat map cover (>= 1; throws moetier::Error
  // otherwise). `info`: the model's MoE shape (n_moe_layers, n_expert, n_expert_used) sizes the buffers.
  LiveStats(model::StepHooks* inner, const moe::StreamingExperts* stream, const model::ModelInfo& info,
            int64_t window = 64);

  void begin(bool prefill) override;
  void end(bool prefill, int64_t n_tokens, double seconds) override;
  void routed(int64_t pos, int64_t n, std::span<const int32_t> routing) override;

  // The bytes of the resident experts' mapping, reported as the "mapped" tier (routed_expert_bytes(file)).
  void set_mapped_expert_bytes(uint64_t bytes);

  LiveSnapshot snapshot() const;

 private:
  // One step's record in the ring ([window]). Its routing and per-layer lookups live in the rows of the ring
  // buffers below with the same index; the window's sums add a step when it ends and subtract it when it leaves.
  struct Step {
    bool prefill = false;
    LiveTotals d;
  };
  model::StepHooks* inner_;
  const moe::StreamingExperts* stream_;
  int64_t window_;
  int64_t L_ = 0, E_ = 0, K_ = 0;  // MoE layers, experts per layer, experts per token
  size_t LE_ = 0;                  // L_ * E_

  // Engine thread only (no lock): the step in progress.
  moe::StreamCounters at_begin_;
  std::vector<uint64_t> misses_at_begin_;  // [L] misses_by_moe_layer() at begin()
  std::vector<uint32_t> cur_routed_;       // [L * E] this step's routed counts
  std::vector<uint64_t> cur_lookups_;      // [L] this step's distinct experts per pass, summed
  std::vector<int64_t> seen_in_pass_;      // [L * E] the routed() call that last counted the key as a lookup
  int64_t routed_calls_ = 0;

  // Shared with snapshot(), under mu_.
  mutable std::mutex mu_;
  std::vector<Step> ring_;                // [window]
  std::vector<uint32_t> ring_routed_;     // [window * L * E]
  std::vector<uint64_t> ring_hits_;       // [window * L]
  std::vector<uint64_t> ring_misses_;     // [window * L]
  int64_t next_ = 0;                      // ring slot the next step goes to
  int64_t n_in_ring_ = 0;
  std::vector<uint32_t> win_routed_;      // [L * E] sum over the ring
  std::vector<uint64_t> win_hits_, win_misses_;  // [L] sums over the ring
  LiveTotals total_;
  int64_t last_prefill_tokens_ = 0;
  double last_prefill_ms_ = 0;
  std::chrono::steady_clock::time_point last_end_{};
  bool any_step_ = false;
  uint64_t mapped_bytes_ = 0;
  uint64_t cache_resident_bytes_ = 0;  // StreamingExperts::resident_bytes() after the latest step
};

}  // namespace moetier::telemetry
