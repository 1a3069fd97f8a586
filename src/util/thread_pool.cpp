#include "util/thread_pool.h"

#include <cassert>

namespace moetier::util {

namespace {
// Polls before sleeping on a futex: a decode step issues over a thousand products (~50-500 us each) separated by
// short serial work (norms, routing, activation quantization), and a futex wake costs several microseconds plus
// the scheduler's latency, so the workers spin about 100 us before sleeping. Measured on the 2-core machine
// (Qwen3-30B-A3B-shaped Q4_K_M, -t 2): 2000 polls (~1 us) decoded 4.1 tok/s, 100000 polls 4.5 tok/s.
constexpr int kSpinPolls = 100000;
}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_(n_threads) {
  assert(n_threads >= 1);
  workers_.reserve(static_cast<size_t>(n_ - 1));
  for (int i = 1; i < n_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_relaxed);
  gen_.fetch_add(1, std::memory_order_release);
  gen_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_raw(Job job, void* ctx) {
  job_ = job;
  ctx_ = ctx;
  pending_.store(n_ - 1, std::memory_order_relaxed);
  gen_.fetch_add(1, std::memory_order_release);  // publishes job_, ctx_, pending_
  gen_.notify_all();
  job(ctx, 0);
  for (int spin = 0;; ++spin) {
    const int p = pending_.load(std::memory_order_acquire);
    if (p == 0) break;
    if (spin >= kSpinPolls) pending_.wait(p, std::memory_order_acquire);
  }
}

void ThreadPool::worker_loop(int thread) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t g = gen_.load(std::memory_order_acquire);
    for (int spin = 0; g == seen; ++spin) {
      if (spin >= kSpinPolls) gen_.wait(seen, std::memory_order_acquire);
      g = gen_.load(std::memory_order_acquire);
    }
    seen = g;
    if (stop_.load(std::memory_order_relaxed)) return;
    job_(ctx_, thread);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
  }
}

}  // namespace moetier::util
