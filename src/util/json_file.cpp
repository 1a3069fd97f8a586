#include "util/json_file.h"

#include <fstream>
#include <iterator>
#include <string>

#include "util/error.h"

namespace moetier::util {

nlohmann::json read_json_lenient(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open {}", path.string());
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (char& ch : text) {
    if (static_cast<unsigned char>(ch) >= 0x80) ch = '?';
  }
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail("{} is not valid JSON: {}", path.string(), e.what());
  }
}

}  // namespace moetier::util
