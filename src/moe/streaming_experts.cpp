#include "moe/streaming_experts.h"

#include <algorithm>
#include <cassert>
#include <chrono>

#include <fmt/format.h>

#include "util/error.h"

namespace moetier::moe {

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

std::vector<std::filesystem::path> shard_paths(const gguf::GgufModel& m) {
  std::vector<std::filesystem::path> p;
  for (const auto& s : m.shards()) p.push_back(s.path);
  return p;
}

constexpr int kTagShift = 3;  // tag = job << kTagShift | slice; ExpertStore::kMaxSlices <= 8
static_assert(ExpertStore::kMaxSlices <= (1 << kTagShift));
constexpr uint64_t kSwapTag = uint64_t{1} << 62;  // set on background swap reads; the job is a SwapJob index
constexpr uint64_t kSliceMask = (uint64_t{1} << kTagShift) - 1;
constexpr uint64_t kWarmTag = uint64_t{1} << 61;  // set on warm-start reads; the rest is the slice's index
constexpr uint64_t kAheadTag = uint64_t{1} << 60;  // set on reads ahead; the job is an Ahead index

HeatModel heat_model(const gguf::GgufModel& m, const ExpertShape& sh) {
  HeatModel h;
  h.model = m.shards().front().path.filename().string();
  h.arch = m.architecture();
  for (const auto& s : m.shards()) h.file_bytes += s.file_size;
  h.n_moe_layers = static_cast<int32_t>(sh.n_moe_layers);
  h.n_expert = static_cast<int32_t>(sh.n_expert);
  return h;
}

}  // namespace

StreamingExperts::StreamingExperts(const gguf::GgufModel& model, const StreamingOptions& opts)
    : model_(model), opts_(opts), store_(model), files_(shard_paths(model), io::FileOptions{opts.direct, opts.log}) {
  const ExpertShape& sh = store_.shape();
  const auto E = static_cast<size_t>(sh.n_expert);
  const size_t n_keys = static_cast<size_t>(sh.n_moe_layers) * E;
  if (opts.lanes < 1) fail("read lanes must be at least 1, got {}", opts.lanes);
  if (opts.working_slots < 0) fail("working slots must be at least 1, got {}", opts.working_slots);
  if (opts.ahead_slots < 0) fail("ahead slots must be at least 0, got {}", opts.ahead_slots);
  if (opts.pack_step_bytes == 0) fail("a step of packing in the slots must be at least 1 byte, got 0");
  if (opts.n_expert_used < 0 || opts.n_expert_used > sh.n_expert) {
    fail("{}: n_expert_used {} is out of range, expected 0..{} (0: the file's expert_used_count)",
         model.path().string(), opts.n_expert_used, sh.n_expert);
  }
  const int n_working = opts.working_slots > 0 ? opts.working_slots : std::max(4, 2 * opts.lanes);
  const int64_t n_cache = std::min<int64_t>(static_cast<int64_t>(opts.cache_bytes / store_.slot_bytes()),
                                            static_cast<int64_t>(n_keys));

  std::string note;
  io::EngineOptions eo{opts.engine, opts.lanes, opts.fail_read};
  // Outstanding reads: a fetch's (at most every expert of a layer), the background swaps' (swap_slice_limit_) and
  // the reads ahead (each ahead slot's).
  swap_slice_limit_ = static_cast<size_t>(std::max(opts.lanes, ExpertStore::kMaxSlices));
  const auto n_ahead = static_cast<size_t>(opts.ahead_slots);
  engine_ = io::make_read_engine(files_, eo, (E + n_ahead) * ExpertStore::kMaxSlices + swap_slice_limit_, &note);
  if (!note.empty() && opts.log) opts.log(note);
  arena_ = SlotArena(store_.slot_bytes(), n_cache, n_working, opts.ahead_slots);

  if (n_cache > 0) {
    CacheConfig cc;
    cc.n_moe_layers = static_cast<int32_t>(sh.n_moe_layers);
    cc.n_expert = static_cast<int32_t>(sh.n_expert);
    const std::string arch = model.architecture();
    const int64_t file_k = static_cast<int64_t>(model.metadata().get_uint_or(arch + ".expert_used_count", 0));
    cc.n_expert_used = static_cast<int32_t>(opts.n_expert_used > 0 ? opts.n_expert_used : file_k);
    for (int64_t l = 0; l < sh.n_moe_layers; ++l) cc.expert_bytes.push_back(store_.expert_bytes(l));
    cc.capacity_entries = n_cache;
    cc.strict = true;
    cc.params = opts.policy_params;
    policy_ = make_policy(opts.policy, std::move(cc));
  }

  access_.hit.reserve(E);
  access_.not_retained.reserve(E);
  access_.evicted.reserve(n_keys);
  slot_of_.assign(n_keys, -1);
  free_slots_.reserve(static_cast<size_t>(n_cache));
  for (int64_t s = n_cache; s-- > 0;) free_slots_.push_back(static_cast<int32_t>(s));
  read_before_.assign(n_keys, 0);
  last_hit_.assign(n_keys, 0);
  jobs_.resize(E);
  hits_.resize(E);
  retained_.resize(E);
  once_.resize(E);
  batch_.resize(E);
  batch_ids_.resize(E);
  waiting_.resize(E);
  ready_.resize(E);
  free_working_.reserve(static_cast<size_t>(n_working));
  for (int w = n_working; w-- > 0;) free_working_.push_back(w);
  moe_layer_misses_.assign(static_cast<size_t>(sh.n_moe_layers), 0);
  swaps_ = SwapQueue(n_keys, static_cast<size_t>(n_cache));
  swap_jobs_.resize(static_cast<size_t>(opts.lanes));  // every job in flight holds at least one slice (lane)
  ahead_.resize(n_ahead);
  for (size_t i = 0; i < n_ahead; ++i) ahead_[i].slot = static_cast<int32_t>(n_cache + n_working + i);
  guess_.resize(E);
  plan_.load.reserve(static_cast<size_t>(n_cache));
  plan_.evict.reserve(static_cast<size_t>(n_cache));
  heat_ = HeatProfile(heat_model(model, sh));
  form_.assign(n_keys, Form::none);
  packing_ = opts.pack_rows16 && n_cache > 0 && store_.packing_slices() > 0;
  if (packing_) {
    pack_queue_.resize(n_keys);
    pack_queued_.assign(n_keys, 0);
    pack_scratch_.resize(store_.pack_scratch_bytes());
  }
}

