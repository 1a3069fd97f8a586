#include "moe/io/pread_pool.h"

#include <unistd.h>

#include <cassert>
#include <cerrno>
#include <chrono>
#include <system_error>

#include "util/error.h"

namespace moetier::moe::io {

PreadPool::PreadPool(const ModelFiles& files, const EngineOptions& opts, size_t capacity)
    : files_(files), fail_read_(opts.fail_read), todo_(capacity), done_(capacity) {
  if (opts.lanes < 1) fail("read lanes must be at least 1, got {}", opts.lanes);
  try {
    for (int i = 0; i < opts.lanes; ++i) threads_.emplace_back([this] { lane(); });
  } catch (const std::system_error& e) {
    {
      std::lock_guard lk(mu_);
      stop_ = true;
    }
    work_cv_.notify_all();
    for (auto& t : threads_) t.join();
    fail("cannot start {} read threads: {}", opts.lanes, e.what());
  }
}

PreadPool::~PreadPool() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void PreadPool::submit(const ReadOp& op) {
  const bool inject = submitted_++ == fail_read_;
  {
    std::lock_guard lk(mu_);
    assert(todo_n_ < todo_.size() && "more reads outstanding than the engine's capacity");
    todo_[(todo_head_ + todo_n_++) % todo_.size()] = Queued{op, inject};
  }
  ++outstanding_;
  work_cv_.notify_one();
}

ReadDone PreadPool::wait() {
  assert(outstanding_ > 0);
  std::unique_lock lk(mu_);
  done_cv_.wait(lk, [this] { return done_n_ > 0; });
  const ReadDone d = done_[done_head_];
  done_head_ = (done_head_ + 1) % done_.size();
  --done_n_;
  --outstanding_;
  return d;
}

bool PreadPool::try_wait(ReadDone& done) {
  if (outstanding_ == 0) return false;
  std::lock_guard lk(mu_);
  if (done_n_ == 0) return false;
  done = done_[done_head_];
  done_head_ = (done_head_ + 1) % done_.size();
  --done_n_;
  --outstanding_;
  return true;
}

void PreadPool::lane() {
  for (;;) {
    Queued q;
    {
      std::unique_lock lk(mu_);
      work_cv_.wait(lk, [this] { return stop_ || todo_n_ > 0; });
      if (stop_) return;
      q = todo_[todo_head_];
      todo_head_ = (todo_head_ + 1) % todo_.size();
      --todo_n_;
    }
    const auto t0 = std::chrono::steady_clock::now();
    int64_t result = 0;
    if (q.inject_failure) {
      result = -EIO;
    } else {
      uint64_t got = 0;
      while (got < q.op.length) {
        const ModelFiles::Chunk c = files_.next_chunk(q.op.file, q.op.offset + got, q.op.length - got);
        const ssize_t r = ::pread(c.fd, q.op.dst + got, c.len, static_cast<off_t>(q.op.offset + got));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
          result = -errno;
          break;
        }
        if (r == 0) break;  // end of file
        got += static_cast<uint64_t>(r);
      }
      if (result == 0) result = static_cast<int64_t>(got);
    }
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    {
      std::lock_guard lk(mu_);
      done_[(done_head_ + done_n_++) % done_.size()] = ReadDone{q.op.tag, result, ms};
    }
    done_cv_.notify_one();
  }
}

}  // namespace moetier::moe::io
