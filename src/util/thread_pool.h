// A fixed set of worker threads, created once at setup, that run one parallel job at a time.
//
// The calling thread takes part as thread 0, so ThreadPool(1) spawns nothing and run() is a plain call. Jobs are
// passed by reference (no std::function, no allocation per run), so the decode loop can use the pool freely.
// Thread-safety: run() may be called from one thread at a time (the owner of the pool, e.g. the model's forward
// pass); it is not reentrant (a job must not call run() on the same pool). Jobs must not throw.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace moetier::util {

class ThreadPool {
 public:
  // n_threads >= 1 threads in all, the caller included (asserted; validate user input before).
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_; }

  // Calls f(i) for every i in [0, size()) concurrently, i = 0 on the calling thread; returns when all returned.
  template <class F>
  void run(F&& f) {
    if (n_ == 1) {
      f(0);
      return;
    }
    run_raw([](void* ctx, int i) { (*static_cast<std::remove_reference_t<F>*>(ctx))(i); }, &f);
  }

 private:
  using Job = void (*)(void* ctx, int thread);
  void run_raw(Job job, void* ctx);
  void worker_loop(int thread);

  int n_ = 1;
  std::vector<std::thread> workers_;  // [n_ - 1]: threads 1 .. n_-1
  Job job_ = nullptr;                 // the current job; written before gen_ is bumped (release)
  void* ctx_ = nullptr;
  std::atomic<uint64_t> gen_{0};      // bumped once per run(); workers wait on it
  std::atomic<int> pending_{0};       // workers still running the current job
  std::atomic<bool> stop_{false};
};

}  // namespace moetier::util
