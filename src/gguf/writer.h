// Streaming GGUF writer (version 3): key/values and tensor infos first, then tensor data written in order with
// alignment padding, in constant memory — `synth` writes tens of GB through it, and tests write deliberately
// broken files and split shards with it.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "gguf/gguf.h"

namespace moetier::gguf {

struct TensorSpec {
  std::string name;
  quant::GgmlType type = quant::GgmlType::F32;
  std::vector<int64_t> ne;  // GGUF order
  uint64_t n_bytes() const;
};

class GgufWriter {
 public:
  // Opens `path` for writing (truncates). `alignment` (bytes, a nonzero multiple of 8 that fits uint32, as the
  // reader accepts, so a split of a 24-aligned file keeps 24) becomes general.alignment when not 32, and overrides
  // any general.alignment in the metadata. Throws moetier::Error naming the file when it cannot be created.
  GgufWriter(const std::filesystem::path& path, uint64_t alignment = 32);
  // Without finish() the partial file is removed: a crash-free error path never leaves a truncated model behind.
  ~GgufWriter();
  GgufWriter(const GgufWriter&) = delete;
  GgufWriter& operator=(const GgufWriter&) = delete;

  // Declare everything before the first write_tensor_data. add_tensor throws on a duplicate name, n_dims outside
  // 1..4, a negative dimension or ne[0] not a multiple of the type's block size.
  void set_metadata(const Metadata& md);
  void add_tensor(const TensorSpec& spec);
  // Writes the header. Called implicitly by the first write_tensor_data.
  void write_header();
  // Append the next declared tensor's bytes (in declaration order); may be called several times per tensor with
  // consecutive chunks. Throws if more bytes than declared are written.
  void write_tensor_data(std::span<const uint8_t> bytes);
  // Pads, checks every declared byte was written, flushes and closes. Throws moetier::Error on any I/O error.
  void finish();
  uint64_t bytes_written() const { return pos_; }

 private:
  void write_raw(const void* p, size_t n);
  void pad_to_alignment();
  void skip_empty_tensors();
  std::filesystem::path path_;
  std::FILE* f_ = nullptr;
  uint64_t alignment_;
  Metadata md_;
  std::vector<TensorSpec> specs_;
  std::vector<uint64_t> offsets_;  // of each tensor in the data section, bytes
  std::vector<uint64_t> sizes_;    // of each tensor, bytes
  bool finished_ = false;
  bool header_written_ = false;
  size_t cur_ = 0;            // tensor being written
  uint64_t cur_written_ = 0;  // bytes of it written so far
  uint64_t pos_ = 0;
  uint64_t data_start_ = 0;
};

// Rewrite `src` as `n_shards` split files STEM-0000k-of-0000N.gguf in `out_dir` (created if needed), tensors
// distributed in order, by bytes, at least one per shard. Layout as gguf-split writes it: every shard carries
// split.no (uint16, 0-based), split.count (uint16) and split.tensors.count (int32); the first shard also carries all
// of the model's metadata (existing split.* keys replaced). `src` must be opened with map_data. Data passes through
// in chunks (constant memory). Throws moetier::Error when n_shards is outside 1..min(65535, tensor count) or on I/O
// errors. Returns the shard paths in order.
std::vector<std::filesystem::path> write_split(const GgufModel& src, const std::filesystem::path& out_dir,
                                               const std::string& stem, int n_shards);

}  // namespace moetier::gguf
