#include "moe/io/anon_buffer.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "util/error.h"

namespace moetier::moe::io {

AnonBuffer::AnonBuffer(uint64_t bytes, const char* what) {
  if (bytes == 0) return;
  const uint64_t n = round_up(bytes, kPage);
  void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) fail("cannot allocate {} bytes for the {}: {}", n, what, std::strerror(errno));
  data_ = static_cast<uint8_t*>(p);
  size_ = n;
}

AnonBuffer::AnonBuffer(AnonBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}

AnonBuffer& AnonBuffer::operator=(AnonBuffer&& o) noexcept {
  if (this != &o) {
    if (data_ != nullptr) munmap(data_, size_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

AnonBuffer::~AnonBuffer() {
  if (data_ != nullptr) munmap(data_, size_);
}

uint8_t* AnonBuffer::release() {
  size_ = 0;
  return std::exchange(data_, nullptr);
}

}  // namespace moetier::moe::io
