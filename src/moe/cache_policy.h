// Which routed experts stay in the RAM expert cache: pure bookkeeping over (MoE layer, expert) entries. It owns
// no weight memory and does no I/O; it only decides hits, misses, evictions and background swaps. The trace
// simulator (src/sim) and the engine's streaming expert store drive the very same objects, so what the
// simulator predicts is what the engine does.
//
// Protocol (engine and simulator alike):
//   1. For each batch — one layer's load — call access(layer, experts, phase, result) with the layer's DISTINCT
//      routed experts. Hits and misses do not depend on their order (eviction happens after the whole batch);
//      the order is the recency they end up with, most recent last: to reproduce the recording engine, where a
//      repeat inside a batch refreshes recency, pass them in order of LAST use; first-use order is fine for the
//      engine. In strict mode the misses at the end of the order are the ones not retained. Prefill is one pass over the layers, one batch per layer holding every
//      prompt token's experts (token order, then slot order, repeats dropped); decode is one batch per
//      (step, layer), layers in order.
//      The result says, per expert, hit (resident before the batch) or miss, which entries to drop
//      (`evicted`, never one of this batch's experts) and, in strict mode only, which missed experts are used
//      for this batch but not kept (`not_retained`: the batch alone does not fit in the capacity). The engine
//      frees the evicted slots first, then reads the retained misses into free slots and the not-retained ones
//      into scratch memory.
//   2. After each step (the whole prefill pass is one step, each decode token one step) call end_step(phase,
//      plan). Adaptive policies fill `plan` with background swaps: `evict` entries are gone at once (a later
//      lookup is a miss); `load` entries have a slot reserved but are NOT resident until the engine calls
//      swap_landed(key) when the read completes (the simulator calls it before the next step). If the engine
//      cannot perform a load it calls swap_cancelled(key) to release the reservation. A lookup of a key whose
//      swap is still in flight is a miss; the key then becomes resident in its reserved slot (the engine waits
//      for or redoes that read) and the later swap_landed is ignored.
//
// Capacity. Either a byte budget (capacity_bytes: an entry weighs its layer's expert_bytes; this is the
// simulator's --cache-mb and the recording engine's budget) or a slot count (capacity_entries: every entry
// weighs 1; the engine's arena of fixed-size slots). Two capacity modes:
//   - budget mode (strict = false), the recording engine's semantics: misses always become resident; after
//     the batch, victims are evicted until the capacity holds, but never an entry the batch touched, so the
//     cache may stay over capacity until a later batch can evict. Nothing is "not retained", except the misses
//     of the first prefill step after a warm start that find no free capacity (warm()).
//   - strict mode (strict = true), the engine's fixed slots: the same decisions, except that the cache never
//     exceeds its capacity; misses that cannot get a slot (all other entries are this batch's) are
//     reported in not_retained, last in first-use order first.
//
// Cliff guard. Below one token's working set (sum over layers of n_expert_used × expert_bytes[layer]), plain
// LRU over layer-ordered batches evicts each layer's experts before that layer comes round again, and the hit
// rate is exactly 0. When the guard is enabled and the capacity is below the working set, each layer keeps a
// protected quota of floor(capacity / n_moe_layers / weight(layer)) entries that batches of OTHER layers cannot
// evict (a layer's own batches still can). Quotas sum to at most the capacity, so eviction can always
// restore the budget from unprotected entries or from the batch's own layer.
//
// Thread safety: none; one owner calls everything from one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace moetier::moe {

struct ExpertKey {
  int32_t layer = 0;  // MoE ordinal (the layer-th block with routed experts), not the block index
  int32_t expert = 0;
  friend bool operator==(const ExpertKey&, const ExpertKey&) = default;
};

enum class Phase : uint8_t { prefill = 0, decode = 1 };

// Tunables of the policies; each policy reads only its own.
struct PolicyParams {
  // adaptive: LRU plus a periodic frequency-based swap pass (see policies/adaptive.h).
  int32_t adapt_every = 4;         // decode steps (rounds) between swap passes
  int32_t adapt_swaps = 96;        // at most this many swap-ins per pass, all layers together
  double adapt_decay = 0.7;        // every count is multiplied by this after each pass
  double adapt_min_count = 2.0;    // a non-resident expert needs at least this decayed count to swap in
  double adapt_margin = 1.5;       // and must beat the resident it replaces by at least this much
  // Pair candidates with the coldest residents of all layers (the VRAM tier, whose slots serve any layer), not
  // of their own layer (the RAM cache's rule).
  bool adapt_global = false;
  // lfu-decay: an access at step t weighs decay^-t, i.e. older accesses fade by this factor per step.
  double lfu_decay = 0.9;
  // static: the pinned hot list, hottest first; filled in order until the capacity is reached.
  std::vector<ExpertKey> static_hot;
  // reuse (ours, see policies/reuse.h): expected-time-to-next-use eviction.
  double reuse_decay = 0.93;          // per-step fade of the routing frequency
  double reuse_prefill_weight = 0.3;  // what one prefill batch's lookup counts, relative to a decode step's
  double reuse_p_floor = 0.02;        // lowest per-step reuse probability assumed (caps the expected time)

