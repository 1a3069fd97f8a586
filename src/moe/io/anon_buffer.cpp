#include "moe/io/anon_buffer.h"

#include <utility>

#include "util/anon_memory.h"

namespace moetier::moe::io {

AnonBuffer::AnonBuffer(uint64_t bytes, const char* what) {
  if (bytes == 0) return;
  size_ = round_up(bytes, kPage);
  data_ = util::map_anonymous(size_, what);
}

AnonBuffer::AnonBuffer(AnonBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}

AnonBuffer& AnonBuffer::operator=(AnonBuffer&& o) noexcept {
  if (this != &o) {
    util::unmap_anonymous(data_, size_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

AnonBuffer::~AnonBuffer() {
  util::unmap_anonymous(data_, size_);
}

uint8_t* AnonBuffer::release() {
  size_ = 0;
  return std::exchange(data_, nullptr);
}

}  // namespace moetier::moe::io
