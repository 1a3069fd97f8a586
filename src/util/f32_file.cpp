#include "util/f32_file.h"

#include <fstream>

#include "util/error.h"

namespace moetier::util {

void write_f32(const std::filesystem::path& path, std::span<const float> v) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail("cannot create {}", path.string());
  out.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size_bytes()));
  if (!out) fail("error writing {}", path.string());
}

std::vector<float> read_f32(const std::filesystem::path& path) {
  // A directory opens as a stream whose size reads as 2^63 - 1: refuse it by name first.
  if (std::filesystem::is_directory(path)) fail("{}: is a directory, not a float32 file", path.string());
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) fail("cannot open {}", path.string());
  const std::streamoff end = in.tellg();
  if (end < 0) fail("{}: cannot tell its size (not a regular file?)", path.string());
  const auto size = static_cast<size_t>(end);
  if (size % sizeof(float) != 0) fail("{} has {} bytes, not a whole number of float32 values", path.string(), size);
  std::vector<float> v(size / sizeof(float));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(size));
  if (!in) fail("error reading {}", path.string());
  return v;
}

}  // namespace moetier::util