StreamingExperts::~StreamingExperts() { drain(); }

void StreamingExperts::drain() noexcept {
  try {
    while (engine_ && engine_->outstanding() > 0) engine_->wait();
  } catch (...) {
    // The engine itself failed (not a read): nothing more can be collected; its destructor reaps what it can.
  }
}

void StreamingExperts::start_job(int64_t layer, int32_t expert, uint8_t* slot, int32_t working) {
  const size_t j = n_jobs_++;
  Job& job = jobs_[j];
  job.expert = expert;
  job.slot = slot;
  job.working = working;
  job.ahead = -1;
  job.retained = working < 0;
  job.remaining = store_.n_slices(layer);
  fg_outstanding_ += static_cast<size_t>(job.remaining);
  const size_t k = key(layer, expert);
  if (read_before_[k] != 0) totals_.reread_bytes += store_.expert_bytes(layer);
  read_before_[k] = 1;
  for (int s = 0; s < job.remaining; ++s) {
    const SliceRead r = store_.slice_read(layer, expert, s);
    engine_->submit(io::ReadOp{r.shard, r.file_offset, r.length, slot + r.region,
                               (static_cast<uint64_t>(j) << kTagShift) | static_cast<uint64_t>(s)});
  }
}

void StreamingExperts::start_waiting(int64_t layer) {
  while (waiting_n_ > 0 && !free_working_.empty()) {
    const int32_t w = free_working_.back();
    free_working_.pop_back();
    const int32_t e = waiting_[waiting_head_++];
    --waiting_n_;
    start_job(layer, e, arena_.working(w), w);
  }
}

void StreamingExperts::finish_job(int64_t layer, Job& job) {
  if (job.ahead >= 0) {
    ahead_[static_cast<size_t>(job.ahead)].job = -1;
    job.ahead = -1;
  }
  if (job.working >= 0) {
    free_working_.push_back(job.working);
    job.working = -1;
    start_waiting(layer);
  }
}

