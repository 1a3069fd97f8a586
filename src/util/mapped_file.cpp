#include "util/mapped_file.h"

#include <chrono>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "util/error.h"

namespace moetier {

MappedFile MappedFile::open(const std::filesystem::path& path) {
  MappedFile m;
  m.path_ = path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("{}: cannot open for reading: {}", path.string(), std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    fail("{}: cannot stat: {}", path.string(), std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("{}: not a regular file", path.string());
  }
  m.size_ = static_cast<uint64_t>(st.st_size);
  if (m.size_ > 0) {
    void* p = ::mmap(nullptr, static_cast<size_t>(m.size_), PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      fail("{}: cannot mmap {} bytes: {}", path.string(), m.size_, std::strerror(err));
    }
    m.data_ = static_cast<const uint8_t*>(p);
  }
  // The mapping keeps the file referenced; the descriptor is not needed any more.
  ::close(fd);
  return m;
}

MappedFile::MappedFile(MappedFile&& o) noexcept
    : path_(std::move(o.path_)), data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    reset();
    path_ = std::move(o.path_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

MappedFile::~MappedFile() { reset(); }

void MappedFile::reset() noexcept {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), static_cast<size_t>(size_));
  data_ = nullptr;
  size_ = 0;
}

double prefault_pages(const uint8_t* begin, uint64_t bytes) {
  const auto t0 = std::chrono::steady_clock::now();
  if (bytes == 0) return 0.0;
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t b = reinterpret_cast<uintptr_t>(begin) / page * page;
  const uintptr_t e = reinterpret_cast<uintptr_t>(begin) + bytes;
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22  // Linux 5.14 uapi value; older headers lack it, older kernels answer EINVAL
#endif
  if (::madvise(reinterpret_cast<void*>(b), e - b, MADV_POPULATE_READ) != 0) {
    volatile uint8_t sink = 0;  // keeps the page reads
    for (uintptr_t p = b; p < e; p += page) sink = sink + *reinterpret_cast<const volatile uint8_t*>(p);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

bool release_pages(const uint8_t* begin, uint64_t bytes, bool evict) {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t b = (reinterpret_cast<uintptr_t>(begin) + page - 1) / page * page;
  const uintptr_t e = (reinterpret_cast<uintptr_t>(begin) + bytes) / page * page;
  if (e <= b) return true;
#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21  // Linux 5.4 uapi value; older headers lack it, older kernels answer EINVAL
#endif
  // Best effort: where the kernel refuses, the unmapped pages are still the first it reclaims.
  if (evict) (void)::madvise(reinterpret_cast<void*>(b), e - b, MADV_PAGEOUT);
  return ::madvise(reinterpret_cast<void*>(b), e - b, MADV_DONTNEED) == 0;
}

}  // namespace moetier
