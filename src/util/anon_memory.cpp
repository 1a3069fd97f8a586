#include "util/anon_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "util/error.h"

namespace moetier::util {

namespace {

size_t page_bytes() {
  static const size_t page = [] {
    const long n = ::sysconf(_SC_PAGESIZE);
    return n > 0 ? static_cast<size_t>(n) : size_t{4096};
  }();
  return page;
}

size_t mapped_bytes(size_t bytes) { return (bytes + page_bytes() - 1) / page_bytes() * page_bytes(); }

}  // namespace

uint8_t* map_anonymous(size_t bytes, const char* what) {
  if (bytes > SIZE_MAX - 2 * kHugePageBytes) fail("cannot allocate {} bytes for the {}: too large", bytes, what);
  const size_t n = mapped_bytes(bytes);
  // Below 2 MiB no extent could take a huge page: as mmap gives it. Above, a mapping one huge page less a page longer
  // holds a 2 MiB-aligned start; the ends around [start, start + n) are unmapped at once.
  const size_t span = n < kHugePageBytes ? n : n + kHugePageBytes - page_bytes();
  void* p = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) fail("cannot allocate {} bytes for the {}: {}", n, what, std::strerror(errno));
  auto* base = static_cast<uint8_t*>(p);
  if (span == n) return base;
  const uintptr_t b = reinterpret_cast<uintptr_t>(base);
  auto* start = reinterpret_cast<uint8_t*>((b + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes);
  if (start > base) ::munmap(base, static_cast<size_t>(start - base));
  if (uint8_t* end = start + n; end < base + span) ::munmap(end, static_cast<size_t>(base + span - end));
  // Best effort: EINVAL where the kernel has no transparent huge pages; small pages then serve. The whole buffer, a
  // partial last extent included (the kernel puts no huge page past the mapping's end): advising part of it would
  // split the mapping in two, and mremap before Linux 6.17 moves only a range within one (moe/dense_weights.cpp).
  ::madvise(start, n, MADV_HUGEPAGE);
  return start;
}

void unmap_anonymous(uint8_t* p, size_t bytes) {
  if (p != nullptr) ::munmap(p, mapped_bytes(bytes));
}

}  // namespace moetier::util
