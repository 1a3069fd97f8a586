// ReadEngine over a pool of threads, one per lane, each calling pread(2) on one window at a time.
#pragma once

#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "moe/io/read_engine.h"

namespace moetier::moe::io {

class PreadPool final : public ReadEngine {
 public:
  // Starts `opts.lanes` threads. `files` must outlive the pool.
  PreadPool(const ModelFiles& files, const EngineOptions& opts, size_t capacity);
  ~PreadPool() override;  // stops the lanes after their current read (outstanding reads are abandoned)

  void submit(const ReadOp& op) override;
  ReadDone wait() override;
  bool try_wait(ReadDone& done) override;
  size_t outstanding() const override { return outstanding_; }
  EngineKind kind() const override { return EngineKind::pread_pool; }
  int lanes() const override { return static_cast<int>(threads_.size()); }

 private:
  void lane();

  struct Queued {
    ReadOp op;
    bool inject_failure = false;
  };
  const ModelFiles& files_;
  int64_t fail_read_;
  int64_t submitted_ = 0;   // reads submitted so far (for the fault hook); caller thread only
  size_t outstanding_ = 0;  // caller thread only
  // Guarded by mu_: fixed rings of `capacity` entries.
  std::mutex mu_;
  std::condition_variable work_cv_;  // lanes wait for work
  std::condition_variable done_cv_;  // the caller waits for completions
  std::vector<Queued> todo_;
  size_t todo_head_ = 0, todo_n_ = 0;
  std::vector<ReadDone> done_;
  size_t done_head_ = 0, done_n_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace moetier::moe::io
