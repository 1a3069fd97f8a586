// Host-to-device copies on the transfer queue through a ring of staging pieces: the CPU fills one piece while the
// copy engine drains the pieces filled before it, so a copy of many megabytes takes about the longer of the memcpy
// and the transfer instead of their sum. With one 16 MiB piece, filled and then waited for, the VRAM tier's slot
// writes ran at 6.4 GB/s on an H100 (8.2 GiB in 1.3 s of a 128-token run, on the compute thread): about the sum of
// a memcpy into host-visible memory and the PCIe transfer, each alone faster.
#pragma once

#include <array>
#include <cstdint>

#include <vulkan/vulkan_raii.hpp>

#include "gpu/vulkan/buffer.h"
#include "gpu/vulkan/context.h"

namespace moetier::gpu::vk_impl {

class UploadRing {
 public:
  static constexpr int kPieces = 4;
  static constexpr uint64_t kPieceBytes = uint64_t{8} << 20;  // per submission: ~0.3 ms at 25 GB/s

  // Submissions go to device's transfer queue, their command buffers from `pool` (of the transfer family), and
  // each signals the next value of `done`: a later submission that waits for done's value() is ordered after
  // every copy queued here. The staging memory (kPieces * kPieceBytes, host-visible) is allocated at the first
  // copy. Throws vk::SystemError when the command buffers cannot be allocated.
  UploadRing(const Device& device, const vk::raii::CommandPool& pool, Timeline& done);
  ~UploadRing();
  UploadRing(const UploadRing&) = delete;
  UploadRing& operator=(const UploadRing&) = delete;

  // Queues src[bytes] to dst at dst_offset, in pieces, submitting each piece as it fills (not waited for). The
  // copy is rounded up to whole 4-byte words: up to 3 staging bytes past src's end land in dst's padding (buffers
  // are rounded up to words, slots to 256 bytes). src may be reused as soon as this returns.
  void copy(const uint8_t* src, uint64_t bytes, const vk::Buffer& dst, uint64_t dst_offset);
  // Submits the piece being filled, if any.
  void submit();
  // submit(), then waits until every copy queued so far has landed. Throws moetier::Error for a lost device or a
  // submission not finished within Timeline::wait's 60 s; after such a failure every later copy() and wait_all()
  // throws at once, and the destructor waits for nothing (a hung device is waited for once, not by every cleanup).
  void wait_all();

 private:
  // done_.wait(value), or a throw at once after a wait that failed.
  void wait_for(uint64_t value);

  struct Piece {
    vk::raii::CommandBuffer cmd{nullptr};
    uint64_t signal = 0;  // the value its last submission signals; 0: never submitted
  };
  const Device& device_;
  Timeline& done_;
  Buffer stage_;  // kPieces pieces of kPieceBytes
  std::array<Piece, kPieces> pieces_;
  int current_ = 0;    // the piece being filled
  uint64_t used_ = 0;  // its staging bytes in use
  bool open_ = false;  // its command buffer is recording
  uint64_t last_ = 0;  // the value the last submission signals
  bool failed_ = false;  // a wait threw: the device is lost or hung
};

}  // namespace moetier::gpu::vk_impl
