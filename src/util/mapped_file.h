// RAII read-only memory mapping of a whole file.
//
// The mapping is MAP_PRIVATE + PROT_READ: pages are faulted in lazily, so mapping a 100 GB model costs address
// space, not memory. Errors (cannot open, not a regular file, mmap failure) throw moetier::Error naming the file
// and the system's reason. An empty file maps to {nullptr, 0}.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>

namespace moetier {

class MappedFile {
 public:
  MappedFile() = default;
  static MappedFile open(const std::filesystem::path& path);
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }  // bytes
  std::span<const uint8_t> bytes() const { return {data_, static_cast<size_t>(size_)}; }
  const std::filesystem::path& path() const { return path_; }
  bool is_mapped() const { return data_ != nullptr; }

 private:
  void reset() noexcept;
  std::filesystem::path path_;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

// Maps every page of [begin, begin + bytes) of a read-only file mapping now, reading from the drive what the page
// cache lacks, so later accesses take no page faults: what a resident model wants (llama.cpp maps with
// MAP_POPULATE by default for the same reason; faulting 17 GB of experts in 4 KiB pages during decode cost
// more than the products). Uses madvise(MADV_POPULATE_READ) (Linux 5.14+), else reads one byte per page.
// Returns the seconds it took. Read errors of the file surface as SIGBUS, as for any mapped access.
double prefault_pages(const uint8_t* begin, uint64_t bytes);

// Unmaps the whole pages inside [begin, begin + bytes) of a read-only file mapping from this process
// (madvise(MADV_DONTNEED)), for bytes it reads no more, such as weights it now holds a repacked copy of: they leave
// its RSS and become clean page cache that no process maps, so the copy takes their place in the process. With
// `evict`, first asks the kernel to drop them from the page cache as well (MADV_PAGEOUT, Linux 5.4+; it skips files
// the caller neither owns nor may write): for RAM that cannot hold the copy beside them, where leaving them to the
// kernel's reclaim measured slower than no copy (docs/design.md: the reclaim ran during the products), at the price
// of the next run reading them from the drive. The range stays mapped; a later access maps the page again. Returns
// false where the kernel refused to unmap (the pages then stay mapped).
bool release_pages(const uint8_t* begin, uint64_t bytes, bool evict);

}  // namespace moetier
