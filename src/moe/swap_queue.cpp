#include "moe/swap_queue.h"

#include <algorithm>
#include <cassert>

namespace moetier::moe {

SwapQueue::SwapQueue(size_t n_keys, size_t capacity) : state_(n_keys, SwapState::none) { fifo_.reserve(capacity); }

void SwapQueue::push(size_t key) {
  assert(state_[key] == SwapState::none);
  // The started prefix still occupies the buffer: drop it when the buffer is full, so push_back never
  // reallocates (the queued keys alone never exceed the capacity).
  if (fifo_.size() == fifo_.capacity() && head_ > 0) {
    fifo_.erase(fifo_.begin(), fifo_.begin() + static_cast<std::ptrdiff_t>(head_));
    head_ = 0;
  }
  assert(fifo_.size() < fifo_.capacity() && "more keys queued than the capacity");
  fifo_.push_back(static_cast<int32_t>(key));
  state_[key] = SwapState::queued;
}

void SwapQueue::start_front() {
  assert(n_queued() > 0);
  const size_t key = front();
  assert(state_[key] == SwapState::queued);
  state_[key] = SwapState::in_flight;
  if (++head_ == fifo_.size()) {
    fifo_.clear();  // keeps the capacity
    head_ = 0;
  }
}

void SwapQueue::landed(size_t key) {
  assert(state_[key] == SwapState::in_flight);
  state_[key] = SwapState::none;
}

bool SwapQueue::remove(size_t key) {
  if (state_[key] != SwapState::queued) return false;
  const auto it = std::find(fifo_.begin() + static_cast<std::ptrdiff_t>(head_), fifo_.end(), static_cast<int32_t>(key));
  assert(it != fifo_.end() && "a queued key is in the FIFO");
  fifo_.erase(it);  // within the reserved capacity: no allocation
  state_[key] = SwapState::none;
  return true;
}

void SwapQueue::take(size_t key) {
  assert(state_[key] == SwapState::none);
  state_[key] = SwapState::taken;
}

bool SwapQueue::release(size_t key) {
  if (state_[key] != SwapState::taken) return false;
  state_[key] = SwapState::none;
  return true;
}

}  // namespace moetier::moe
