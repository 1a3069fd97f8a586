// The adaptive tier's swap queue: keys start in FIFO order, a queued key can be taken over from anywhere in the
// queue, a landed key can be held as taken, and the queue reuses its buffer without growing past its capacity.
#include <deque>

#include <gtest/gtest.h>

#include "moe/swap_queue.h"

namespace moetier::moe {
namespace {

TEST(SwapQueue, KeysStartInFifoOrderAndLand) {
  SwapQueue q(10, 4);
  EXPECT_EQ(q.n_queued(), 0u);
  for (size_t k : {7u, 2u, 5u}) q.push(k);
  EXPECT_EQ(q.n_queued(), 3u);
  EXPECT_EQ(q.state(2), SwapState::queued);
  EXPECT_EQ(q.state(3), SwapState::none);
  EXPECT_EQ(q.front(), 7u);
  q.start_front();
  EXPECT_EQ(q.state(7), SwapState::in_flight);
  EXPECT_EQ(q.front(), 2u);
  q.start_front();
  q.start_front();
  EXPECT_EQ(q.n_queued(), 0u);
  for (size_t k : {7u, 2u, 5u}) {
    EXPECT_EQ(q.state(k), SwapState::in_flight);
    q.landed(k);
    EXPECT_EQ(q.state(k), SwapState::none);
  }
}

TEST(SwapQueue, RemoveTakesAQueuedKeyOverFromAnywhere) {
  SwapQueue q(10, 4);
  for (size_t k : {1u, 2u, 3u}) q.push(k);
  EXPECT_TRUE(q.remove(2));
  EXPECT_EQ(q.state(2), SwapState::none);
  EXPECT_FALSE(q.remove(2));  // no longer queued
  EXPECT_FALSE(q.remove(9));  // never queued
  q.start_front();
  EXPECT_FALSE(q.remove(1));  // in flight: its read cannot be taken back
  EXPECT_EQ(q.state(1), SwapState::in_flight);
  EXPECT_EQ(q.n_queued(), 1u);
  EXPECT_EQ(q.front(), 3u);
}

TEST(SwapQueue, ALandedKeyIsTakenUntilReleased) {
  SwapQueue q(4, 2);
  q.push(3);
  q.start_front();
  q.landed(3);
  q.take(3);
  EXPECT_EQ(q.state(3), SwapState::taken);
  EXPECT_FALSE(q.remove(3));
  EXPECT_TRUE(q.release(3));
  EXPECT_EQ(q.state(3), SwapState::none);
  EXPECT_FALSE(q.release(3));
  q.push(3);  // a released key can be queued again
  EXPECT_EQ(q.state(3), SwapState::queued);
}

TEST(SwapQueue, KeepsFifoOrderWhileItsBufferIsReused) {
  // Capacity 3, many keys cycled through (started from the front, some removed from the middle or the back):
  // the order always matches a plain FIFO's, however often the started prefix is dropped.
  SwapQueue q(100, 3);
  std::deque<size_t> want;
  size_t next = 0;
  for (int round = 0; round < 40; ++round) {
    while (want.size() < 3) {
      q.push(next);
      want.push_back(next++);
    }
    if (round % 3 == 0) {  // the middle one leaves
      EXPECT_TRUE(q.remove(want[1]));
      want.erase(want.begin() + 1);
    }
    ASSERT_EQ(q.n_queued(), want.size());
    ASSERT_EQ(q.front(), want.front()) << "round " << round;
    q.start_front();
    q.landed(want.front());
    want.pop_front();
  }
  while (!want.empty()) {
    ASSERT_EQ(q.front(), want.front());
    q.start_front();
    want.pop_front();
  }
  EXPECT_EQ(q.n_queued(), 0u);
}

}  // namespace
}  // namespace moetier::moe
