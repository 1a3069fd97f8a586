// ReadEngine over one io_uring (liburing): up to `lanes` reads in flight in the kernel, the rest queued here;
// submission and completion both happen on the calling thread, so there are no threads and no locks.
#pragma once

#include <liburing.h>

#include <chrono>
#include <vector>

#include "moe/io/read_engine.h"

namespace moetier::moe::io {

class UringReader final : public ReadEngine {
 public:
  // Throws moetier::Error with the kernel's reason when the ring cannot be created.
  UringReader(const ModelFiles& files, const EngineOptions& opts, size_t capacity);
  ~UringReader() override;  // waits for reads still in the kernel (they target the caller's memory)
  UringReader(const UringReader&) = delete;
  UringReader& operator=(const UringReader&) = delete;

  void submit(const ReadOp& op) override;
  ReadDone wait() override;
  bool try_wait(ReadDone& done) override;
  size_t outstanding() const override { return outstanding_; }
  EngineKind kind() const override { return EngineKind::uring; }
  int lanes() const override { return lanes_; }

 private:
  struct Entry {
    ReadOp op;
    uint64_t got = 0;  // bytes read so far (short reads are resubmitted for the rest)
    bool inject_failure = false;
    std::chrono::steady_clock::time_point start;
  };
  void start(uint32_t entry);          // puts the entry's remaining bytes into the kernel
  void start_pending();                // starts queued entries while lanes are free
  // One completion into `out`: blocking (wait) or not (try_wait; false when none has completed).
  bool next(bool block, ReadDone& out);

  const ModelFiles& files_;
  int lanes_;
  int64_t fail_read_;
  int64_t submitted_ = 0;
  io_uring ring_{};
  std::vector<Entry> entries_;      // [capacity]
  std::vector<uint32_t> free_;      // free entry indices (stack)
  std::vector<uint32_t> pending_;   // ring of entries waiting for a lane
  size_t pending_head_ = 0, pending_n_ = 0;
  int in_kernel_ = 0;               // reads submitted to the ring and not yet reaped
  size_t outstanding_ = 0;
  std::vector<ReadDone> ready_;     // completions found while reaping (injected failures), ring
  size_t ready_head_ = 0, ready_n_ = 0;
};

}  // namespace moetier::moe::io