  // The adaptive parameters the engine switches to when it deems the run "tuned" (long decode, stable routing).
  static PolicyParams adaptive_tuned() {
    PolicyParams p;
    p.adapt_every = 2;
    p.adapt_swaps = 192;
    p.adapt_decay = 0.92;
    return p;
  }
};

struct CacheConfig {
  int32_t n_moe_layers = 0;   // layers with routed experts (ExpertKey::layer is in [0, n_moe_layers))
  int32_t n_expert = 0;       // experts per layer
  int32_t n_expert_used = 0;  // top-k per token (for the working set / cliff guard); 0 = unknown, no guard
  std::vector<uint64_t> expert_bytes;  // [n_moe_layers] one expert's bytes (gate + up + down) in each layer
  uint64_t capacity_bytes = 0;  // > 0: byte budget (entries weigh expert_bytes[layer])
  int64_t capacity_entries = 0;  // > 0: slot count (entries weigh 1); exactly one of the two must be set
  bool strict = false;           // strict capacity (engine slots) instead of the recording engine's budget rule
  bool cliff_guard = true;       // protect a per-layer quota when capacity < one token's working set
  // What a miss does: `always` becomes resident, evicting as needed (the RAM cache reads a miss into a slot
  // anyway); `free_only` becomes resident only into free capacity and never evicts (the VRAM tier computes a
  // miss where it lives: moe/slot_tier.h), so only a swap pass replaces residents.
  enum class Admission : uint8_t { always, free_only };
  Admission admission = Admission::always;
  PolicyParams params;
};

// Outcome of one access(); reused across calls so that the steady state does not allocate.
struct AccessResult {
  std::vector<uint8_t> hit;            // [experts.size()] 1 = was resident before this batch
  std::vector<int32_t> not_retained;   // strict mode: missed expert ids (this layer) used but not kept
  std::vector<ExpertKey> evicted;      // entries dropped by this batch; never one of its experts
  int32_t hits = 0;
  int32_t misses = 0;
  uint64_t miss_bytes = 0;  // bytes the misses read (expert_bytes[layer] each)
  void clear() {
    hit.clear();
    not_retained.clear();
    evicted.clear();
    hits = misses = 0;
    miss_bytes = 0;
  }
};

// Background swaps decided at the end of a step (adaptive policies only).
struct SwapPlan {
  std::vector<ExpertKey> load;   // read these in the background; resident once swap_landed()
  std::vector<ExpertKey> evict;  // already dropped from the cache when end_step returns
  void clear() {
    load.clear();
    evict.clear();
  }
};

class CachePolicy {
 public:
  // Throws moetier::Error when the config is inconsistent (names the field).
  explicit CachePolicy(CacheConfig config);
  virtual ~CachePolicy() = default;
  CachePolicy(const CachePolicy&) = delete;
  CachePolicy& operator=(const CachePolicy&) = delete;

  // One batch: `experts` are distinct ids in [0, n_expert) of `layer`, least recent first. Fills `out`.
  // Throws moetier::Error for an out-of-range layer/expert or a repeated expert.
  void access(int32_t layer, std::span<const int32_t> experts, Phase phase, AccessResult& out);
  // End of a step (prefill pass or one decode token). Clears and fills `plan` (empty for most policies).
  void end_step(Phase phase, SwapPlan& plan);
  // A background load of `key` completed: it is resident from now on. No-op if it already became resident.
  void swap_landed(ExpertKey key);
  // A background load of `key` will not happen: release its reserved capacity.
  void swap_cancelled(ExpertKey key);
  // Warm start, before the first access: makes the first entries of `hottest_first` (a heat profile's order,
  // moe/heat_profile.h) resident while they fit the capacity, as landed swaps, the coldest first so that the
  // recency policies evict the coldest first (LRU; the frequency policies start the warmed entries at no count).
  // Until the first step ends, prefill batches then admit misses into free capacity only, never evicting: a
  // first prompt (its first chunk of up to n_batch tokens) touching more experts than the cache holds (the phone's
  // 28-token Qwen3 prompt reads ~50 experts per layer) would otherwise replace the warmed set with its own before
  // the decode that the set is for. Returns the entries made resident, in (layer, expert) order (file order).
  // Throws moetier::Error for an out-of-range key, or when called after an access; repeated keys count once.
  std::vector<ExpertKey> warm(std::span<const ExpertKey> hottest_first);
  // Whether prefill batches still may not evict (see warm()).
  bool warm_hold() const { return warm_hold_; }