StreamingExperts::WarmStart StreamingExperts::warm(std::span<const ExpertKey> hottest_first) {
  if (fetched_) fail("expert store: a warm start must come before the first fetch");
  WarmStart w;
  if (!policy_) return w;
  const auto t0 = Clock::now();
  const std::vector<ExpertKey> keys = policy_->warm(hottest_first);
  struct Slice {
    SliceRead r;
    uint8_t* dst = nullptr;
  };
  std::vector<Slice> slices;
  for (const ExpertKey& k : keys) {
    const size_t kk = key(k.layer, k.expert);
    assert(!free_slots_.empty() && "the policy's capacity is the cache slots");
    slot_of_[kk] = free_slots_.back();
    free_slots_.pop_back();
    read_before_[kk] = 1;
    uint8_t* slot = arena_.slot(slot_of_[kk]);
    for (int s = 0; s < store_.n_slices(k.layer); ++s) {
      const SliceRead r = store_.slice_read(k.layer, k.expert, s);
      slices.push_back({r, slot + r.region});
    }
  }
  // File order: a drive (and the kernel's readahead, for buffered reads) does best on ascending offsets.
  std::sort(slices.begin(), slices.end(), [](const Slice& a, const Slice& b) {
    return a.r.shard != b.r.shard ? a.r.shard < b.r.shard : a.r.file_offset < b.r.file_offset;
  });
  // At most one layer's worth of slices outstanding: within the engine's queue (sized for a fetch), and enough to
  // keep every lane busy.
  const size_t depth = static_cast<size_t>(store_.shape().n_expert);
  size_t next = 0, in_flight = 0;
  while (next < slices.size() || in_flight > 0) {
    while (next < slices.size() && in_flight < depth && error_.empty()) {
      const SliceRead& r = slices[next].r;
      engine_->submit(io::ReadOp{r.shard, r.file_offset, r.length, slices[next].dst, kWarmTag | next});
      ++next;
      ++in_flight;
    }
    if (in_flight == 0) break;  // a failed read stopped the submissions
    const io::ReadDone d = engine_->wait();
    --in_flight;
    const SliceRead& r = slices[d.tag & ~kWarmTag].r;
    if (d.result > 0) w.bytes += static_cast<uint64_t>(d.result);
    if ((d.result < 0 || static_cast<uint64_t>(d.result) < r.need) && error_.empty()) {
      error_ = fmt::format("warm start of the expert cache: {}",
                           files_.describe_failure(r.shard, r.file_offset, r.length, d.result));
    }
  }
  if (!error_.empty()) fail("{}", error_);
  w.experts = static_cast<int64_t>(keys.size());
  if (packing_) {
    const auto tp = Clock::now();
    for (const ExpertKey& k : keys) {
      const size_t kk = key(k.layer, k.expert);
      form_[kk] = Form::gguf;
      if (!store_.layer_packs(k.layer)) continue;
      store_.pack_rows16(k.layer, k.expert, arena_.slot(slot_of_[kk]), pack_scratch_.data());
      form_[kk] = Form::rows16;
      ++w.packed;
    }
    w.pack_seconds = ms_since(tp) / 1000.0;
  } else {
    for (const ExpertKey& k : keys) form_[key(k.layer, k.expert)] = Form::gguf;
  }
  w.seconds = ms_since(t0) / 1000.0;
  return w;
}

void StreamingExperts::fetch(int64_t layer, std::span<const int32_t> experts, ExpertConsumer& consumer) {
  if (!error_.empty()) fail("{}", error_);
  fetched_ = true;
  assert(layer >= 0 && layer < store_.shape().n_moe_layers &&
         experts.size() <= static_cast<size_t>(store_.shape().n_expert));
  // Planning issues no read, so when it throws (a swap read failed: the store is poisoned already) nothing of
  // this fetch is in flight.
  plan_fetch(layer, experts);
  try {
    deliver_fetch(layer, consumer);
    // Once per forward pass, after its last reads: a model file written, resized or replaced under the run stops
    // it here, before the logits those reads fed are used (reads of rewritten bytes do not fail).
    if (layer + 1 == store_.shape().n_moe_layers) files_.check_unchanged();
    if (policy_) {
      const auto tm = Clock::now();
      issue_swaps();  // the fetch's own reads are done: the lanes are idle until the next fetch
      totals_.mgmt_ms += ms_since(tm);
    }
  } catch (const Error& e) {
    drain();
    if (error_.empty()) error_ = e.what();
    throw;
  } catch (...) {
    drain();
    if (error_.empty()) error_ = "an expert fetch was interrupted by an exception; the expert cache is unusable";
    throw;
  }
}

