#include "moe/io/uring_reader.h"

#include <cassert>
#include <cerrno>
#include <cstring>

#include "util/error.h"

namespace moetier::moe::io {

namespace {
constexpr uint64_t kMaxChunk = uint64_t{1} << 30;  // bytes per kernel read: io_uring's length is 32-bit
}

UringReader::UringReader(const ModelFiles& files, const EngineOptions& opts, size_t capacity)
    : files_(files), lanes_(opts.lanes), fail_read_(opts.fail_read), entries_(capacity), pending_(capacity),
      ready_(capacity) {
  if (opts.lanes < 1) fail("read lanes must be at least 1, got {}", opts.lanes);
  const int rc = io_uring_queue_init(static_cast<unsigned>(opts.lanes), &ring_, 0);
  if (rc < 0) fail("io_uring setup failed: {}", std::strerror(-rc));
  free_.reserve(capacity);
  for (size_t i = capacity; i-- > 0;) free_.push_back(static_cast<uint32_t>(i));
}

UringReader::~UringReader() {
  // Reads still in the kernel would write into memory the owner is about to free: reap them first.
  while (in_kernel_ > 0) {
    io_uring_cqe* cqe = nullptr;
    if (io_uring_wait_cqe(&ring_, &cqe) < 0) break;
    io_uring_cqe_seen(&ring_, cqe);
    --in_kernel_;
  }
  io_uring_queue_exit(&ring_);
}

void UringReader::submit(const ReadOp& op) {
  assert(!free_.empty() && "more reads outstanding than the engine's capacity");
  const uint32_t i = free_.back();
  free_.pop_back();
  Entry& e = entries_[i];
  e.op = op;
  e.got = 0;
  e.inject_failure = submitted_++ == fail_read_;
  ++outstanding_;
  pending_[(pending_head_ + pending_n_++) % pending_.size()] = i;
  start_pending();
}

void UringReader::start_pending() {
  bool any = false;
  while (pending_n_ > 0 && in_kernel_ < lanes_) {
    const uint32_t i = pending_[pending_head_];
    pending_head_ = (pending_head_ + 1) % pending_.size();
    --pending_n_;
    Entry& e = entries_[i];
    e.start = std::chrono::steady_clock::now();
    if (e.inject_failure) {
      ready_[(ready_head_ + ready_n_++) % ready_.size()] = ReadDone{e.op.tag, -EIO, 0.0};
      free_.push_back(i);
      continue;
    }
    start(i);
    any = true;
  }
  if (any) io_uring_submit(&ring_);
}

void UringReader::start(uint32_t i) {
  Entry& e = entries_[i];
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  assert(sqe != nullptr && "ring depth equals the lane count, so a free lane has a free sqe");
  const ModelFiles::Chunk c = files_.next_chunk(e.op.file, e.op.offset + e.got, e.op.length - e.got);
  const uint64_t n = std::min(c.len, kMaxChunk);  // kMaxChunk is whole pages, so a direct chunk stays aligned
  io_uring_prep_read(sqe, c.fd, e.op.dst + e.got, static_cast<unsigned>(n), e.op.offset + e.got);
  io_uring_sqe_set_data64(sqe, i);
  ++in_kernel_;
}

ReadDone UringReader::wait() {
  assert(outstanding_ > 0);
  ReadDone d;
  next(true, d);
  return d;
}

bool UringReader::try_wait(ReadDone& done) {
  if (outstanding_ == 0) return false;
  return next(false, done);
}

bool UringReader::next(bool block, ReadDone& out) {
  for (;;) {
    if (ready_n_ > 0) {
      const ReadDone d = ready_[ready_head_];
      ready_head_ = (ready_head_ + 1) % ready_.size();
      --ready_n_;
      --outstanding_;
      out = d;
      return true;
    }
    io_uring_cqe* cqe = nullptr;
    const int rc = block ? io_uring_wait_cqe(&ring_, &cqe) : io_uring_peek_cqe(&ring_, &cqe);
    if (!block && rc == -EAGAIN) return false;  // nothing has completed yet
    if (rc == -EINTR) continue;
    if (rc < 0) fail("io_uring wait failed: {}", std::strerror(-rc));
    const auto i = static_cast<uint32_t>(io_uring_cqe_get_data64(cqe));
    const int res = cqe->res;
    io_uring_cqe_seen(&ring_, cqe);
    --in_kernel_;
    Entry& e = entries_[i];
    bool finished = true;
    int64_t result = 0;
    if (res == -EAGAIN || res == -EINTR) {
      finished = false;  // retry the same range
    } else if (res < 0) {
      result = res;
    } else {
      e.got += static_cast<uint64_t>(res);
      finished = res == 0 || e.got >= e.op.length;  // 0 = end of file
      result = static_cast<int64_t>(e.got);
    }
    if (!finished) {
      start(i);
      io_uring_submit(&ring_);
      continue;
    }
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - e.start).count();
    const ReadDone d{e.op.tag, result, ms};  // before the entry is reused by start_pending
    free_.push_back(i);
    start_pending();
    --outstanding_;
    out = d;
    return true;
  }
}

}  // namespace moetier::moe::io
