// ExpertSource that keeps routed experts in the model file(s) and reads them on demand into a RAM cache of
// fixed slots, with the cache's contents decided by a CachePolicy (cache_policy.h).
//
//   gguf::GgufModel file = gguf::GgufModel::open(path);
//   auto src = std::make_unique<moe::StreamingExperts>(file, moe::StreamingOptions{.cache_bytes = 4096ull << 20});
//   moe::StreamingExperts* stream = src.get();           // for counters and phase
//   auto model = model::load_model(file, opts, std::move(src));
//   stream->set_phase(moe::Phase::prefill); model->forward(prompt...); auto c = stream->end_step();
//   stream->set_phase(moe::Phase::decode);  model->forward(next...);   c = stream->end_step();  // per token
//
// fetch(layer, experts), `layer` a MoE ordinal (expert_source.h), in two halves. Planning asks the policy which
// experts hit, frees evicted slots and decides where each miss goes (retained misses into free cache slots, the
// others into working slots, which are recycled as their experts are delivered, so a prefill batch touching every
// expert of a layer needs only a few). Delivery submits the reads of every miss to the read lanes at once; then,
// with overlap on, delivers the hits (one batch) while the reads run and each missing expert as soon as its last
// slice lands (with any others that landed meanwhile, in one batch); with overlap off, waits for every read in
// flight before delivering (in rounds when the working slots are fewer than the non-retained misses). The bytes
// delivered are the file's bytes (or, packed, their rows16 repack, whose kernels give the same results), so results
// are bit-identical to the resident source.
//
// Errors: a failed or short read (including a file truncated while in use) throws moetier::Error naming the file
// and offset from fetch(), on the calling thread, after every read in flight has been collected; no expert whose
// read failed is ever delivered (experts delivered before the failure was seen hold the file's bytes, but the
// forward pass ends with the exception). The store is unusable afterwards: later fetches rethrow the same error.
// A model file written in place, resized or replaced while in use (ModelFiles::check_unchanged, once per forward
// pass at the last layer's fetch) fails the same way, naming the file.
// Adaptive tier: end_step() executes the policy's SwapPlan. Its evictions free their slots at once; each load gets
// its reserved slot and joins the FIFO of background swaps (swap_queue.h), read on idle lanes and never ahead of a
// fetch's own reads: swaps are issued only when no fetch read is outstanding (at the end of end_step() and of each
// fetch), and at most max(lanes, one expert's slices) swap slices are in flight, so a fetch's misses wait behind at
// most one read per lane, never behind the queue. Completed swaps are collected without blocking at the start of
// each fetch and at end_step() (and whenever a fetch waits for its own reads); swap_landed() then makes them
// resident.
// A fetch that needs a swap still queued takes it over as its own miss (into the reserved slot); one whose read
// is in flight waits for that read. Both count as misses, as the policy protocol says (cache_policy.h).
// Next-layer prefetch (ahead_slots > 0): prefetch(layer, guess) reads the guessed experts that are neither held nor
// reserved for a swap into slots of their own (the ahead slots), on the lanes the fetch before left idle: a slice
// is submitted only while fewer reads than lanes are outstanding, so a wrong guess delays the next fetch's own reads
// by at most one read per lane; a guess whose read had not started when its fetch comes is read as a plain miss.
// The layer's next fetch looks its experts up as always (a guessed expert is still a miss: the hit rate is the
// cache's), then takes over each read ahead that it asks for, landed or still in flight: an expert the cache keeps
// stays in the slot it was read into, which becomes its cache slot (the cache slot assigned to it becomes an ahead
// slot: no copy), one it does not keep is delivered from the ahead slot like a working slot. Guesses that fetch
// does not ask for are dropped (a read in flight lands unused), as are all guesses at end_step(). A failed read
// ahead poisons the store as a fetch's own does.
// Repacking in the slots (pack_rows16): an expert in a cache slot (a retained miss or a swap) that a fetch hits, so
// one that is used again, waits in a FIFO to be rewritten in place into the rows16 layout (ExpertStore::pack_rows16),
// whose kernels give the same bits faster; one evicted before its first hit is never packed, and the experts of a
// warm start (the hottest) are packed before it returns. The compute thread packs only when it would otherwise
// block, and only in prefill: while a prefill fetch waits for its reads and none has landed, it packs a step of
// ~256 KiB of the first waiting expert (~40 us), then looks again, so a read that lands meanwhile waits at most one
// step. Not in decode, whose waits are short (one or two reads a layer): on a 2-vCPU Zen 4 host, Qwen3-30B-A3B
// streamed with 83% hits, packing in them too cut decode's stall by ~20% but not its steps (decode 8.5 -> 8.3 tok/s,
// medians of 7), while prefill with the warm start's experts packed ran 8-9% faster (the token tiles gain from the
// layout) and decode did not change.
// Hits are delivered in whichever layout their slot holds (the results are the same either way); a hit on the
// expert under way finishes its packing first (in any phase: at most one expert), and an eviction abandons it.
// Experts in working or ahead slots, read for one use, stay as read.
// Memory: everything (slots, queues, bookkeeping) is allocated by the constructor; fetch() and end_step()
// allocate nothing. Thread-safety: one thread (the forward pass) calls everything.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf.h"
#include "moe/cache_policy.h"
#include "moe/expert_source.h"
#include "moe/expert_store.h"
#include "moe/heat_profile.h"
#include "moe/io/model_files.h"
#include "moe/io/read_engine.h"
#include "moe/slot_arena.h"
#include "moe/stream_counters.h"
#include "moe/swap_queue.h"

