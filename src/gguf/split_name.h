// File naming of split models, as gguf-split writes them: PREFIX-%05d-of-%05d.gguf with a 1-based shard number
// (llama.cpp's llama_split_path). split.no inside shard k is k-1.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace moetier::gguf {

inline constexpr const char* kSplitNo = "split.no";                      // uint16, 0-based shard index
inline constexpr const char* kSplitCount = "split.count";                // uint16, number of shards
inline constexpr const char* kSplitTensorsCount = "split.tensors.count";  // int32, tensors over all shards

struct SplitName {
  std::filesystem::path prefix;  // directory and stem before "-0000k-of-0000N.gguf"
  int number = 0;                // 1-based
  int count = 0;
};

// nullopt when the file name does not follow the pattern.
std::optional<SplitName> parse_split_name(const std::filesystem::path& path);

// PREFIX-0000k-of-0000N.gguf for 1-based k.
std::filesystem::path split_file_name(const std::filesystem::path& prefix, int number, int count);

}  // namespace moetier::gguf
