#include "gpu/vulkan/upload_ring.h"

#include <algorithm>
#include <cstring>

#include "util/error.h"

namespace moetier::gpu::vk_impl {

UploadRing::UploadRing(const Device& device, const vk::raii::CommandPool& pool, Timeline& done)
    : device_(device), done_(done) {
  vk::raii::CommandBuffers cmds(device.get(),
                                vk::CommandBufferAllocateInfo(*pool, vk::CommandBufferLevel::ePrimary, kPieces));
  for (int i = 0; i < kPieces; ++i) pieces_[static_cast<size_t>(i)].cmd = std::move(cmds[static_cast<size_t>(i)]);
}

UploadRing::~UploadRing() {
  try {
    // The staging memory and the command buffers must outlive their copies.
    if (last_ != 0 && !failed_) done_.wait(last_);
  } catch (...) {  // a lost device: nothing left to wait for
  }
}

void UploadRing::wait_for(uint64_t value) {
  if (failed_) fail("Vulkan: an earlier copy to the GPU did not finish (the device is lost or hung)");
  try {
    done_.wait(value);
  } catch (...) {
    failed_ = true;
    throw;
  }
}

void UploadRing::copy(const uint8_t* src, uint64_t bytes, const vk::Buffer& dst, uint64_t dst_offset) {
  if (stage_.bytes() == 0) stage_ = Buffer(device_, kPieces * kPieceBytes, BufferKind::staging, "uploads");
  for (uint64_t done = 0; done < bytes;) {
    if (used_ == kPieceBytes) submit();
    Piece& p = pieces_[static_cast<size_t>(current_)];
    if (!open_) {
      if (p.signal != 0) wait_for(p.signal);  // its last copies have read the staging bytes about to be reused
      p.cmd.reset();
      p.cmd.begin(vk::CommandBufferBeginInfo(vk::CommandBufferUsageFlagBits::eOneTimeSubmit));
      open_ = true;
    }
    const uint64_t n = std::min(kPieceBytes - used_, bytes - done);
    const uint64_t at = static_cast<uint64_t>(current_) * kPieceBytes + used_;
    std::memcpy(stage_.mapped() + at, src + done, n);
    // Whole words; used_ stays a multiple of 16, so the rounded copy stays inside the piece.
    p.cmd.copyBuffer(*stage_.get(), dst, vk::BufferCopy(at, dst_offset + done, (n + 3) & ~uint64_t{3}));
    used_ = std::min(kPieceBytes, (used_ + n + 15) & ~uint64_t{15});
    done += n;
  }
}

void UploadRing::submit() {
  if (!open_) return;
  Piece& p = pieces_[static_cast<size_t>(current_)];
  // The piece is closed whatever happens: a failed end or submit drops its copies (the device is lost then) and
  // leaves done's counter where it was, so no later wait is for a value that nothing signals.
  open_ = false;
  used_ = 0;
  p.cmd.end();
  const uint64_t signal = done_.value() + 1;
  const vk::Semaphore sem = *done_.semaphore();
  vk::TimelineSemaphoreSubmitInfo ti({}, signal);
  const vk::CommandBuffer cmd = *p.cmd;
  vk::SubmitInfo si({}, {}, cmd, sem);
  si.pNext = &ti;
  device_.transfer_queue().submit(si);
  done_.next();
  p.signal = signal;
  last_ = signal;
  current_ = (current_ + 1) % kPieces;
}

void UploadRing::wait_all() {
  submit();
  if (last_ != 0) wait_for(last_);
}

}  // namespace moetier::gpu::vk_impl
