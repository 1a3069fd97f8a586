#include "util/mapped_file.h"

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

}  // namespace moetier