// Which experts hit, which slots are freed and where each miss goes: hits_ (delivered from their slots),
// retained_ (read into the cache slot assigned here), once_ (landed swaps delivered from a slot given up here)
// and waiting_ (read into working slots). The policy's lookup, the evictions and the counters happen here; swaps
// that landed since the last call become resident first, so a lookup only misses a swap whose read is really
// still running.
void StreamingExperts::plan_fetch(int64_t layer, std::span<const int32_t> experts) {
  const auto t0 = Clock::now();
  n_jobs_ = 0;
  n_ready_ = 0;
  n_hits_ = 0;
  n_retained_ = 0;
  n_once_ = 0;
  waiting_head_ = 0;
  waiting_n_ = 0;
  fg_outstanding_ = 0;
  double swap_wait_ms = 0.0;  // stall on swaps already in flight, counted as stall rather than bookkeeping
  if (phase_ == Phase::decode) heat_.record(static_cast<int32_t>(layer), experts);
  reap_background();
  if (!error_.empty()) fail("{}", error_);
  if (policy_) {
    policy_->access(static_cast<int32_t>(layer), experts, phase_, access_);
    for (size_t i = 0; i < experts.size(); ++i) last_hit_[key(layer, experts[i])] = access_.hit[i];
    for (const ExpertKey& k : access_.evicted) {
      assert(slot_of_[key(k.layer, k.expert)] >= 0 && "the policy evicted an entry that has no slot");
      free_slot(key(k.layer, k.expert));
    }
    totals_.evictions += access_.evicted.size();
    totals_.hits += static_cast<uint64_t>(access_.hits);
    totals_.misses += static_cast<uint64_t>(access_.misses);
    moe_layer_misses_[static_cast<size_t>(layer)] += static_cast<uint64_t>(access_.misses);
  } else {
    totals_.misses += experts.size();
    moe_layer_misses_[static_cast<size_t>(layer)] += experts.size();
  }
  if (policy_ && n_swap_jobs_ > 0) swap_wait_ms = take_in_flight_swaps(layer, experts);
  for (size_t i = 0; i < experts.size(); ++i) {
    const int32_t e = experts[i];
    const size_t k = key(layer, e);
    if (policy_ && access_.hit[i] != 0) {
      assert(slot_of_[k] >= 0);
      hits_[n_hits_++] = e;
      continue;
    }
    const bool retained = policy_ && policy_->contains({static_cast<int32_t>(layer), e});
    if (policy_ && swaps_.release(k)) {  // its swap landed while this fetch waited: the slot holds it
      if (retained) {
        hits_[n_hits_++] = e;
      } else {  // used once and not kept: delivered before any read can reuse the slot given up here
        once_[n_once_++] = Once{e, slot_of_[k], settled_layout(k)};
        free_slot(k);
      }
      continue;
    }
    if (policy_) swaps_.remove(k);  // a queued swap taken over by this fetch: its slot stays reserved
    if (guess_layer_ == layer) {
      size_t a = 0;
      while (a < ahead_.size() && !(ahead_[a].live && ahead_[a].key == static_cast<int32_t>(k))) ++a;
      if (a < ahead_.size() && ahead_[a].next_slice > 0) {  // a read not started is read as a plain miss
        take_ahead(layer, e, a, retained);
        continue;
      }
    }
    if (retained) {
      if (slot_of_[k] < 0) {
        assert(!free_slots_.empty() && "strict capacity keeps the residents within the slots");
        slot_of_[k] = free_slots_.back();
        free_slots_.pop_back();
      }
      retained_[n_retained_++] = e;
    } else {
      if (slot_of_[k] >= 0) free_slot(k);  // a queued swap the strict capacity gave up
      waiting_[waiting_n_++] = e;
    }
  }
  if (guess_layer_ == layer) {
    for (size_t g = 0; g < n_guess_; ++g)
      totals_.ahead_right += std::find(experts.begin(), experts.end(), guess_[g]) != experts.end() ? 1 : 0;
  }
  drop_guesses();
  totals_.mgmt_ms += ms_since(t0) - swap_wait_ms;
}

// A miss read ahead: this fetch's job from now on, delivered when its last slice lands (at once when it has). An
// expert the cache keeps trades slots: the one read into becomes its cache slot, the cache slot assigned to it
// becomes the entry's.
void StreamingExperts::take_ahead(int64_t layer, int32_t expert, size_t i, bool retained) {
  Ahead& a = ahead_[i];
  const size_t k = key(layer, expert);
  if (retained) {
    if (slot_of_[k] < 0) {
      assert(!free_slots_.empty() && "strict capacity keeps the residents within the slots");
      slot_of_[k] = free_slots_.back();
      free_slots_.pop_back();
    }
    std::swap(slot_of_[k], a.slot);
  } else if (slot_of_[k] >= 0) {
    free_slot(k);  // a queued swap the strict capacity gave up
  }
  const size_t j = n_jobs_++;
  Job& job = jobs_[j];
  job.expert = expert;
  job.slot = a.dst;
  job.working = -1;
  job.retained = retained;
  job.ahead = static_cast<int32_t>(i);
  job.remaining = a.in_flight + (a.n_slices - a.next_slice);  // the unsubmitted slices go out with issue_reads
  a.job = static_cast<int32_t>(j);
  a.live = false;
  fg_outstanding_ += static_cast<size_t>(job.remaining);
  if (job.remaining == 0) ready_[n_ready_++] = static_cast<int32_t>(j);
  ++totals_.ahead_used;
}

void StreamingExperts::submit_ahead(size_t i, int max_slices) {
  Ahead& a = ahead_[i];
  const auto n_expert = static_cast<size_t>(store_.shape().n_expert);
  const auto layer = static_cast<int64_t>(static_cast<size_t>(a.key) / n_expert);
  const auto expert = static_cast<int32_t>(static_cast<size_t>(a.key) % n_expert);
  if (a.next_slice == 0 && a.n_slices > 0 && max_slices > 0) {
    ++totals_.ahead_reads;
    if (read_before_[static_cast<size_t>(a.key)] != 0) totals_.reread_bytes += store_.expert_bytes(layer);
    read_before_[static_cast<size_t>(a.key)] = 1;
  }
  for (; max_slices > 0 && a.next_slice < a.n_slices; --max_slices) {
    const int s = a.next_slice++;
    ++a.in_flight;
    ++ahead_slices_;
    const SliceRead r = store_.slice_read(layer, expert, s);
    engine_->submit(io::ReadOp{r.shard, r.file_offset, r.length, a.dst + r.region,
                               kAheadTag | (static_cast<uint64_t>(i) << kTagShift) | static_cast<uint64_t>(s)});
  }
}

// Idle lanes only: a read ahead may be wrong, and the next fetch's own reads queue behind whatever is submitted.
void StreamingExperts::issue_ahead() {
  const auto lanes = static_cast<size_t>(engine_->lanes());
  for (size_t i = 0; i < ahead_.size(); ++i) {
    if (!ahead_[i].live) continue;
    const size_t busy = engine_->outstanding();
    if (busy >= lanes) return;
    submit_ahead(i, static_cast<int>(lanes - busy));
  }
}

