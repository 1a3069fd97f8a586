// The RAM expert cache's memory: fixed-size slots, each large enough for the largest layer's expert in its read
// layout (see expert_store.h), allocated once at start and reused on eviction. No allocation, free or page
// decommit happens per token; a slot's pages are committed by the first read into it and stay committed.
//
// At start, slots [0, n_cache) hold cached experts (which one is decided by the cache policy); slots [n_cache,
// n_cache + n_working) are working slots for experts used by a batch but not retained (cache 0, or a prefill batch
// larger than the cache), recycled as their experts are delivered; the last n_ahead slots take the experts read
// ahead on a guess (the next-layer prefetch). A slot is named by its index i (slot(i)): an expert read ahead into
// slot i that the cache keeps stays there, and the cache slot it was given takes slot i's place among the slots
// read ahead into, so a cache or read-ahead slot may have any index outside the working range.
// Thread-safety: the arena is immutable after construction; a slot is written by one read lane at a time.
#pragma once

#include <cstdint>

#include "moe/io/anon_buffer.h"

namespace moetier::moe {

class SlotArena {
 public:
  SlotArena() = default;
  // slot_bytes must be a multiple of io::kPage. Throws moetier::Error when the memory cannot be reserved.
  SlotArena(uint64_t slot_bytes, int64_t n_cache, int64_t n_working, int64_t n_ahead = 0);

  uint8_t* slot(int64_t i) const { return buf_.data() + static_cast<uint64_t>(i) * slot_bytes_; }
  uint8_t* working(int64_t i) const { return slot(n_cache_ + i); }
  uint64_t slot_bytes() const { return slot_bytes_; }
  int64_t n_cache() const { return n_cache_; }
  int64_t n_working() const { return n_working_; }
  int64_t n_ahead() const { return n_ahead_; }
  uint64_t bytes() const { return buf_.size(); }  // all slots, bytes

 private:
  io::AnonBuffer buf_;  // [n_cache + n_working + n_ahead, slot_bytes]
  uint64_t slot_bytes_ = 0;
  int64_t n_cache_ = 0;
  int64_t n_working_ = 0;
  int64_t n_ahead_ = 0;
};

}  // namespace moetier::moe
