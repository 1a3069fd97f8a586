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
  engine_ = io::make_read_engine(files_, eo, E * ExpertStore::kMaxSlices, &note);
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
  waiting_.resize(E);
  ready_.resize(E);
  free_working_.reserve(static_cast<size_t>(n_working));
  for (int w = n_working; w-- > 0;) free_working_.push_back(w);
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

void StreamingExperts::deliver(int64_t layer, const Job& job, ExpertConsumer& consumer) {
  consumer.on_expert(job.expert, store_.view(layer, job.expert, job.slot));
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
  size_t n_hits = 0;

  // 1. Bookkeeping: which experts hit, which slots are freed, where each miss goes.
  if (policy_) {
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
  } else {
    totals_.misses += experts.size();
  }
  for (size_t i = 0; i < experts.size(); ++i) {
    const int32_t e = experts[i];
    if (policy_ && access_.hit[i] != 0) {
      assert(slot_of_[key(layer, e)] >= 0);
      hits_[n_hits++] = e;
    } else if (policy_ && policy_->contains({static_cast<int32_t>(layer), e})) {
      assert(!free_slots_.empty() && "strict capacity keeps the residents within the slots");
      const int32_t s = free_slots_.back();
      free_slots_.pop_back();
      slot_of_[key(layer, e)] = s;
      start_job(layer, e, arena_.slot(s), -1);
    } else {
      waiting_[waiting_n_++] = e;
    }
  }
  start_waiting(layer);
  totals_.mgmt_ms += ms_since(t0);

  // 2. Deliveries. Hits first while the reads run (overlap), otherwise after the first round of reads.
  bool hits_delivered = false;
  auto deliver_hits = [&] {
    for (size_t i = 0; i < n_hits; ++i) {
      const int32_t e = hits_[i];
      consumer.on_expert(e, store_.view(layer, e, arena_.slot(slot_of_[key(layer, e)])));
    }
    hits_delivered = true;
  };
  try {
    if (opts_.overlap) deliver_hits();
    while (engine_->outstanding() > 0) {
      const auto tw = Clock::now();
      const io::ReadDone d = engine_->wait();
      totals_.stall_ms += ms_since(tw);
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
        continue;  // keep collecting the reads in flight; they target our slots
      }
      if (--job.remaining > 0 || !error_.empty()) continue;
      if (opts_.overlap) {
        deliver(layer, job, consumer);
        finish_job(layer, job);
      } else {
        ready_[n_ready_++] = static_cast<int32_t>(d.tag >> kTagShift);
        if (engine_->outstanding() == 0) {
          // End of a round: deliver what landed, then recycle its working slots for the next round.
          if (!hits_delivered) deliver_hits();
          const size_t n = n_ready_;
          n_ready_ = 0;
          for (size_t i = 0; i < n; ++i) deliver(layer, jobs_[static_cast<size_t>(ready_[i])], consumer);
          for (size_t i = 0; i < n; ++i) finish_job(layer, jobs_[static_cast<size_t>(ready_[i])]);
        }
      }
    }
    if (!error_.empty()) fail("{}", error_);
    if (!hits_delivered) deliver_hits();
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
    policy_->end_step(phase_, plan_);
    for (const ExpertKey& k : plan_.evict) {
      int32_t& s = slot_of_[key(k.layer, k.expert)];
      if (s >= 0) {
        free_slots_.push_back(s);
        s = -1;
        ++totals_.evictions;
      }
    }
    // Background swap-ins are not performed yet: release their reservations so capacity stays exact.
    for (const ExpertKey& k : plan_.load) policy_->swap_cancelled(k);
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
  at_step_start_ = totals_;
  return step;
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
