// Streaming GGUF v3 writer: header first, then tensor data chunk by chunk, each tensor padded to the alignment.
#include "gguf/writer.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

#include "util/error.h"

namespace moetier::gguf {

namespace {
constexpr uint64_t kDefaultAlignment = 32;
uint64_t align_up(uint64_t x, uint64_t a) { return x + (a - x % a) % a; }
}  // namespace

uint64_t TensorSpec::n_bytes() const {
  if (ne.empty()) fail("tensor '{}' has no dimensions", name);
  if (ne[0] < 0) fail("tensor '{}' has a negative dimension {}", name, ne[0]);
  uint64_t bytes = quant::row_bytes(type, ne[0]);
  for (size_t i = 1; i < ne.size(); ++i)
    if (ne[i] < 0 || __builtin_mul_overflow(bytes, static_cast<uint64_t>(ne[i]), &bytes))
      fail("tensor '{}' byte size overflows uint64 or has a negative dimension", name);
  return bytes;
}

GgufWriter::GgufWriter(const std::filesystem::path& path, uint64_t alignment) : path_(path), alignment_(alignment) {
  if (alignment == 0 || alignment % 8 != 0 || alignment > std::numeric_limits<uint32_t>::max())
    fail("{}: alignment {} is not a nonzero multiple of 8 that fits uint32", path.string(), alignment);
  f_ = std::fopen(path.c_str(), "wb");
  if (f_ == nullptr) fail("{}: cannot create for writing: {}", path.string(), std::strerror(errno));
}

GgufWriter::~GgufWriter() {
  if (f_ != nullptr) std::fclose(f_);
  // Only a regular file is a partial model: a device written to (/dev/full, /dev/null) stays, even as root.
  std::error_code ec;
  if (!finished_ && std::filesystem::is_regular_file(path_, ec)) std::filesystem::remove(path_, ec);
}

void GgufWriter::set_metadata(const Metadata& md) {
  if (header_written_) fail("{}: metadata set after the header was written", path_.string());
  md_ = md;
}

void GgufWriter::add_tensor(const TensorSpec& spec) {
  if (header_written_) fail("{}: tensor '{}' added after the header was written", path_.string(), spec.name);
  if (spec.ne.empty() || spec.ne.size() > 4)
    fail("{}: tensor '{}' has {} dimensions, expected 1..4", path_.string(), spec.name, spec.ne.size());
  uint64_t elems = 1;
  for (int64_t x : spec.ne) {
    if (x < 0) fail("{}: tensor '{}' has a negative dimension {}", path_.string(), spec.name, x);
    if (__builtin_mul_overflow(elems, static_cast<uint64_t>(x), &elems) ||
        elems > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail("{}: tensor '{}' element count overflows int64", path_.string(), spec.name);
  }
  for (const auto& s : specs_)
    if (s.name == spec.name) fail("{}: duplicate tensor name '{}'", path_.string(), spec.name);
  uint64_t bytes = 0;
  try {
    bytes = spec.n_bytes();
  } catch (const Error& e) {
    fail("{}: tensor '{}': {}", path_.string(), spec.name, e.what());
  }
  const uint64_t offset = specs_.empty() ? 0 : align_up(offsets_.back() + sizes_.back(), alignment_);
  specs_.push_back(spec);
  offsets_.push_back(offset);
  sizes_.push_back(bytes);
}

void GgufWriter::write_raw(const void* p, size_t n) {
  if (f_ == nullptr) fail("{}: write after the file was closed", path_.string());
  if (n == 0) return;
  if (std::fwrite(p, 1, n, f_) != n)
    fail("{}: write of {} bytes failed at byte {}: {}", path_.string(), n, pos_, std::strerror(errno));
  pos_ += n;
}

namespace {

// Appends raw little-endian bytes (resize + memcpy rather than insert: GCC 12 at -O3 reports a false
// -Wstringop-overflow for small vector inserts).
void put_bytes(std::vector<uint8_t>& out, const void* p, size_t n) {
  if (n == 0) return;
  const size_t at = out.size();
  out.resize(at + n);
  std::memcpy(out.data() + at, p, n);
}

template <class T>
void put(std::vector<uint8_t>& out, T x) {
  put_bytes(out, &x, sizeof(T));
}

void put_string(std::vector<uint8_t>& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  put_bytes(out, s.data(), s.size());
}

// Serialises a value's payload (no type tag) as its stored type.
void put_value(std::vector<uint8_t>& out, const Value& v, std::string_view key) {
  switch (v.type) {
    case ValueType::UINT8: put(out, static_cast<uint8_t>(v.as_uint())); break;
    case ValueType::INT8: put(out, static_cast<int8_t>(v.as_int())); break;
    case ValueType::UINT16: put(out, static_cast<uint16_t>(v.as_uint())); break;
    case ValueType::INT16: put(out, static_cast<int16_t>(v.as_int())); break;
    case ValueType::UINT32: put(out, static_cast<uint32_t>(v.as_uint())); break;
    case ValueType::INT32: put(out, static_cast<int32_t>(v.as_int())); break;
    case ValueType::UINT64: put(out, v.as_uint()); break;
    case ValueType::INT64: put(out, v.as_int()); break;
    case ValueType::FLOAT32: put(out, static_cast<float>(v.as_double())); break;
    case ValueType::FLOAT64: put(out, v.as_double()); break;
    case ValueType::BOOL: put<uint8_t>(out, v.as_bool() ? 1 : 0); break;
    case ValueType::STRING: put_string(out, v.as_string()); break;
    case ValueType::ARRAY: {
      const auto& a = v.as_array();
      put(out, static_cast<uint32_t>(v.elem_type));
      put<uint64_t>(out, a.size());
      for (const Value& e : a) {
        if (e.type != v.elem_type)
          fail("metadata key '{}': array element of type {} in an array of {}", key, value_type_name(e.type),
               value_type_name(v.elem_type));
        put_value(out, e, key);
      }
      break;
    }
  }
}

}  // namespace

void GgufWriter::write_header() {
  if (header_written_) return;
  if (alignment_ != kDefaultAlignment || md_.has("general.alignment"))
    md_.set("general.alignment", Value::of_uint32(static_cast<uint32_t>(alignment_)));
  // The header is small next to the data (metadata and tensor infos, at most tens of MB for big vocabularies);
  // it is assembled per entry and written through.
  std::vector<uint8_t> buf;
  put<uint32_t>(buf, 0x46554747);  // "GGUF"
  put<uint32_t>(buf, 3);
  put<uint64_t>(buf, specs_.size());
  put<uint64_t>(buf, md_.size());
  write_raw(buf.data(), buf.size());
  for (const auto& [key, value] : md_.entries()) {
    buf.clear();
    put_string(buf, key);
    put(buf, static_cast<uint32_t>(value.type));
    try {
      put_value(buf, value, key);
    } catch (const Error& e) {
      fail("{}: {}", path_.string(), e.what());
    }
    write_raw(buf.data(), buf.size());
  }
  for (size_t i = 0; i < specs_.size(); ++i) {
    buf.clear();
    put_string(buf, specs_[i].name);
    put(buf, static_cast<uint32_t>(specs_[i].ne.size()));
    for (int64_t x : specs_[i].ne) put(buf, static_cast<uint64_t>(x));
    put(buf, static_cast<uint32_t>(specs_[i].type));
    put(buf, offsets_[i]);
    write_raw(buf.data(), buf.size());
  }
  pad_to_alignment();
  data_start_ = pos_;
  header_written_ = true;
  skip_empty_tensors();
}

void GgufWriter::pad_to_alignment() {
  static constexpr std::array<uint8_t, 4096> kZeros{};
  uint64_t pad = align_up(pos_, alignment_) - pos_;
  while (pad > 0) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(pad, kZeros.size()));
    write_raw(kZeros.data(), n);
    pad -= n;
  }
}

