// Byte-level GGUF builder for tests: writes exactly what it is told, including invalid files, so each hostile
// case below is one readable sequence of fields.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <initializer_list>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gguf/gguf.h"
#include "util/error.h"

namespace moetier::gguf::test_raw {

struct RawGguf {
  std::vector<uint8_t> b;
  // Every number written most significant byte first, as a big-endian GGUF file stores them (the magic stays
  // "GGUF": it is four bytes, not a number).
  bool big_endian = false;

  RawGguf& u8(uint8_t x) { b.push_back(x); return *this; }
  RawGguf& u16(uint16_t x) { return num(x, 2); }
  RawGguf& u32(uint32_t x) { return num(x, 4); }
  RawGguf& u64(uint64_t x) { return num(x, 8); }
  RawGguf& str(const std::string& s) {
    u64(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  RawGguf& header(uint32_t n_tensors_v, uint64_t n_kv, uint32_t version = 3) {
    b.insert(b.end(), {'G', 'G', 'U', 'F'});
    return u32(version).u64(n_tensors_v).u64(n_kv);
  }
  RawGguf& kv_string(const std::string& k, const std::string& v) { return str(k).u32(8).str(v); }
  RawGguf& kv_u32(const std::string& k, uint32_t v) { return str(k).u32(4).u32(v); }
  RawGguf& kv_u16(const std::string& k, uint16_t v) { return str(k).u32(2).u16(v); }
  RawGguf& kv_i32(const std::string& k, int32_t v) { return str(k).u32(5).u32(static_cast<uint32_t>(v)); }
  // A string array (type 9 of type 8), as tokenizer.ggml.tokens is stored.
  RawGguf& kv_strings(const std::string& k, const std::vector<std::string>& v) {
    str(k).u32(9).u32(8).u64(v.size());
    for (const auto& x : v) str(x);
    return *this;
  }
  // name, ne (GGUF order), type id, offset in the data section.
  RawGguf& tensor(const std::string& name, const std::vector<uint64_t>& ne, uint32_t type, uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(ne.size()));
    for (uint64_t x : ne) u64(x);
    return u32(type).u64(offset);
  }
  RawGguf& pad(size_t alignment = 32) {
    while (b.size() % alignment != 0) b.push_back(0);
    return *this;
  }
  RawGguf& zeros(size_t n) {
    b.insert(b.end(), n, 0);
    return *this;
  }
  size_t size() const { return b.size(); }

  void write(const std::filesystem::path& p, size_t truncate_at = SIZE_MAX) const {
    std::FILE* f = std::fopen(p.c_str(), "wb");
    if (f == nullptr) return;
    const size_t n = std::min(truncate_at, b.size());
    if (n > 0) std::fwrite(b.data(), 1, n, f);
    std::fclose(f);
  }

 private:
  RawGguf& num(uint64_t x, int n) {
    for (int i = 0; i < n; ++i) b.push_back(static_cast<uint8_t>(x >> (8 * (big_endian ? n - 1 - i : i))));
    return *this;
  }
};

// Opening `p` throws an Error whose message names the file and contains every word in `words`.
inline void expect_open_error(const std::filesystem::path& p, std::initializer_list<std::string> words) {
  SCOPED_TRACE(p.filename().string());
  try {
    GgufModel::open(p);
    ADD_FAILURE() << "expected an Error opening " << p;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(p.filename().string()), std::string::npos) << "message does not name the file: " << msg;
    for (const auto& w : words) EXPECT_NE(msg.find(w), std::string::npos) << "missing '" << w << "' in: " << msg;
  }
}

}  // namespace moetier::gguf::test_raw
