// The open files of a (possibly split) model, for reads that bypass the mapping: expert streaming and the dense
// weights' anonymous copy.
//
// Each shard is opened twice: with O_DIRECT (reads skip the page cache, so streamed experts do not push the
// cache's own memory out, and the kernel does not double-buffer them) and buffered. At open, direct and buffered
// reads of a few windows of every shard (first, middle and last page-aligned window) are compared; when O_DIRECT
// is refused (EINVAL on tmpfs or overlay file systems), fails, or returns different bytes, every read uses the
// buffered descriptor instead and direct_note() says why. Direct reads need 4096-byte aligned offsets, lengths
// and addresses (io::kPage); buffered reads accept the same windows, so callers never care which is active.
// A window may end at the end of a file that ends mid-page: rounding its length up to a page would ask for bytes
// past the end of the file, so it is clipped there instead and its unaligned tail is read buffered (next_chunk).
//
// Thread-safety: after construction everything is read-only; pread on the descriptors is safe from any thread.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace moetier::moe::io {

struct FileOptions {
  bool direct = true;  // false = the `no_odirect` option: buffered pread only
  // Receives one line when direct I/O falls back to buffered reads (with the reason). May be empty.
  std::function<void(std::string_view)> log;
};

class ModelFiles {
 public:
  ModelFiles() = default;
  // Opens every path read-only. Throws moetier::Error naming the file when one cannot be opened or stat'ed.
  ModelFiles(const std::vector<std::filesystem::path>& paths, const FileOptions& opts);
  ModelFiles(ModelFiles&& o) noexcept;
  ModelFiles& operator=(ModelFiles&& o) noexcept;
  ModelFiles(const ModelFiles&) = delete;
  ModelFiles& operator=(const ModelFiles&) = delete;
  ~ModelFiles();

  size_t count() const { return files_.size(); }
  const std::filesystem::path& path(uint32_t f) const { return files_[f].path; }
  uint64_t size(uint32_t f) const { return files_[f].size; }  // bytes, as found at open
  int buffered_fd(uint32_t f) const { return files_[f].buffered_fd; }
  bool direct() const { return direct_; }
  // "direct I/O" or "buffered pread (REASON)", for the start log.
  const std::string& direct_note() const { return note_; }

  // One read of a window: `len` bytes at the window's unread part [pos, pos + left) of file `f`, through `fd`.
  struct Chunk {
    int fd = -1;
    uint64_t len = 0;
  };
  // The next read of a window whose unread part is [pos, pos + left): through the direct descriptor for its
  // whole pages when direct() and pos is page-aligned, otherwise (a tail shorter than a page, which only the
  // window that ends at the end of the file has) through the buffered one. The read engines and read_window
  // issue every read through it, so no read asks for bytes past the end of the file.
  Chunk next_chunk(uint32_t f, uint64_t pos, uint64_t left) const;

  // Reads [offset, offset + len) of file `f` into dst (offset and dst kPage-aligned when direct(), and len too
  // unless the window ends at the end of the file), retrying short reads; returns the bytes read, which are fewer
  // than len only at the end of the file. Throws moetier::Error naming the file and offset on a read error.
  uint64_t read_window(uint32_t f, uint64_t offset, uint64_t len, uint8_t* dst) const;

  // A sentence for a read of `want` bytes at `offset` of file `f` that returned `result` (bytes, or -errno):
  // names the file and the offset, and says whether the file is now shorter than at open or was replaced.
  std::string describe_failure(uint32_t f, uint64_t offset, uint64_t want, int64_t result) const;

  // Throws moetier::Error naming the file when a file changed since it was opened: its path is gone or names
  // another file (replaced), its size changed, or it was written in place (its modification time moved). Reads
  // of bytes rewritten in place succeed, so without this check they would feed other weights to the model.
  // An fstat and a stat per file (a few microseconds); the streaming store calls it once per forward pass.
  void check_unchanged() const;

 private:
  struct File {
    std::filesystem::path path;
    uint64_t size = 0;
    uint64_t dev = 0, ino = 0;  // identity at open, to tell a replaced file from a truncated one
    int64_t mtime_ns = 0;       // modification time at open (ns since the epoch), to see writes in place
    int direct_fd = -1;
    int buffered_fd = -1;
  };
  // Empty when direct and buffered reads of `f` agree; otherwise why direct I/O cannot be used.
  std::string probe_direct(uint32_t f) const;
  void close_all() noexcept;

  std::vector<File> files_;
  bool direct_ = false;
  std::string note_;
};

}  // namespace moetier::moe::io
