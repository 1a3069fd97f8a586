// Number formatting shared by the CLI's human-readable output.
#pragma once

#include <cstdint>
#include <string>

#include <fmt/format.h>

namespace moetier::cli {

// 1536 -> "1.5 KiB"; binary units, as memory and file sizes are reported throughout moetier.
inline std::string human_bytes(uint64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", b) : fmt::format("{:.1f} {}", v, units[u]);
}

}  // namespace moetier::cli