void StreamingExperts::prefetch(int64_t layer, std::span<const int32_t> experts) {
  if (ahead_.empty() || !error_.empty()) return;
  assert(layer >= 0 && layer < store_.shape().n_moe_layers &&
         experts.size() <= static_cast<size_t>(store_.shape().n_expert));
  const auto t0 = Clock::now();
  fetched_ = true;
  reap_background();  // frees the entries whose reads landed since
  if (!error_.empty()) return;  // poisoned by a read just collected: the next fetch throws
  drop_guesses();
  guess_layer_ = layer;
  n_guess_ = experts.size();
  std::copy(experts.begin(), experts.end(), guess_.begin());
  totals_.ahead_guesses += experts.size();
  size_t i = 0;
  for (const int32_t e : experts) {
    const size_t k = key(layer, e);
    if (slot_of_[k] >= 0) continue;  // held, or a swap's reserved slot: the swap reads it
    while (i < ahead_.size() && !ahead_free(ahead_[i])) ++i;
    if (i == ahead_.size()) break;
    Ahead& a = ahead_[i];
    a.key = static_cast<int32_t>(k);
    a.live = true;
    a.dst = arena_.slot(a.slot);
    a.next_slice = 0;
    a.n_slices = store_.n_slices(layer);
    ++i;
  }
  issue_ahead();
  totals_.mgmt_ms += ms_since(t0);
}

void StreamingExperts::drop_guesses() {
  for (Ahead& a : ahead_) {
    a.live = false;
    if (a.job < 0) a.n_slices = a.next_slice;  // its unread slices are never read
  }
  guess_layer_ = -1;
  n_guess_ = 0;
}

void StreamingExperts::on_ahead_read(const io::ReadDone& d) {
  Ahead& a = ahead_[(d.tag & ~kAheadTag) >> kTagShift];
  --a.in_flight;
  --ahead_slices_;
  totals_.io_ms += d.ms;
  if (d.result > 0) {
    totals_.bytes_read += static_cast<uint64_t>(d.result);
    totals_.ahead_bytes += static_cast<uint64_t>(d.result);
  }
  const auto n_expert = static_cast<size_t>(store_.shape().n_expert);
  const auto layer = static_cast<int64_t>(static_cast<size_t>(a.key) / n_expert);
  const auto expert = static_cast<int32_t>(static_cast<size_t>(a.key) % n_expert);
  const SliceRead r = store_.slice_read(layer, expert, static_cast<int>(d.tag & kSliceMask));
  if ((d.result < 0 || static_cast<uint64_t>(d.result) < r.need) && error_.empty()) {
    error_ = fmt::format("read ahead of expert {} of MoE layer {} (blk.{}): {}", expert, layer,
                         store_.shape().moe_layers[static_cast<size_t>(layer)],
                         files_.describe_failure(r.shard, r.file_offset, r.length, d.result));
  }
  if (a.job < 0) return;  // not (yet) taken over by a fetch
  --fg_outstanding_;
  Job& job = jobs_[static_cast<size_t>(a.job)];
  if (--job.remaining > 0 || !error_.empty()) return;
  ready_[n_ready_++] = a.job;
}

// Misses whose background read is running into their reserved slot: waits for those reads (only swaps are
// outstanding before this fetch submits its own) rather than reading the experts twice, and marks them taken.
// Throws when a swap read failed, with no expert left taken.
double StreamingExperts::take_in_flight_swaps(int64_t layer, std::span<const int32_t> experts) {
  const auto tw = Clock::now();
  for (size_t i = 0; i < experts.size(); ++i) {
    const size_t k = key(layer, experts[i]);
    if (access_.hit[i] != 0 || swaps_.state(k) != SwapState::in_flight) continue;
    wait_swap(k);
    swaps_.take(k);
  }
  const double waited = ms_since(tw);
  totals_.stall_ms += waited;
  if (!error_.empty()) {
    for (int32_t e : experts) swaps_.release(key(layer, e));
    fail("{}", error_);
  }
  return waited;
}