  bool contains(ExpertKey key) const { return state_[index(key)] == kResident; }
  bool pending(ExpertKey key) const { return state_[index(key)] == kPending; }
  uint64_t resident_bytes() const { return resident_bytes_; }     // resident + reserved (pending), bytes
  int64_t resident_entries() const { return resident_entries_; }  // resident + reserved (pending), entries
  std::vector<ExpertKey> resident_keys() const;  // e.g. what a static policy expects loaded at start
  const CacheConfig& config() const { return cfg_; }
  virtual std::string_view name() const = 0;
  // Whether end_step() may plan background swaps (the adaptive tier); telemetry reports swaps only then.
  virtual bool plans_swaps() const { return false; }

  // The cliff guard is engaged when enabled and the capacity is below one token's working set.
  bool cliff_guard_engaged() const { return guard_; }
  // Entries of `layer` that other layers' batches cannot evict (0 when the guard is not engaged).
  int32_t layer_quota(int32_t layer) const { return guard_ ? quota_[layer] : 0; }
  // One token's working set in capacity units (bytes or entries).
  uint64_t working_set() const { return working_set_; }

 protected:
  static constexpr uint8_t kAbsent = 0, kResident = 1, kPending = 2;
  int32_t index(ExpertKey k) const { return k.layer * cfg_.n_expert + k.expert; }
  ExpertKey key_of(int32_t idx) const { return {idx / cfg_.n_expert, idx % cfg_.n_expert}; }
  uint64_t weight(int32_t layer) const { return weight_[layer]; }
  uint64_t capacity() const { return capacity_; }
  // Capacity left for new entries (0 when over budget), in capacity units.
  uint64_t free_capacity() const { return used_ >= capacity_ ? 0 : capacity_ - used_; }
  int64_t step() const { return step_; }  // steps ended so far
  bool in_current_batch(int32_t idx) const { return batch_mark_[idx] == batch_id_; }
  // May `idx` be evicted now? Not if the current batch touched it or the cliff guard protects it.
  bool evictable(int32_t idx) const;
  // Entry bookkeeping for subclasses' swap passes: insert a reservation / drop an entry.
  void reserve_pending(int32_t idx);
  void drop(int32_t idx);

  // Hooks. Indices are layer * n_expert + expert. `pos` is the expert's position in the batch.
  virtual void on_hit(int32_t idx, int32_t pos, Phase phase) = 0;       // resident entry looked up
  virtual void on_insert(int32_t idx, int32_t pos, Phase phase) = 0;    // miss became resident
  virtual void on_remove(int32_t idx) = 0;                              // evicted or swapped out
  virtual void on_landed(int32_t idx) { on_insert(idx, -1, Phase::decode); }  // a swap-in became resident
  virtual void on_batch_begin(int32_t /*layer*/, std::span<const int32_t> /*experts*/, Phase) {}
  // Admission: a missed expert that returns false is used but never becomes resident (static, admission control).
  virtual bool admit(int32_t /*idx*/, Phase) { return true; }
  // The entry to evict next among evictable() ones, or -1 when there is none.
  virtual int32_t pick_victim() = 0;
  // End-of-step work (swap planning). Default: nothing.
  virtual void on_end_step(Phase /*phase*/, SwapPlan& /*plan*/) {}

 private:
  void evict_until_fits(int32_t layer, AccessResult& out);
  void make_resident(int32_t idx);
  void next_batch();

  CacheConfig cfg_;
  std::vector<uint64_t> weight_;    // [n_moe_layers] capacity units per entry
  uint64_t capacity_ = 0;           // capacity units
  uint64_t used_ = 0;               // capacity units held by resident + pending entries
  uint64_t resident_bytes_ = 0;
  int64_t resident_entries_ = 0;
  uint64_t working_set_ = 0;
  bool guard_ = false;
  std::vector<int32_t> quota_;       // [n_moe_layers] protected entries when the guard is engaged
  std::vector<int32_t> layer_count_;  // [n_moe_layers] resident + pending entries per layer
  std::vector<uint8_t> state_;       // [n_moe_layers * n_expert] kAbsent / kResident / kPending
  std::vector<uint32_t> batch_mark_;  // [n_moe_layers * n_expert] id of the last batch that touched the entry
  uint32_t batch_id_ = 0;
  std::vector<int32_t> batch_misses_;  // indices admitted by the current batch, in batch order
  int32_t batch_layer_ = -1;
  int64_t step_ = 0;
  bool accessed_ = false;   // an access() has happened (warm() comes before)
  bool warm_hold_ = false;  // warmed, and no step has ended yet: prefill admits into free capacity only
};

// Online policies by name: "lru" (default), "lfu", "lfu-decay", "adaptive", "adaptive-tuned" (adaptive with
// PolicyParams::adaptive_tuned() applied over config.params), "static", "reuse" (ours). Throws
// moetier::Error naming the policy and listing the valid names. Bélády needs the future and lives in src/sim.
std::unique_ptr<CachePolicy> make_policy(std::string_view name, CacheConfig config);
// The names make_policy accepts, for help texts and error messages.
std::span<const std::string_view> policy_names();

}  // namespace moetier::moe
