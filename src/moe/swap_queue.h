// The adaptive tier's background swap-ins (SwapPlan::load) as the streaming store schedules them: the swap state
// of every (MoE layer, expert) key and the FIFO of keys waiting for idle read lanes.
//
// A key's life: end_step() queues it (none -> queued, its cache slot reserved); issue_swaps() starts the oldest
// queued keys when the lanes are idle (queued -> in_flight); its read lands (in_flight -> none). A fetch that
// needs a queued key takes it over as its own miss (remove: queued -> none, the slot stays reserved); one that
// needs an in-flight key waits for the read, then holds it as taken until it has delivered it from the slot
// (none -> taken -> none). Keys are indices layer * n_expert + expert.
//
// Memory: both arrays are sized by the constructor; nothing allocates afterwards, since at most `capacity` keys
// (one per cache slot: each holds a reserved slot) are queued at once. Thread-safety: none; one owner.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace moetier::moe {

enum class SwapState : uint8_t {
  none,       // no background swap
  queued,     // in the FIFO with its slot reserved; no read issued yet
  in_flight,  // its read is running into the reserved slot
  taken,      // landed while a fetch waited for it; that fetch delivers it from the slot
};

class SwapQueue {
 public:
  SwapQueue() = default;
  // `n_keys` keys (n_moe_layers * n_expert), at most `capacity` of them queued at once.
  SwapQueue(size_t n_keys, size_t capacity);

  SwapState state(size_t key) const { return state_[key]; }
  size_t n_queued() const { return fifo_.size() - head_; }
  // The oldest queued key; n_queued() > 0.
  size_t front() const { return static_cast<size_t>(fifo_[head_]); }

  // Appends `key` (state none) to the FIFO: queued.
  void push(size_t key);
  // The oldest queued key leaves the FIFO as its read starts: in_flight.
  void start_front();
  // Its read landed (in_flight): none.
  void landed(size_t key);
  // A queued `key` leaves the FIFO, wherever it is, and becomes none; false (and nothing changes) when it is not
  // queued.
  bool remove(size_t key);
  // A landed `key` (none) a fetch waited for: taken, until release().
  void take(size_t key);
  // A taken `key` becomes none; false (and nothing changes) when it is not taken.
  bool release(size_t key);

 private:
  std::vector<SwapState> state_;  // [n_keys]
  std::vector<int32_t> fifo_;     // queued keys, oldest first, in [head_, size()); capacity `capacity`
  size_t head_ = 0;               // keys before it have started
};

}  // namespace moetier::moe