// Carries out the plan: the once_ experts first (their slots may be read into next), then the reads, then the
// hits (at once with overlap, while the reads run; otherwise after the first round of reads) and the landed reads
// in batches. After a failed read it keeps collecting the reads in flight (they target our slots), delivers
// nothing more and throws.
void StreamingExperts::deliver_fetch(int64_t layer, ExpertConsumer& consumer) {
  for (size_t i = 0; i < n_once_; ++i) {
    consumer.on_expert(once_[i].expert,
                       store_.view(layer, once_[i].expert, arena_.slot(once_[i].slot), once_[i].layout));
  }
  issue_reads(layer);
  bool hits_delivered = false;
  if (opts_.overlap) {
    deliver_hits(layer, consumer);
    hits_delivered = true;
    deliver_ready(layer, consumer);  // reads ahead that landed before this fetch, while its own reads run
  }
  while (fg_outstanding_ > 0) {
    io::ReadDone d;
    bool got = false;
    // Nothing landed: a step of packing rather than block, then look again (prefill only: see the header).
    while (opts_.pack_at_fetch_end == 0 && phase_ == Phase::prefill && (pack_n_ > 0 || packing_key_ >= 0) &&
           !(got = engine_->try_wait(d))) {
      pack_step();
    }
    if (!got) {
      const auto tw = Clock::now();
      d = engine_->wait();
      totals_.stall_ms += ms_since(tw);
    }
    on_read(layer, d);
    if (opts_.overlap) {
      // Whatever else has landed meanwhile joins the batch.
      io::ReadDone more;
      while (engine_->try_wait(more)) on_read(layer, more);
      if (error_.empty()) deliver_ready(layer, consumer);
    } else if (fg_outstanding_ == 0 && error_.empty()) {
      // End of a round: deliver what landed, then recycle its working slots for the next round.
      if (!hits_delivered) {
        deliver_hits(layer, consumer);
        hits_delivered = true;
      }
      deliver_ready(layer, consumer);
    }
  }
  if (!error_.empty()) fail("{}", error_);
  if (!hits_delivered) deliver_hits(layer, consumer);
  deliver_ready(layer, consumer);  // reads ahead that had landed before this fetch, when nothing else was read
  for (int i = 0; i != opts_.pack_at_fetch_end && pack_step(); ++i) {  // -1: until none waits
  }
}

// Every miss's read at once: the retained ones into their cache slots, then the others into working slots while
// one is free (the rest start as delivered jobs recycle theirs). Counted as bookkeeping, as issue_swaps is.
void StreamingExperts::issue_reads(int64_t layer) {
  const auto t0 = Clock::now();
  // Reads ahead taken over with slices still unsubmitted: the rest of each is now this fetch's own read.
  for (size_t j = 0; j < n_jobs_; ++j) {
    if (jobs_[j].ahead >= 0) submit_ahead(static_cast<size_t>(jobs_[j].ahead), store_.n_slices(layer));
  }
  for (size_t i = 0; i < n_retained_; ++i) {
    const int32_t e = retained_[i];
    start_job(layer, e, arena_.slot(slot_of_[key(layer, e)]), -1);
  }
  start_waiting(layer);
  totals_.mgmt_ms += ms_since(t0);
}

void StreamingExperts::deliver_hits(int64_t layer, ExpertConsumer& consumer) {
  if (n_hits_ == 0) return;
  for (size_t i = 0; i < n_hits_; ++i) {
    const int32_t e = hits_[i];
    const size_t k = key(layer, e);
    batch_[i] = store_.view(layer, e, arena_.slot(slot_of_[k]), settled_layout(k));
    if (form_[k] == Form::gguf) queue_pack(k);  // used again: worth its packing
  }
  consumer.on_experts(std::span<const int32_t>(hits_.data(), n_hits_),
                      std::span<const ExpertWeights>(batch_.data(), n_hits_));
}

// One landed read. A slice of a foreground job: when it is the job's last, the job joins ready_. A failed or
// short one poisons the store (error_); the first failure is the one reported.
void StreamingExperts::on_read(int64_t layer, const io::ReadDone& d) {
  if ((d.tag & (kSwapTag | kAheadTag)) != 0) {
    on_background_read(d);
    return;
  }
  --fg_outstanding_;
  totals_.io_ms += d.ms;
  if (d.result > 0) totals_.bytes_read += static_cast<uint64_t>(d.result);
  Job& job = jobs_[d.tag >> kTagShift];
  const int s = static_cast<int>(d.tag & kSliceMask);
  const SliceRead r = store_.slice_read(layer, job.expert, s);
  if (d.result < 0 || static_cast<uint64_t>(d.result) < r.need) {
    if (error_.empty()) {
      error_ = fmt::format("expert {} of MoE layer {} (blk.{}): {}", job.expert, layer,
                           store_.shape().moe_layers[static_cast<size_t>(layer)],
                           files_.describe_failure(r.shard, r.file_offset, r.length, d.result));
    }
    return;
  }
  if (--job.remaining > 0 || !error_.empty()) return;
  ready_[n_ready_++] = static_cast<int32_t>(d.tag >> kTagShift);
}

// The jobs in ready_ as one batch (one pass of the consumer's threads), then their working slots recycled, which
// starts reads that were waiting for one.
void StreamingExperts::deliver_ready(int64_t layer, ExpertConsumer& consumer) {
  const size_t n = n_ready_;
  n_ready_ = 0;
  for (size_t i = 0; i < n; ++i) {
    const Job& job = jobs_[static_cast<size_t>(ready_[i])];
    if (job.retained) form_[key(layer, job.expert)] = Form::gguf;
    batch_ids_[i] = job.expert;
    batch_[i] = store_.view(layer, job.expert, job.slot);  // as read: it has not waited for packing yet
  }
  if (n > 0) {
    consumer.on_experts(std::span<const int32_t>(batch_ids_.data(), n),
                        std::span<const ExpertWeights>(batch_.data(), n));
  }
  for (size_t i = 0; i < n; ++i) finish_job(layer, jobs_[static_cast<size_t>(ready_[i])]);
}