namespace moetier::moe {

struct StreamingOptions {
  uint64_t cache_bytes = 0;  // RAM cache budget, bytes; 0 = no cache (every use reads); see auto_cache_bytes()
  std::string policy = "lru";  // make_policy() name
  PolicyParams policy_params;
  int lanes = 4;               // reads in flight at once
  io::EngineKind engine = io::kDefaultEngine;
  bool overlap = true;         // deliver experts as their reads land (false: after the whole round)
  bool direct = true;          // O_DIRECT reads (false = no_odirect: buffered pread)
  int working_slots = 0;       // slots for experts not retained; 0 = max(4, 2 * lanes)
  int ahead_slots = 0;         // slots for experts read ahead on a prefetch() guess; 0: prefetch() does nothing
  // Top-k in force (an --n-expert-used override or a route replay's); 0: the file's expert_used_count. The
  // policy's cliff guard compares the cache with one token's working set of this many experts per layer.
  int64_t n_expert_used = 0;
  // Repack the experts that land in cache slots into the rows16 layout, where the CPU has its kernels (see above).
  // Only where every product of the experts runs on the CPU's integer kernels (no -ngl, activations rounded as
  // ggml's): the engine decides.
  bool pack_rows16 = false;
  // Bytes one step of packing rewrites (see above; at least one group of 16 rows whatever it says; 0 is refused).
  size_t pack_step_bytes = size_t{256} << 10;
  // Test hook: with pack_rows16, instead of while reads are awaited (whose timing is the machine's), take up to this
  // many steps of packing at the end of each fetch (-1: until none waits, so that every hit after an expert's first
  // hit is delivered repacked; a few: the queue outlives evictions and swaps, and experts stay half packed across
  // fetches). 0: as the engine runs.
  int pack_at_fetch_end = 0;
  int64_t fail_read = -1;      // test hook: the read with this 0-based number fails with EIO
  std::function<void(std::string_view)> log;  // one line per notable event (I/O fallbacks); may be empty
};

class StreamingExperts final : public ExpertSource {
 public:
  // Opens the model's shard files for reading, allocates the slot arena (cache_bytes / slot_bytes() cache slots
  // plus the working slots) and the policy. `model` must outlive this object. Throws moetier::Error on a model
  // without routed experts, unreadable files, an unknown policy, an n_expert_used outside 0..n_expert or an
  // allocation failure.
  StreamingExperts(const gguf::GgufModel& model, const StreamingOptions& opts);
  ~StreamingExperts() override;

  const ExpertShape& shape() const override { return store_.shape(); }
  void fetch(int64_t layer, std::span<const int32_t> experts, ExpertConsumer& consumer) override;
  void prefetch(int64_t layer, std::span<const int32_t> experts) override;
  bool reads_ahead() const override { return arena_.n_ahead() > 0; }

