#include "util/text_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <system_error>

#include "util/error.h"

namespace moetier::util {

std::string read_text_file(const std::filesystem::path& path, std::string_view what, size_t max_bytes) {
  const std::string p = path.string();
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (st.type() == std::filesystem::file_type::not_found) fail("{} {}: no such file", what, p);
  if (st.type() == std::filesystem::file_type::directory) fail("{} {}: is a directory, not a file", what, p);
  const std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(p.c_str(), "rb"), &std::fclose);
  if (!f) fail("{} {}: cannot open: {}", what, p, std::strerror(errno));
  std::string text;
  char buf[65536];
  while (true) {
    const size_t n = std::fread(buf, 1, sizeof buf, f.get());
    text.append(buf, n);
    if (text.size() > max_bytes) fail("{} {}: larger than {} bytes, which is not a plausible input", what, p, max_bytes);
    if (n < sizeof buf) break;
  }
  if (std::ferror(f.get()) != 0) fail("{} {}: error reading: {}", what, p, std::strerror(errno));
  return text;
}

}  // namespace moetier::util