StreamCounters StreamingExperts::end_step() {
  if (phase_ == Phase::decode) heat_.end_decode_step();
  drop_guesses();
  if (policy_) {
    const auto t0 = Clock::now();
    reap_background();
    policy_->end_step(phase_, plan_);
    for (const ExpertKey& k : plan_.evict) {
      const size_t kk = key(k.layer, k.expert);
      if (slot_of_[kk] >= 0) {
        free_slot(kk);
        ++totals_.evictions;
      }
    }
    // Each load has capacity reserved in the policy, so a slot is free for it (strict capacity counts pending
    // entries); it is read in the background and becomes resident when swap_landed() is called.
    for (const ExpertKey& k : plan_.load) {
      const size_t kk = key(k.layer, k.expert);
      assert(!free_slots_.empty() && slot_of_[kk] < 0 && swaps_.state(kk) == SwapState::none);
      if (!error_.empty() || free_slots_.empty()) {  // poisoned store (or a broken invariant): do not read
        policy_->swap_cancelled(k);
        continue;
      }
      slot_of_[kk] = free_slots_.back();
      free_slots_.pop_back();
      swaps_.push(kk);
    }
    if (error_.empty()) issue_swaps();
    totals_.mgmt_ms += ms_since(t0);
  }
  const StreamCounters step = totals_ - at_step_start_;
  at_step_start_ = totals_;
  return step;
}

void StreamingExperts::free_slot(size_t k) {
  free_slots_.push_back(slot_of_[k]);
  slot_of_[k] = -1;
  if (packing_key_ == static_cast<int64_t>(k)) packing_key_ = -1;  // half packed: abandoned with the slot
  form_[k] = Form::none;  // a queued entry for it is skipped when its turn comes
}

void StreamingExperts::queue_pack(size_t k) {
  if (!packing_ || pack_queued_[k] != 0) return;  // queued already: one entry serves (it checks the form)
  if (!store_.layer_packs(static_cast<int64_t>(k) / store_.shape().n_expert)) return;  // nothing in it packs
  pack_queued_[k] = 1;
  pack_queue_[(pack_head_ + pack_n_++) % pack_queue_.size()] = static_cast<int32_t>(k);
}

bool StreamingExperts::pack_step() {
  const auto n_expert = static_cast<size_t>(store_.shape().n_expert);
  if (packing_key_ < 0) {
    while (pack_n_ > 0 && packing_key_ < 0) {
      const auto k = static_cast<size_t>(pack_queue_[pack_head_]);
      pack_head_ = (pack_head_ + 1) % pack_queue_.size();
      --pack_n_;
      pack_queued_[k] = 0;
      if (form_[k] != Form::gguf) continue;  // evicted (or packed) since it was queued
      assert(slot_of_[k] >= 0 && swaps_.state(k) != SwapState::in_flight);
      packing_key_ = static_cast<int64_t>(k);
      form_[k] = Form::packing;
      pack_slice_ = 0;
      pack_group_ = 0;
    }
    if (packing_key_ < 0) return false;
  }
  const auto t0 = Clock::now();
  const auto k = static_cast<size_t>(packing_key_);
  const auto layer = static_cast<int64_t>(k / n_expert);
  const auto expert = static_cast<int32_t>(k % n_expert);
  uint8_t* slot = arena_.slot(slot_of_[k]);
  for (size_t budget = opts_.pack_step_bytes; budget > 0 && pack_slice_ < store_.n_slices(layer);) {
    const int64_t n = store_.pack_groups(layer, pack_slice_);
    if (pack_group_ == n) {
      ++pack_slice_;
      pack_group_ = 0;
      continue;
    }
    const size_t group = store_.pack_group_bytes(layer, pack_slice_);
    const int64_t g1 = std::min<int64_t>(n, pack_group_ + static_cast<int64_t>(std::max<size_t>(budget / group, 1)));
    store_.pack_rows16(layer, expert, slot, pack_slice_, pack_group_, g1, pack_scratch_.data());
    budget -= std::min(budget, static_cast<size_t>(g1 - pack_group_) * group);
    pack_group_ = g1;
  }
  if (pack_slice_ == store_.n_slices(layer)) {
    form_[k] = Form::rows16;
    packing_key_ = -1;
    ++totals_.packed;
  }
  const double ms = ms_since(t0);
  totals_.pack_ms += ms;
  totals_.mgmt_ms += ms;
  return true;
}

void StreamingExperts::finish_packing(size_t k) {
  assert(packing_key_ == static_cast<int64_t>(k));
  while (packing_key_ == static_cast<int64_t>(k)) pack_step();
}