  // Warm start, before the first fetch: the policy makes the first experts of `hottest_first` resident while they
  // fit the cache (CachePolicy::warm) and this reads them into their slots, every slice in file order (ascending
  // shard and offset) with every lane busy, returning when all have landed. Not counted in totals(): the run's
  // steps read what the warm start did not. Throws moetier::Error when called after a fetch, or naming the file and
  // offset for a failed read (the store is then unusable). Without a cache (cache_bytes 0) it reads nothing.
  // "Before the first fetch" includes prefetch().
  struct WarmStart {
    int64_t experts = 0;
    uint64_t bytes = 0;
    double seconds = 0.0;       // reads and packing
    int64_t packed = 0;         // experts repacked in their slots (pack_rows16)
    double pack_seconds = 0.0;  // of `seconds`, the packing
  };
  WarmStart warm(std::span<const ExpertKey> hottest_first);
  // The decayed decode routing counts of this run (heat_profile.h), for saving; seed_heat() starts them from a
  // profile read at start (throws moetier::Error when it is another model's).
  const HeatProfile& heat() const { return heat_; }
  void seed_heat(const HeatProfile& older) { heat_.seed(older); }

  // Phase given to the policy for the following fetches (default prefill).
  void set_phase(Phase p) { phase_ = p; }
  // Ends a step (the prefill pass or one decode token): lets the policy plan swaps and returns the counters
  // accumulated since the previous end_step().
  StreamCounters end_step();
  const StreamCounters& totals() const { return totals_; }  // since construction, including the current step
  // Misses per MoE layer (by MoE ordinal) since construction [n_moe_layers] (every requested expert when there
  // is no cache).
  std::span<const uint64_t> misses_by_moe_layer() const { return moe_layer_misses_; }
  // Whether the latest fetch that asked for (layer, expert) found it in the cache: the policy's verdict, as
  // counted in totals().hits (a lookup of a swap still in flight is a miss). False before the key's first lookup
  // and always without a cache. What the route trace records as a row's residency.
  bool hit_at_last_fetch(int64_t layer, int32_t expert) const { return last_hit_[key(layer, expert)] != 0; }
  // Background swap-ins queued or in flight now.
  size_t swaps_pending() const { return swaps_.n_queued() + n_swap_jobs_; }

  uint64_t slot_bytes() const { return arena_.slot_bytes(); }  // one slot, bytes
  int64_t cache_slots() const { return arena_.n_cache(); }
  int64_t working_slots() const { return arena_.n_working(); }
  int64_t ahead_slots() const { return arena_.n_ahead(); }
  uint64_t arena_bytes() const { return arena_.bytes(); }  // all slots, bytes
  uint64_t resident_bytes() const;  // expert bytes now held by the cache
  const ExpertStore& store() const { return store_; }
  const io::ModelFiles& files() const { return files_; }
  const io::ReadEngine& engine() const { return *engine_; }
  const CachePolicy* policy() const { return policy_.get(); }
  // "N lanes, io_uring, direct I/O, cache C slots of S MiB (P MiB), W working slots[, A ahead slots]", for the
  // start log.
  std::string describe() const;
  // Whether experts landing in cache slots are repacked (pack_rows16 asked, and a slice of some layer packs).
  bool packs() const { return packing_; }

