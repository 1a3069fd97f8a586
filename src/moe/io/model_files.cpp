#include "moe/io/model_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "moe/io/anon_buffer.h"
#include "util/error.h"

namespace moetier::moe::io {

namespace {

int64_t mtime_ns(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + static_cast<int64_t>(st.st_mtim.tv_nsec);
}

}  // namespace

ModelFiles::ModelFiles(const std::vector<std::filesystem::path>& paths, const FileOptions& opts) {
  files_.reserve(paths.size());
  for (const auto& p : paths) {
    File f;
    f.path = p;
    f.buffered_fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    if (f.buffered_fd < 0) {
      const int err = errno;
      close_all();
      fail("cannot open {} for reading: {}", p.string(), std::strerror(err));
    }
    struct stat st {};
    if (fstat(f.buffered_fd, &st) != 0) {
      const int err = errno;
      ::close(f.buffered_fd);
      close_all();
      fail("cannot stat {}: {}", p.string(), std::strerror(err));
    }
    f.size = static_cast<uint64_t>(st.st_size);
    f.dev = static_cast<uint64_t>(st.st_dev);
    f.ino = static_cast<uint64_t>(st.st_ino);
    f.mtime_ns = mtime_ns(st);
    files_.push_back(std::move(f));
  }

  std::string reason;
  if (!opts.direct) reason = "no_odirect option";
  for (uint32_t i = 0; i < files_.size() && reason.empty(); ++i) {
    File& f = files_[i];
    f.direct_fd = ::open(f.path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
    if (f.direct_fd < 0) {
      reason = fmt::format("O_DIRECT open of {} refused: {}", f.path.string(), std::strerror(errno));
      break;
    }
    reason = probe_direct(i);
  }
  direct_ = reason.empty();
  note_ = direct_ ? std::string("direct I/O") : fmt::format("buffered pread ({})", reason);
  if (!direct_ && opts.direct && opts.log) opts.log(fmt::format("expert reads fall back to {}", note_));
}

ModelFiles::ModelFiles(ModelFiles&& o) noexcept
    : files_(std::move(o.files_)), direct_(o.direct_), note_(std::move(o.note_)) {
  o.files_.clear();
}

ModelFiles& ModelFiles::operator=(ModelFiles&& o) noexcept {
  if (this != &o) {
    close_all();
    files_ = std::move(o.files_);
    o.files_.clear();
    direct_ = o.direct_;
    note_ = std::move(o.note_);
  }
  return *this;
}

ModelFiles::~ModelFiles() { close_all(); }

void ModelFiles::close_all() noexcept {
  for (File& f : files_) {
    if (f.direct_fd >= 0) ::close(f.direct_fd);
    if (f.buffered_fd >= 0) ::close(f.buffered_fd);
    f.direct_fd = f.buffered_fd = -1;
  }
  files_.clear();
}

namespace {

// pread until `len` bytes, end of file (short count) or an error (-errno).
int64_t pread_full(int fd, uint64_t offset, uint64_t len, uint8_t* dst) {
  uint64_t done = 0;
  while (done < len) {
    const ssize_t r = ::pread(fd, dst + done, len - done, static_cast<off_t>(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    if (r == 0) break;
    done += static_cast<uint64_t>(r);
  }
  return static_cast<int64_t>(done);
}

}  // namespace

std::string ModelFiles::probe_direct(uint32_t i) const {
  const File& f = files_[i];
  constexpr uint64_t kWindow = 64 * 1024;  // bytes per probe: a few pages, cheap at open
  AnonBuffer a(kWindow, "direct I/O probe"), b(kWindow, "direct I/O probe");
  // Whole pages only, none past the end of the file: what direct reads are asked for (see next_chunk).
  const uint64_t pages_end = round_down(f.size, kPage);
  const uint64_t last = pages_end > kWindow ? pages_end - kWindow : 0;
  for (const uint64_t off : {uint64_t{0}, round_down(f.size / 2, kPage), last}) {
    const uint64_t len = std::min(kWindow, pages_end - std::min(off, pages_end));
    if (len == 0) continue;
    const int64_t rd = pread_full(f.direct_fd, off, len, a.data());
    if (rd < 0) {
      return fmt::format("O_DIRECT read of {} at offset {} failed: {}", f.path.string(), off,
                         std::strerror(static_cast<int>(-rd)));
    }
    const int64_t rb = pread_full(f.buffered_fd, off, len, b.data());
    if (rb < 0) {
      fail("cannot read {} at offset {}: {}", f.path.string(), off, std::strerror(static_cast<int>(-rb)));
    }
    if (rd != rb || std::memcmp(a.data(), b.data(), static_cast<size_t>(rb)) != 0) {
      return fmt::format("direct and buffered reads of {} at offset {} differ", f.path.string(), off);
    }
  }
  return {};
}

ModelFiles::Chunk ModelFiles::next_chunk(uint32_t f, uint64_t pos, uint64_t left) const {
  const File& file = files_[f];
  if (direct_ && pos % kPage == 0 && left >= kPage) return {file.direct_fd, round_down(left, kPage)};
  return {file.buffered_fd, left};
}

uint64_t ModelFiles::read_window(uint32_t f, uint64_t offset, uint64_t len, uint8_t* dst) const {
  uint64_t done = 0;
  while (done < len) {
    const Chunk c = next_chunk(f, offset + done, len - done);
    const int64_t r = pread_full(c.fd, offset + done, c.len, dst + done);
    if (r < 0) fail("{}", describe_failure(f, offset + done, c.len, r));
    done += static_cast<uint64_t>(r);
    if (static_cast<uint64_t>(r) < c.len) break;  // end of file
  }
  return done;
}

std::string ModelFiles::describe_failure(uint32_t fi, uint64_t offset, uint64_t want, int64_t result) const {
  const File& f = files_[fi];
  std::string what = result < 0 ? fmt::format("failed: {}", std::strerror(static_cast<int>(-result)))
                                 : fmt::format("returned {} of {} bytes", result, want);
  std::string why;
  struct stat st {};
  if (::stat(f.path.c_str(), &st) != 0) {
    why = "; the file is gone";
  } else if (static_cast<uint64_t>(st.st_dev) != f.dev || static_cast<uint64_t>(st.st_ino) != f.ino) {
    why = "; the file was replaced while in use";
  } else if (static_cast<uint64_t>(st.st_size) < f.size) {
    why = fmt::format("; the file was truncated from {} to {} bytes while in use", f.size,
                      static_cast<uint64_t>(st.st_size));
  }
  return fmt::format("read of {} at offset {} ({} bytes) {}{}", f.path.string(), offset, want, what, why);
}

void ModelFiles::check_unchanged() const {
  for (const File& f : files_) {
    struct stat now {};
    std::string why;
    if (::stat(f.path.c_str(), &now) != 0) {
      why = errno == ENOENT ? std::string("is gone") : fmt::format("cannot be stat'ed ({})", std::strerror(errno));
    } else if (static_cast<uint64_t>(now.st_dev) != f.dev || static_cast<uint64_t>(now.st_ino) != f.ino) {
      why = "was replaced by another file";
    } else if (fstat(f.buffered_fd, &now) != 0) {
      why = fmt::format("cannot be stat'ed ({})", std::strerror(errno));
    } else if (static_cast<uint64_t>(now.st_size) != f.size) {
      why = fmt::format("changed size from {} to {} bytes", f.size, static_cast<uint64_t>(now.st_size));
    } else if (mtime_ns(now) != f.mtime_ns) {
      why = "was written to (its modification time changed)";
    }
    if (!why.empty()) {
      fail("model file {} {} while in use: generation stopped, since the weights read may be mixed; restart to "
           "load the file as it is now",
           f.path.string(), why);
    }
  }
}

}  // namespace moetier::moe::io
