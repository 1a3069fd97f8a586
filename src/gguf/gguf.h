// Reading GGUF model files (versions 2 and 3), including split models, with validation before use.
//
// Format source: the GGUF specification, ggml docs/gguf.md. Layout: magic "GGUF", uint32 version, uint64
// tensor_count, uint64 metadata_kv_count (uint32 counts in v1, which is refused), the key/value pairs, the tensor
// infos (name, n_dims, ne[n_dims] as uint64, uint32 type, uint64 offset), padding to general.alignment (default
// 32; any nonzero multiple of 8, not necessarily a power of two), then the tensor data section; a tensor's bytes
// start at data_section + offset. Little-endian only: a big-endian file is refused as such. The tensor count must
// match the tensor infos present (a count too large runs into the padding, one too small leaves an info where the
// padding should be: both are refused, naming the count).
// Split models (gguf-split): shards NAME-00001-of-0000N.gguf each carry split.no (uint16, 0-based), split.count
// (uint16) and split.tensors.count (int32, total over all shards); each shard holds its own tensor infos and data.
//
// Every validation failure throws moetier::Error naming the file, the byte offset or the tensor, and what was
// expected. Nothing in this module aborts on bad input.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "quant/ggml_type.h"

namespace moetier::gguf {

// Metadata value types, as numbered by the specification.
// Spelled as the specification spells them (GGUF_TYPE_UINT8 -> UINT8), not in lower_snake_case: the format's names.
enum class ValueType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6, BOOL = 7, STRING = 8,
  ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};
std::string_view value_type_name(ValueType t);

// One metadata value. Scalars are widened (unsigned -> uint64_t, signed -> int64_t, floats -> double) but `type`
// keeps the stored type so writers can round-trip a file exactly. Arrays hold their elements (which may be
// arrays: nested arrays are legal GGUF) and `elem_type`.
struct Value {
  ValueType type = ValueType::UINT8;
  ValueType elem_type = ValueType::UINT8;  // only for ARRAY
  std::variant<uint64_t, int64_t, double, bool, std::string, std::vector<Value>> v;

  bool is_array() const { return type == ValueType::ARRAY; }
  bool is_string() const { return type == ValueType::STRING; }
  bool is_integer() const;
  bool is_float() const { return type == ValueType::FLOAT32 || type == ValueType::FLOAT64; }
  // Conversions throw moetier::Error (without a key; Metadata's getters add it) on a type mismatch or an
  // integer that does not fit.
  int64_t as_int() const;
  uint64_t as_uint() const;
  double as_double() const;  // integers convert too
  bool as_bool() const;
  const std::string& as_string() const;
  const std::vector<Value>& as_array() const;
  std::string to_display(size_t max_elems = 8) const;  // short human-readable form for `inspect`

  static Value of_uint8(uint8_t x);
  static Value of_uint16(uint16_t x);  // split.no, split.count are uint16
  static Value of_uint32(uint32_t x);
  static Value of_int32(int32_t x);
  static Value of_uint64(uint64_t x);
  static Value of_int64(int64_t x);
  static Value of_float32(float x);
  static Value of_float64(double x);
  static Value of_bool(bool x);
  static Value of_string(std::string s);
  static Value of_array(ValueType elem_type, std::vector<Value> elems);
};
// Same stored type (and element type for arrays) and same contents.
bool operator==(const Value& a, const Value& b);

// Ordered key -> value map (file order kept for round-trips and display).
class Metadata {
 public:
  const Value* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }
  // Getters throw moetier::Error "metadata key 'K' is missing" / "has type T, expected ..." naming the key.
  const Value& get(std::string_view key) const;
  uint64_t get_uint(std::string_view key) const;
  int64_t get_int(std::string_view key) const;
  double get_float(std::string_view key) const;
  bool get_bool(std::string_view key) const;
  const std::string& get_string(std::string_view key) const;
  std::vector<std::string> get_string_array(std::string_view key) const;
  std::vector<float> get_float_array(std::string_view key) const;
  std::vector<int64_t> get_int_array(std::string_view key) const;
  // Optional forms return the fallback when the key is absent (but still throw on a wrong type).
  uint64_t get_uint_or(std::string_view key, uint64_t fallback) const;
  double get_float_or(std::string_view key, double fallback) const;
  std::string get_string_or(std::string_view key, std::string fallback) const;

  void set(std::string key, Value v);  // replaces in place or appends
  void erase(std::string_view key);
  const std::vector<std::pair<std::string, Value>>& entries() const { return entries_; }
  size_t size() const { return entries_.size(); }

 private:
  std::vector<std::pair<std::string, Value>> entries_;
  std::map<std::string, size_t, std::less<>> index_;
};

// One tensor as described by its tensor info, resolved to where its bytes are.
struct TensorInfo {
  std::string name;
  quant::GgmlType type = quant::GgmlType::F32;
  uint32_t n_dims = 0;
  std::array<int64_t, 4> ne{1, 1, 1, 1};  // GGUF order: ne[0] is the contiguous (row) dimension
  uint32_t shard = 0;                     // index into GgufModel::shards()
  uint64_t data_offset = 0;               // offset in its shard's data section, as stored
  uint64_t file_offset = 0;               // absolute byte offset of the first byte in its shard file
  uint64_t n_bytes = 0;                   // total bytes of the tensor
  const uint8_t* data = nullptr;          // into the shard's read-only mapping

  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  uint64_t row_bytes() const;  // bytes of one ne[0] row
  std::string shape_string() const;  // "[2048, 768, 128]"
};

// One file of a (possibly split) model.
struct Shard {
  std::filesystem::path path;
  uint64_t file_size = 0;
  uint32_t version = 0;
  uint64_t alignment = 32;
  uint64_t data_section_offset = 0;  // absolute offset of the data section
  Metadata metadata;                 // this shard's own key/values
  std::vector<size_t> tensor_indices;  // into GgufModel::tensors()
};

struct OpenOptions {
  bool map_data = true;  // mmap each shard read-only; false = parse headers only (inspect --json on huge files)
};

// A model: one GGUF file, or all shards of a split model opened from any one of them (conventionally the first)
// and presented as one tensor list. The metadata of the first shard is the model's metadata.
class GgufModel {
 public:
  static GgufModel open(const std::filesystem::path& path, const OpenOptions& opts = {});
  GgufModel(GgufModel&&) noexcept;
  GgufModel& operator=(GgufModel&&) noexcept;
  ~GgufModel();

  const Metadata& metadata() const;
  const std::vector<TensorInfo>& tensors() const;
  const TensorInfo* find(std::string_view name) const;   // nullptr if absent
  const TensorInfo& get(std::string_view name) const;    // throws naming the tensor and the file
  const std::vector<Shard>& shards() const;
  const std::filesystem::path& path() const;  // the path that was opened
  std::string architecture() const;           // general.architecture (throws if missing)

 private:
  struct Impl;
  explicit GgufModel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Parse just the header (key/values and tensor infos) of an in-memory buffer, validating everything the file
// reader validates except the data ranges against a real file size: `file_size` is taken as the size the data
// must fit in. This is the libFuzzer entry point and what GgufModel::open uses per shard. `name` labels errors.
struct ParsedHeader {
  uint32_t version = 0;
  uint64_t alignment = 32;
  uint64_t data_section_offset = 0;
  Metadata metadata;
  std::vector<TensorInfo> tensors;  // data pointers null, shard 0
};
ParsedHeader parse_header(std::span<const uint8_t> bytes, uint64_t file_size, std::string_view name);

}  // namespace moetier::gguf