 private:
  struct Job {
    int32_t expert = 0;
    uint8_t* slot = nullptr;
    int32_t working = -1;  // working slot index, or -1 for a cache slot
    int remaining = 0;     // slices still in flight
    int32_t ahead = -1;    // the read ahead (ahead_) it took over, or -1
    bool retained = false;  // into the expert's cache slot (it stays there after delivery)
  };
  // An expert whose background swap landed while this fetch waited for it, used once and not kept.
  struct Once {
    int32_t expert = 0;
    int32_t slot = -1;  // cache slot holding it, already back on the free list
    quant::WeightLayout layout = quant::WeightLayout::gguf;  // as the slot holds it
  };
  // fetch() in two halves. Planning: hits, misses, slots and the policy's books; no read, no delivery.
  void plan_fetch(int64_t layer, std::span<const int32_t> experts);
  double take_in_flight_swaps(int64_t layer, std::span<const int32_t> experts);  // returns the wait, ms
  // Delivery: the plan's reads and every expert's delivery; throws, after collecting the reads, on a failed one.
  void deliver_fetch(int64_t layer, ExpertConsumer& consumer);
  void issue_reads(int64_t layer);                           // retained misses, then waiting ones
  void deliver_hits(int64_t layer, ExpertConsumer& consumer);  // one batch
  void on_read(int64_t layer, const io::ReadDone& d);         // one landed slice (of this fetch or a swap)
  void deliver_ready(int64_t layer, ExpertConsumer& consumer);  // landed jobs, one batch; recycles working slots
  void start_job(int64_t layer, int32_t expert, uint8_t* slot, int32_t working);
  void start_waiting(int64_t layer);  // starts queued non-retained misses while working slots are free
  void finish_job(int64_t layer, Job& job);  // recycles its working slot
  void drain() noexcept;                       // collects every read in flight, discarding results
  // Background swaps (adaptive tier).
  struct SwapJob {
    int32_t key = -1;   // layer * n_expert + expert, or -1 when the job is free
    int remaining = 0;  // slices still in flight
  };
  void reap_background();                     // collects completed swap reads and reads ahead without blocking
  void on_background_read(const io::ReadDone& d);  // a swap's or a read ahead's slice (no fetch read outstanding)
  void on_swap_read(const io::ReadDone& d);   // one swap slice completed
  void issue_swaps();                         // starts queued swaps on idle lanes (no fetch read outstanding)
  void wait_swap(size_t k);                   // blocks until the in-flight swap of key k has landed
  void free_slot(size_t k);                   // returns key k's cache slot to the free list
  // Repacking in the slots. What a key's cache slot holds: nothing landed yet (or no slot), the file's bytes, part
  // of its matrices repacked (the expert being packed, packing_key_), or the rows16 repack of them.
  enum class Form : uint8_t { none, gguf, packing, rows16 };
  void queue_pack(size_t k);  // a hit on key k held as read (Form::gguf): it waits for packing
  // One step of packing (about pack_step_bytes), starting the first waiting expert still held as read when none is
  // being packed; false when there was nothing to do.
  bool pack_step();
  void finish_packing(size_t k);  // a key being packed (Form::packing), packed to its end now
  // The layout to view key k's cache slot in, finishing its packing first when it is under way.
  quant::WeightLayout settled_layout(size_t k) {
    if (form_[k] == Form::packing) finish_packing(k);
    return form_[k] == Form::rows16 ? quant::WeightLayout::rows16 : quant::WeightLayout::gguf;
  }
  size_t key(int64_t layer, int32_t e) const { return static_cast<size_t>(layer * store_.shape().n_expert + e); }

  const gguf::GgufModel& model_;
  StreamingOptions opts_;
  ExpertStore store_;
  io::ModelFiles files_;
  std::unique_ptr<io::ReadEngine> engine_;
  SlotArena arena_;
  std::unique_ptr<CachePolicy> policy_;  // null when there are no cache slots
  Phase phase_ = Phase::prefill;

  // Bookkeeping, all sized at construction.
  AccessResult access_;
  SwapPlan plan_;
  std::vector<int32_t> slot_of_;      // [n_moe_layers * n_expert] cache slot of a resident entry, or -1
  std::vector<int32_t> free_slots_;   // stack of free cache slots
  std::vector<uint8_t> read_before_;  // [n_moe_layers * n_expert] 1 once an expert has been read
  std::vector<uint8_t> last_hit_;     // [n_moe_layers * n_expert] 1 when the key's latest lookup hit
  std::vector<Job> jobs_;             // [n_expert] reads of the current fetch
  // The plan of the current fetch (plan_fetch fills it, deliver_fetch carries it out).
  std::vector<int32_t> hits_;         // [n_expert] experts found in the cache, request order
  std::vector<int32_t> retained_;     // [n_expert] misses the policy keeps, read into their cache slot (slot_of_)
  std::vector<Once> once_;            // [n_expert] taken-over swaps not kept, delivered before any read starts
  size_t n_hits_ = 0, n_retained_ = 0, n_once_ = 0;
  std::vector<ExpertWeights> batch_;  // [n_expert] views delivered together (the hits; a round of reads)
  std::vector<int32_t> batch_ids_;    // [n_expert] their expert ids
  std::vector<int32_t> waiting_;      // [n_expert] non-retained misses waiting for a working slot (FIFO)
  size_t waiting_head_ = 0, waiting_n_ = 0;
  std::vector<int32_t> free_working_;  // stack of free working slots
  std::vector<int32_t> ready_;         // [n_expert] jobs read and not yet delivered
  size_t n_jobs_ = 0, n_ready_ = 0;

