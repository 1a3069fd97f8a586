// Reading the tokenizer test-vector files of ../shared/tokenizer (format: ../shared/tokenizer/README.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace moetier::test {

inline std::string read_bytes(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) {
    ADD_FAILURE() << "cannot read " << p;
    return {};
  }
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// .inp: strings each followed by "\n__ggml_vocab_test__\n" (the newline before the separator is not part of
// the string, so "\n\n__ggml..." is the string "\n" and an empty string is a bare separator).
inline std::vector<std::string> read_inputs(const std::filesystem::path& p) {
  const std::string raw = read_bytes(p);
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < raw.size()) {
    const size_t hit = raw.find(sep, pos);
    if (hit == std::string::npos) {
      out.push_back(raw.substr(pos));
      break;
    }
    out.push_back(raw.substr(pos, hit - pos));
    pos = hit + sep.size();
  }
  return out;
}

// .out: one line of space-separated ids per input string.
inline std::vector<std::vector<int32_t>> read_outputs(const std::filesystem::path& p) {
  const std::string raw = read_bytes(p);
  std::vector<std::vector<int32_t>> out;
  std::istringstream lines(raw);
  std::string line;
  while (std::getline(lines, line)) {
    std::vector<int32_t> ids;
    std::istringstream words(line);
    long long id = 0;
    while (words >> id) ids.push_back(static_cast<int32_t>(id));
    out.push_back(std::move(ids));
  }
  return out;
}

}  // namespace moetier::test
