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

}  // namespace moetier
