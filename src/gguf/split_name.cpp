#include "gguf/split_name.h"

#include <fmt/format.h>

namespace moetier::gguf {
namespace {

// Parses exactly 5 decimal digits (gguf-split pads to 5; counts are uint16 so never need more).
std::optional<int> digits5(std::string_view s) {
  if (s.size() != 5) return std::nullopt;
  int v = 0;
  for (char ch : s) {
    if (ch < '0' || ch > '9') return std::nullopt;
    v = v * 10 + (ch - '0');
  }
  return v;
}

}  // namespace

std::optional<SplitName> parse_split_name(const std::filesystem::path& path) {
  const std::string file = path.filename().string();
  // "-00001-of-00003.gguf" is 20 characters.
  constexpr size_t kSuffix = 20;
  if (file.size() <= kSuffix) return std::nullopt;
  const std::string_view tail = std::string_view(file).substr(file.size() - kSuffix);
  if (tail[0] != '-' || tail.substr(6, 4) != "-of-" || tail.substr(15) != ".gguf") return std::nullopt;
  const auto k = digits5(tail.substr(1, 5));
  const auto n = digits5(tail.substr(10, 5));
  if (!k || !n || *k < 1 || *n < 1 || *k > *n) return std::nullopt;
  return SplitName{path.parent_path() / file.substr(0, file.size() - kSuffix), *k, *n};
}

std::filesystem::path split_file_name(const std::filesystem::path& prefix, int number, int count) {
  return prefix.parent_path() / fmt::format("{}-{:05d}-of-{:05d}.gguf", prefix.filename().string(), number, count);
}

}  // namespace moetier::gguf