void GgufWriter::skip_empty_tensors() {
  while (cur_ < specs_.size() && sizes_[cur_] == 0) ++cur_;
}

void GgufWriter::write_tensor_data(std::span<const uint8_t> bytes) {
  if (!header_written_) write_header();
  while (!bytes.empty()) {
    if (cur_ >= specs_.size())
      fail("{}: {} bytes of tensor data beyond the {} declared tensors", path_.string(), bytes.size(), specs_.size());
    const uint64_t need = sizes_[cur_] - cur_written_;
    const size_t take = static_cast<size_t>(std::min<uint64_t>(need, bytes.size()));
    write_raw(bytes.data(), take);
    bytes = bytes.subspan(take);
    cur_written_ += take;
    if (cur_written_ == sizes_[cur_]) {
      // ggml pads after every tensor, the last one included.
      pad_to_alignment();
      ++cur_;
      cur_written_ = 0;
      skip_empty_tensors();
    }
  }
}

void GgufWriter::finish() {
  if (finished_) return;
  if (!header_written_) write_header();
  if (cur_ < specs_.size())
    fail("{}: tensor '{}' received {} of its {} bytes before finish()", path_.string(), specs_[cur_].name,
         cur_written_, sizes_[cur_]);
  std::FILE* f = std::exchange(f_, nullptr);
  const bool flushed = std::fflush(f) == 0;
  const int err = errno;
  if (std::fclose(f) != 0 || !flushed)
    fail("{}: flushing {} bytes failed: {}", path_.string(), pos_, std::strerror(flushed ? errno : err));
  finished_ = true;
}

}  // namespace moetier::gguf