  size_t fg_outstanding_ = 0;          // slices of the current fetch's own reads in flight
  std::vector<uint64_t> moe_layer_misses_;  // [n_moe_layers]

  SwapQueue swaps_;                     // a queued or in-flight key holds its reserved slot_of_
  std::vector<SwapJob> swap_jobs_;      // [max swap jobs in flight]
  size_t n_swap_jobs_ = 0;              // jobs in flight
  size_t swap_slices_ = 0;              // swap slices in flight
  size_t swap_slice_limit_ = 0;         // max(lanes, most slices of one expert)

  // Next-layer prefetch. An ahead entry is free when it holds no live guess, no fetch has taken it over and no
  // slice of it is in flight.
  struct Ahead {
    int32_t key = -1;        // layer * n_expert + expert of its latest read
    int32_t slot = -1;       // the arena slot it owns (traded for the cache slot of an expert the cache keeps)
    uint8_t* dst = nullptr;  // the slot its latest read goes to (still the read's after a trade)
    int next_slice = 0;      // slices submitted so far
    int n_slices = 0;        // slices to submit in all (cut to next_slice when the guess is dropped)
    int in_flight = 0;       // slices submitted and not yet landed
    int32_t job = -1;        // the current fetch's job (jobs_) that took it over, or -1
    bool live = false;       // a guess of the latest prefetch() not yet dropped
  };
  bool ahead_free(const Ahead& a) const { return !a.live && a.job < 0 && a.in_flight == 0; }
  void take_ahead(int64_t layer, int32_t expert, size_t i, bool retained);  // the fetch takes over ahead_[i]
  void submit_ahead(size_t i, int max_slices);  // submits up to max_slices more slices of ahead_[i]'s read
  void issue_ahead();                           // live guesses' slices while a lane is idle
  void on_ahead_read(const io::ReadDone& d);    // one slice read ahead completed
  void drop_guesses();                          // every live guess not taken over becomes dead, unread slices too
  std::vector<Ahead> ahead_;            // [ahead slots]
  std::vector<int32_t> guess_;          // [n_expert] the latest prefetch()'s experts, for ahead_right
  size_t n_guess_ = 0;
  int64_t guess_layer_ = -1;            // the MoE layer they are for; -1: none
  size_t ahead_slices_ = 0;             // slices read ahead in flight (counted with the swaps' against the lanes)

  HeatProfile heat_;                    // decode routing counts, for the next run's warm start

  bool packing_ = false;                // pack_rows16 asked and some slice packs
  std::vector<Form> form_;              // [n_moe_layers * n_expert] what the key's cache slot holds
  std::vector<int32_t> pack_queue_;     // [n_moe_layers * n_expert] ring of keys waiting to be packed
  std::vector<uint8_t> pack_queued_;    // [n_moe_layers * n_expert] 1 while the key is in the ring
  size_t pack_head_ = 0, pack_n_ = 0;
  std::vector<uint8_t> pack_scratch_;   // [ExpertStore::pack_scratch_bytes()] one group of 16 rows
  int64_t packing_key_ = -1;            // the expert being packed (Form::packing), or -1
  int pack_slice_ = 0;                  // its next slice to pack
  int64_t pack_group_ = 0;              // that slice's next group
  bool fetched_ = false;                // a fetch has happened (warm() must come before)

  StreamCounters totals_;
  StreamCounters at_step_start_;
  std::string error_;  // non-empty once a read failed: the store is poisoned
};

}  // namespace moetier::moe
