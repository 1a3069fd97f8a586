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

// Asks the kernel to drop the whole pages inside [begin, begin + bytes) of a read-only file mapping from memory
// (madvise(MADV_PAGEOUT), Linux 5.4+): for bytes the process reads no more, such as weights it now holds a
// repacked copy of, so that the copy takes the place of the file's pages in RAM instead of doubling them. Clean
// pages leave the page cache unless another process maps them; a later access would read them again. Returns
// false where the kernel refused (before 5.4: the pages stay cached and reclaimable, as any file page).
bool release_pages(const uint8_t* begin, uint64_t bytes);

}  // namespace moetier
