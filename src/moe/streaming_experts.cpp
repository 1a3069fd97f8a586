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

}  // namespace

StreamingExperts::StreamingExperts(const gguf::GgufModel& model, const StreamingOptions& opts)
    : model_(model), opts_(opts), store_(model), files_(shard_paths(model), io::FileOptions{opts.direct, opts.log}) {
  const ExpertShape& sh = store_.shape();
  const auto E = static_cast<size_t>(sh.n_expert);
  const size_t n_keys = static_cast<size_t>(sh.n_layer) * E;
  if (opts.lanes < 1) fail("read lanes must be at least 1, got {}", opts.lanes);
  if (opts.working_slots < 0) fail("working slots must be at least 1, got {}", opts.working_slots);
  const int n_working = opts.working_slots > 0 ? opts.working_slots : std::max(4, 2 * opts.lanes);
  const int64_t n_cache = std::min<int64_t>(static_cast<int64_t>(opts.cache_bytes / store_.slot_bytes()),
                                            static_cast<int64_t>(n_keys));

  std::string note;
  io::EngineOptions eo{opts.engine, opts.lanes, opts.fail_read};
  // Outstanding reads: a fetch's (at most every expert of a layer) plus the background swaps' (swap_slice_limit_).
  swap_slice_limit_ = static_cast<size_t>(std::max(opts.lanes, ExpertStore::kMaxSlices));
  engine_ = io::make_read_engine(files_, eo, E * ExpertStore::kMaxSlices + swap_slice_limit_, &note);
  if (!note.empty() && opts.log) opts.log(note);
  arena_ = SlotArena(store_.slot_bytes(), n_cache, n_working);

  if (n_cache > 0) {
    CacheConfig cc;
    cc.n_layer = static_cast<int32_t>(sh.n_layer);
    cc.n_expert = static_cast<int32_t>(sh.n_expert);
    const std::string arch = model.architecture();
    cc.n_expert_used = static_cast<int32_t>(model.metadata().get_uint_or(arch + ".expert_used_count", 0));
    for (int64_t l = 0; l < sh.n_layer; ++l) cc.expert_bytes.push_back(store_.expert_bytes(l));
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
  jobs_.resize(E);
  hits_.resize(E);
  batch_.resize(E);
  batch_ids_.resize(E);
  waiting_.resize(E);
  ready_.resize(E);
  free_working_.reserve(static_cast<size_t>(n_working));
  for (int w = n_working; w-- > 0;) free_working_.push_back(w);
  layer_misses_.assign(static_cast<size_t>(sh.n_layer), 0);
  swap_state_.assign(n_keys, 0);
  swap_queue_.reserve(static_cast<size_t>(n_cache));
  swap_jobs_.resize(static_cast<size_t>(opts.lanes));  // every job in flight holds at least one slice (lane)
  plan_.load.reserve(static_cast<size_t>(n_cache));
  plan_.evict.reserve(static_cast<size_t>(n_cache));
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
  if (job.working >= 0) {
    free_working_.push_back(job.working);
    job.working = -1;
    start_waiting(layer);
  }
}

void StreamingExperts::fetch(int64_t layer, std::span<const int32_t> experts, ExpertConsumer& consumer) {
  if (!error_.empty()) fail("{}", error_);
  assert(layer >= 0 && layer < store_.shape().n_layer &&
         experts.size() <= static_cast<size_t>(store_.shape().n_expert));
  const auto t0 = Clock::now();
  n_jobs_ = 0;
  n_ready_ = 0;
  waiting_head_ = 0;
  waiting_n_ = 0;
  fg_outstanding_ = 0;
  size_t n_hits = 0;
  double swap_wait_ms = 0.0;  // stall on swaps already in flight, counted as stall rather than bookkeeping

  // 1. Bookkeeping: which experts hit, which slots are freed, where each miss goes. Swaps that landed since the
  // last call become resident first, so a lookup only misses a swap whose read is really still running.
  if (policy_) {
    reap_swaps();
    if (!error_.empty()) fail("{}", error_);
    policy_->access(static_cast<int32_t>(layer), experts, phase_, access_);
    for (const ExpertKey& k : access_.evicted) {
      int32_t& s = slot_of_[key(k.layer, k.expert)];
      assert(s >= 0 && "the policy evicted an entry that has no slot");
      free_slots_.push_back(s);
      s = -1;
    }
    totals_.evictions += access_.evicted.size();
    totals_.hits += static_cast<uint64_t>(access_.hits);
    totals_.misses += static_cast<uint64_t>(access_.misses);
    layer_misses_[static_cast<size_t>(layer)] += static_cast<uint64_t>(access_.misses);
  } else {
    totals_.misses += experts.size();
    layer_misses_[static_cast<size_t>(layer)] += experts.size();
  }
  if (policy_ && n_swap_jobs_ > 0) {
    // Misses whose background read is running into their reserved slot: wait for those reads (only swaps are
    // outstanding before this fetch submits its own) rather than reading the experts twice. Marked 3 below.
    const auto tw = Clock::now();
    for (size_t i = 0; i < experts.size(); ++i) {
      const size_t k = key(layer, experts[i]);
      if (access_.hit[i] != 0 || swap_state_[k] != 2) continue;
      wait_swap(k);
      swap_state_[k] = 3;
    }
    swap_wait_ms = ms_since(tw);
    totals_.stall_ms += swap_wait_ms;
    if (!error_.empty()) {
      for (int32_t e : experts) {
        if (swap_state_[key(layer, e)] == 3) swap_state_[key(layer, e)] = 0;
      }
      fail("{}", error_);
    }
  }
  for (size_t i = 0; i < experts.size(); ++i) {
    const int32_t e = experts[i];
    const size_t k = key(layer, e);
    if (policy_ && access_.hit[i] != 0) {
      assert(slot_of_[k] >= 0);
      hits_[n_hits++] = e;
      continue;
    }
    const bool retained = policy_ && policy_->contains({static_cast<int32_t>(layer), e});
    if (policy_ && swap_state_[k] == 3) {  // its swap landed while this fetch waited: the slot holds it
      swap_state_[k] = 0;
      if (retained) {
        hits_[n_hits++] = e;
      } else {  // used once and not kept: deliver now, before any read can reuse the slot
        consumer.on_expert(e, store_.view(layer, e, arena_.slot(slot_of_[k])));
        free_slot(k);
      }
      continue;
    }
    if (policy_ && swap_state_[k] == 1) unqueue_swap(k);  // taken over by this fetch: its slot stays reserved
    if (retained) {
      if (slot_of_[k] < 0) {
        assert(!free_slots_.empty() && "strict capacity keeps the residents within the slots");
        slot_of_[k] = free_slots_.back();
        free_slots_.pop_back();
      }
      start_job(layer, e, arena_.slot(slot_of_[k]), -1);
    } else {
      if (slot_of_[k] >= 0) free_slot(k);  // a queued swap the strict capacity gave up
      waiting_[waiting_n_++] = e;
    }
  }
  start_waiting(layer);
  totals_.mgmt_ms += ms_since(t0) - swap_wait_ms;

  // 2. Deliveries. Hits first while the reads run (overlap), otherwise after the first round of reads.
  bool hits_delivered = false;
  auto deliver_hits = [&] {
    for (size_t i = 0; i < n_hits; ++i) {
      const int32_t e = hits_[i];
      batch_[i] = store_.view(layer, e, arena_.slot(slot_of_[key(layer, e)]));
    }
    hits_delivered = true;
    if (n_hits > 0) {
      consumer.on_experts(std::span<const int32_t>(hits_.data(), n_hits),
                          std::span<const ExpertWeights>(batch_.data(), n_hits));
    }
  };
  try {
    if (opts_.overlap) deliver_hits();
    // One landed read. A slice of a foreground job: when it is the job's last, the job joins ready_.
    const auto on_read = [&](const io::ReadDone& d) {
      if ((d.tag & kSwapTag) != 0) {
        on_swap_read(d);
        return;
      }
      --fg_outstanding_;
      totals_.io_ms += d.ms;
      if (d.result > 0) totals_.bytes_read += static_cast<uint64_t>(d.result);
      Job& job = jobs_[d.tag >> kTagShift];
      const int s = static_cast<int>(d.tag & ((1u << kTagShift) - 1));
      const SliceRead r = store_.slice_read(layer, job.expert, s);
      if (d.result < 0 || static_cast<uint64_t>(d.result) < r.need) {
        if (error_.empty()) {
          error_ = fmt::format("expert {} of layer {}: {}", job.expert, layer,
                               files_.describe_failure(r.shard, r.file_offset, r.length, d.result));
        }
        return;  // keep collecting the reads in flight; they target our slots
      }
      if (--job.remaining > 0 || !error_.empty()) return;
      ready_[n_ready_++] = static_cast<int32_t>(d.tag >> kTagShift);
    };
    // The jobs in ready_ as one batch (one pass of the consumer's threads), then their working slots recycled,
    // which starts reads that were waiting for one.
    const auto deliver_ready = [&] {
      const size_t n = n_ready_;
      n_ready_ = 0;
      for (size_t i = 0; i < n; ++i) {
        const Job& landed = jobs_[static_cast<size_t>(ready_[i])];
        batch_ids_[i] = landed.expert;
        batch_[i] = store_.view(layer, landed.expert, landed.slot);
      }
      if (n > 0) {
        consumer.on_experts(std::span<const int32_t>(batch_ids_.data(), n),
                            std::span<const ExpertWeights>(batch_.data(), n));
      }
      for (size_t i = 0; i < n; ++i) finish_job(layer, jobs_[static_cast<size_t>(ready_[i])]);
    };
    while (fg_outstanding_ > 0) {
      const auto tw = Clock::now();
      const io::ReadDone d = engine_->wait();
      totals_.stall_ms += ms_since(tw);
      on_read(d);
      if (opts_.overlap) {
        // Whatever else has landed meanwhile joins the batch.
        io::ReadDone more;
        while (engine_->try_wait(more)) on_read(more);
        if (error_.empty()) deliver_ready();
      } else if (fg_outstanding_ == 0 && error_.empty()) {
        // End of a round: deliver what landed, then recycle its working slots for the next round.
        if (!hits_delivered) deliver_hits();
        deliver_ready();
      }
    }
    if (!error_.empty()) fail("{}", error_);
    if (!hits_delivered) deliver_hits();
    // Once per forward pass, after its last reads: a model file written, resized or replaced under the run stops
    // it here, before the logits those reads fed are used (reads of rewritten bytes do not fail).
    if (layer + 1 == store_.shape().n_layer) files_.check_unchanged();
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

StreamCounters StreamingExperts::end_step() {
  if (policy_) {
    const auto t0 = Clock::now();
    reap_swaps();
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
      assert(!free_slots_.empty() && slot_of_[kk] < 0 && swap_state_[kk] == 0);
      if (!error_.empty() || free_slots_.empty()) {  // poisoned store (or a broken invariant): do not read
        policy_->swap_cancelled(k);
        continue;
      }
      slot_of_[kk] = free_slots_.back();
      free_slots_.pop_back();
      swap_state_[kk] = 1;
      if (swap_queue_.size() == swap_queue_.capacity() && swap_head_ > 0) {  // drop the consumed prefix
        swap_queue_.erase(swap_queue_.begin(), swap_queue_.begin() + static_cast<std::ptrdiff_t>(swap_head_));
        swap_head_ = 0;
      }
      swap_queue_.push_back(static_cast<int32_t>(kk));
    }
    if (error_.empty()) issue_swaps();
    totals_.mgmt_ms += ms_since(t0);
  }
  StreamCounters step = totals_;
  step.hits -= at_step_start_.hits;
  step.misses -= at_step_start_.misses;
  step.evictions -= at_step_start_.evictions;
  step.bytes_read -= at_step_start_.bytes_read;
  step.reread_bytes -= at_step_start_.reread_bytes;
  step.io_ms -= at_step_start_.io_ms;
  step.stall_ms -= at_step_start_.stall_ms;
  step.mgmt_ms -= at_step_start_.mgmt_ms;
  step.swaps -= at_step_start_.swaps;
  step.swap_bytes -= at_step_start_.swap_bytes;
  at_step_start_ = totals_;
  return step;
}

void StreamingExperts::free_slot(size_t k) {
  free_slots_.push_back(slot_of_[k]);
  slot_of_[k] = -1;
}

bool StreamingExperts::unqueue_swap(size_t k) {
  const auto it = std::find(swap_queue_.begin() + static_cast<std::ptrdiff_t>(swap_head_), swap_queue_.end(),
                            static_cast<int32_t>(k));
  if (it == swap_queue_.end()) return false;
  swap_queue_.erase(it);  // within the reserved capacity: no allocation
  swap_state_[k] = 0;
  return true;
}

void StreamingExperts::issue_swaps() {
  const auto n_expert = static_cast<size_t>(store_.shape().n_expert);
  while (swap_head_ < swap_queue_.size()) {
    const auto k = static_cast<size_t>(swap_queue_[swap_head_]);
    const auto layer = static_cast<int64_t>(k / n_expert);
    const auto expert = static_cast<int32_t>(k % n_expert);
    const auto n_slices = static_cast<size_t>(store_.n_slices(layer));
    // Idle lanes only: one expert at a time may exceed the lanes, otherwise swaps never queue behind each other.
    if (swap_slices_ > 0 && swap_slices_ + n_slices > static_cast<size_t>(engine_->lanes())) return;
    if (n_swap_jobs_ == swap_jobs_.size()) return;
    ++swap_head_;
    size_t j = 0;
    while (swap_jobs_[j].key >= 0) ++j;
    swap_jobs_[j] = SwapJob{static_cast<int32_t>(k), static_cast<int>(n_slices)};
    ++n_swap_jobs_;
    swap_slices_ += n_slices;
    swap_state_[k] = 2;
    if (read_before_[k] != 0) totals_.reread_bytes += store_.expert_bytes(layer);
    read_before_[k] = 1;
    uint8_t* slot = arena_.slot(slot_of_[k]);
    for (size_t s = 0; s < n_slices; ++s) {
      const SliceRead r = store_.slice_read(layer, expert, static_cast<int>(s));
      engine_->submit(io::ReadOp{r.shard, r.file_offset, r.length, slot + r.region,
                                 kSwapTag | (static_cast<uint64_t>(j) << kTagShift) | static_cast<uint64_t>(s)});
    }
  }
  if (swap_head_ == swap_queue_.size()) {
    swap_queue_.clear();  // keeps the capacity
    swap_head_ = 0;
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
    error_ = fmt::format("background swap of expert {} of layer {}: {}", expert, layer,
                         files_.describe_failure(r.shard, r.file_offset, r.length, d.result));
  }
  if (--job.remaining > 0) return;
  job.key = -1;
  --n_swap_jobs_;
  swap_state_[k] = 0;
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
  policy_->swap_landed(ek);  // no-op when a fetch already took the key over
}

void StreamingExperts::reap_swaps() {
  io::ReadDone d;
  while (n_swap_jobs_ > 0 && engine_->try_wait(d)) on_swap_read(d);
}

void StreamingExperts::wait_swap(size_t k) {
  while (swap_state_[k] == 2) on_swap_read(engine_->wait());
}

uint64_t StreamingExperts::resident_bytes() const { return policy_ ? policy_->resident_bytes() : 0; }

std::string StreamingExperts::describe() const {
  constexpr double kMiB = 1024.0 * 1024.0;
  return fmt::format("{} lanes, {}, {}, cache {} slots of {:.2f} MiB ({:.1f} MiB), {} working slots, policy {}",
                     engine_->lanes(), io::engine_name(engine_->kind()), files_.direct_note(), arena_.n_cache(),
                     static_cast<double>(arena_.slot_bytes()) / kMiB,
                     static_cast<double>(arena_.slot_bytes() * static_cast<uint64_t>(arena_.n_cache())) / kMiB,
                     arena_.n_working(), policy_ ? std::string(policy_->name()) : std::string("none"));
}

}  // namespace moetier::moe
