// Raw float32 files: the values back to back in the host's byte order (little-endian on every target moetier
// builds for), no header; the shape is the caller's (logits are [n_rows, n_vocab]). `eval --logits-out` writes
// them; `eval --kl-base` and the oracle tests (reference logits) read them.
#pragma once

#include <filesystem>
#include <span>
#include <vector>

namespace moetier::util {

// Throws moetier::Error naming the file when it cannot be created or written.
void write_f32(const std::filesystem::path& path, std::span<const float> v);

// Throws moetier::Error naming the file when it is a directory, cannot be read or its size is not a multiple of
// 4 bytes.
std::vector<float> read_f32(const std::filesystem::path& path);

}  // namespace moetier::util
