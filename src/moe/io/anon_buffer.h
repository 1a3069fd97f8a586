// Page-aligned anonymous memory for direct I/O: slots of the expert cache and the dense weights' anonymous copy.
//
// Allocated by util::map_anonymous (page-aligned, what O_DIRECT needs; from 2 MiB on, in transparent huge pages where
// the kernel has them) and returned to the system only when the buffer is destroyed. Pages are committed lazily by
// the kernel on first write; nothing here decommits them, so a slot reused after eviction costs no page faults.
// Not thread-safe to move or destroy while reads target it; concurrent writes to disjoint ranges (one read lane per
// slot region) are fine.
#pragma once

#include <cstddef>
#include <cstdint>

namespace moetier::moe::io {

inline constexpr uint64_t kPage = 4096;  // bytes: the alignment of every direct read (offset, length, address)

inline constexpr uint64_t round_down(uint64_t x, uint64_t a) { return x / a * a; }
inline constexpr uint64_t round_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

class AnonBuffer {
 public:
  AnonBuffer() = default;
  // `bytes` is rounded up to whole pages. Throws moetier::Error (with the size and the system's reason) when the
  // mapping fails. `what` names the buffer in that message ("expert cache", "dense weights").
  AnonBuffer(uint64_t bytes, const char* what);
  AnonBuffer(AnonBuffer&& o) noexcept;
  AnonBuffer& operator=(AnonBuffer&& o) noexcept;
  AnonBuffer(const AnonBuffer&) = delete;
  AnonBuffer& operator=(const AnonBuffer&) = delete;
  ~AnonBuffer();

  uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }  // bytes, a multiple of kPage
  // Hands the mapping over to the caller (who must munmap it); the buffer becomes empty.
  uint8_t* release();

 private:
  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace moetier::moe::io