void StreamingExperts::issue_swaps() {
  const auto n_expert = static_cast<size_t>(store_.shape().n_expert);
  while (swaps_.n_queued() > 0) {
    const size_t k = swaps_.front();
    const auto layer = static_cast<int64_t>(k / n_expert);
    const auto expert = static_cast<int32_t>(k % n_expert);
    const auto n_slices = static_cast<size_t>(store_.n_slices(layer));
    // Idle lanes only: one expert at a time may exceed the lanes, otherwise swaps never queue behind each other.
    const size_t busy = swap_slices_ + ahead_slices_;
    if (busy > 0 && busy + n_slices > static_cast<size_t>(engine_->lanes())) return;
    if (n_swap_jobs_ == swap_jobs_.size()) return;
    swaps_.start_front();
    size_t j = 0;
    while (swap_jobs_[j].key >= 0) ++j;
    swap_jobs_[j] = SwapJob{static_cast<int32_t>(k), static_cast<int>(n_slices)};
    ++n_swap_jobs_;
    swap_slices_ += n_slices;
    if (read_before_[k] != 0) totals_.reread_bytes += store_.expert_bytes(layer);
    read_before_[k] = 1;
    uint8_t* slot = arena_.slot(slot_of_[k]);
    for (size_t s = 0; s < n_slices; ++s) {
      const SliceRead r = store_.slice_read(layer, expert, static_cast<int>(s));
      engine_->submit(io::ReadOp{r.shard, r.file_offset, r.length, slot + r.region,
                                 kSwapTag | (static_cast<uint64_t>(j) << kTagShift) | static_cast<uint64_t>(s)});
    }
  }
}

void StreamingExperts::on_swap_read(const io::ReadDone& d) {
  const size_t j = (d.tag & ~kSwapTag) >> kTagShift;
  SwapJob& job = swap_jobs_[j];
  const auto n_expert = static_cast<size_t>(store_.shape().n_expert);
  const auto k = static_cast<size_t>(job.key);
  const auto layer = static_cast<int64_t>(k / n_expert);
  const auto expert = static_cast<int32_t>(k % n_expert);
  --swap_slices_;
  totals_.io_ms += d.ms;
  if (d.result > 0) {
    totals_.bytes_read += static_cast<uint64_t>(d.result);
    totals_.swap_bytes += static_cast<uint64_t>(d.result);
  }
  const SliceRead r = store_.slice_read(layer, expert, static_cast<int>(d.tag & kSliceMask));
  if ((d.result < 0 || static_cast<uint64_t>(d.result) < r.need) && error_.empty()) {
    error_ = fmt::format("background swap of expert {} of MoE layer {} (blk.{}): {}", expert, layer,
                         store_.shape().moe_layers[static_cast<size_t>(layer)],
                         files_.describe_failure(r.shard, r.file_offset, r.length, d.result));
  }
  if (--job.remaining > 0) return;
  job.key = -1;
  --n_swap_jobs_;
  swaps_.landed(k);
  const ExpertKey ek{static_cast<int32_t>(layer), expert};
  if (!error_.empty()) {
    // The store is poisoned (the next fetch throws); keep the books consistent anyway.
    if (policy_->pending(ek)) {
      policy_->swap_cancelled(ek);
      free_slot(k);
    }
    return;
  }
  ++totals_.swaps;
  if (slot_of_[k] >= 0) form_[k] = Form::gguf;  // a swap lands in the slot its key holds
  policy_->swap_landed(ek);  // no-op when a fetch already took the key over
}

void StreamingExperts::on_background_read(const io::ReadDone& d) {
  if ((d.tag & kAheadTag) != 0) {
    on_ahead_read(d);
  } else {
    on_swap_read(d);
  }
}

void StreamingExperts::reap_background() {
  io::ReadDone d;
  while ((n_swap_jobs_ > 0 || ahead_slices_ > 0) && engine_->try_wait(d)) on_background_read(d);
}

void StreamingExperts::wait_swap(size_t k) {
  while (swaps_.state(k) == SwapState::in_flight) on_background_read(engine_->wait());
}

uint64_t StreamingExperts::resident_bytes() const { return policy_ ? policy_->resident_bytes() : 0; }

std::string StreamingExperts::describe() const {
  constexpr double kMiB = 1024.0 * 1024.0;
  return fmt::format("{} lanes, {}, {}, cache {} slots of {:.2f} MiB ({:.1f} MiB), {} working slots{}, policy {}{}",
                     engine_->lanes(), io::engine_name(engine_->kind()), files_.direct_note(), arena_.n_cache(),
                     static_cast<double>(arena_.slot_bytes()) / kMiB,
                     static_cast<double>(arena_.slot_bytes() * static_cast<uint64_t>(arena_.n_cache())) / kMiB,
                     arena_.n_working(),
                     arena_.n_ahead() > 0 ? fmt::format(", {} ahead slots (next-layer prefetch)", arena_.n_ahead())
                                          : std::string(),
                     policy_ ? std::string(policy_->name()) : std::string("none"),
                     packing_ ? fmt::format(", cached experts hit again repacked in their slots while prefill waits "
                                            "for reads (rows16: {} of {} weight slices)",
                                            store_.packing_slices(), store_.weight_slices())
                              : std::string());
}

}  // namespace moetier::moe
