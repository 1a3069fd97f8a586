// Validating parser of a GGUF header (key/values and tensor infos) held in memory.
//
// Hostile input is the design case: every count and length is checked against the bytes that remain before
// anything is allocated, so a count of 2^60 fails at once instead of reserving memory, and nested arrays are
// limited in depth so recursion stays bounded.
#include <algorithm>
#include <cstring>
#include <limits>
#include <set>

#include "gguf/gguf.h"
#include "util/error.h"

namespace moetier::gguf {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as little-endian uint32
constexpr uint64_t kDefaultAlignment = 32;
// Real files nest arrays at most once (arrays of token arrays); 8 levels leave room and bound the recursion.
constexpr int kMaxArrayDepth = 8;
// Smallest possible encodings, used to bound counts by the bytes left: a key/value is a key length (8) + type (4)
// + at least one value byte; a tensor info is a name length (8) + n_dims (4) + one ne (8) + type (4) + offset (8).
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;
// A parsed Value takes ~50 bytes whatever its encoding (one byte for a uint8 element), so the number of array
// elements is capped to keep memory bounded when a huge file declares a huge array: 2^25 elements is ~1.6 GB at
// worst and 30x the largest real vocabulary arrays (~1M merges).
constexpr uint64_t kMaxArrayElements = uint64_t{1} << 25;
// Reservations are capped too; vectors grow past this only as real bytes are consumed.
constexpr uint64_t kMaxReserve = uint64_t{1} << 16;

class Cursor {
 public:
  Cursor(std::span<const uint8_t> bytes, std::string_view name) : b_(bytes), name_(name) {}

  uint64_t pos() const { return pos_; }
  // Accounts for `n` more array elements; false once the header would exceed kMaxArrayElements.
  bool take_array_elements(uint64_t n) {
    if (n > array_elements_left_) return false;
    array_elements_left_ -= n;
    return true;
  }
  uint64_t remaining() const { return b_.size() - pos_; }
  std::string_view name() const { return name_; }

  void need(uint64_t n, std::string_view what) const {
    if (n > remaining())
      fail("{}: truncated at byte {}: {} needs {} bytes but only {} remain", name_, pos_, what, n, remaining());
  }

  template <class T>
  T read(std::string_view what) {
    need(sizeof(T), what);
    T x{};
    // Little-endian host assumed (x86-64, aarch64); GGUF is little-endian by default.
    std::memcpy(&x, b_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return x;
  }

  std::string read_string(std::string_view what) {
    const uint64_t at = pos_;
    const uint64_t len = read<uint64_t>(what);
    if (len > remaining())
      fail("{}: string length {} at byte {} ({}) is larger than the {} bytes left in the file", name_, len, at, what,
           remaining());
    std::string s(reinterpret_cast<const char*>(b_.data() + pos_), static_cast<size_t>(len));
    pos_ += len;
    return s;
  }

 private:
  std::span<const uint8_t> b_;
  std::string_view name_;
  uint64_t pos_ = 0;
  uint64_t array_elements_left_ = kMaxArrayElements;
};

bool valid_value_type(uint32_t t) { return t <= static_cast<uint32_t>(ValueType::FLOAT64); }

// Smallest encoding of one value of type t (for bounding array counts).
uint64_t min_value_bytes(ValueType t) {
  switch (t) {
    case ValueType::UINT8: case ValueType::INT8: case ValueType::BOOL: return 1;
    case ValueType::UINT16: case ValueType::INT16: return 2;
    case ValueType::UINT32: case ValueType::INT32: case ValueType::FLOAT32: return 4;
    case ValueType::UINT64: case ValueType::INT64: case ValueType::FLOAT64: return 8;
    case ValueType::STRING: return 8;
    case ValueType::ARRAY: return 4 + 8;
  }
  return 1;
}

Value read_value(Cursor& c, ValueType t, std::string_view key, int depth) {
  Value out;
  out.type = t;
  switch (t) {
    case ValueType::UINT8: out.v = uint64_t{c.read<uint8_t>(key)}; break;
    case ValueType::INT8: out.v = int64_t{c.read<int8_t>(key)}; break;
    case ValueType::UINT16: out.v = uint64_t{c.read<uint16_t>(key)}; break;
    case ValueType::INT16: out.v = int64_t{c.read<int16_t>(key)}; break;
    case ValueType::UINT32: out.v = uint64_t{c.read<uint32_t>(key)}; break;
    case ValueType::INT32: out.v = int64_t{c.read<int32_t>(key)}; break;
    case ValueType::UINT64: out.v = c.read<uint64_t>(key); break;
    case ValueType::INT64: out.v = c.read<int64_t>(key); break;
    case ValueType::FLOAT32: out.v = double{c.read<float>(key)}; break;
    case ValueType::FLOAT64: out.v = c.read<double>(key); break;
    case ValueType::BOOL: out.v = c.read<uint8_t>(key) != 0; break;
    case ValueType::STRING: out.v = c.read_string(key); break;
    case ValueType::ARRAY: {
      if (depth >= kMaxArrayDepth)
        fail("{}: metadata key '{}' nests arrays deeper than {} levels at byte {}", c.name(), key, kMaxArrayDepth,
             c.pos());
      const uint64_t at = c.pos();
      const uint32_t et = c.read<uint32_t>(key);
      if (!valid_value_type(et))
        fail("{}: unknown array element type {} for metadata key '{}' at byte {}", c.name(), et, key, at);
      out.elem_type = static_cast<ValueType>(et);
      const uint64_t count_at = c.pos();
      const uint64_t count = c.read<uint64_t>(key);
      if (count > c.remaining() / min_value_bytes(out.elem_type))
        fail("{}: array count {} for metadata key '{}' at byte {} cannot fit in the {} bytes left in the file",
             c.name(), count, key, count_at, c.remaining());
      if (!c.take_array_elements(count))
        fail("{}: array count {} for metadata key '{}' at byte {} exceeds the limit of {} array elements per header",
             c.name(), count, key, count_at, kMaxArrayElements);
      std::vector<Value> elems;
      elems.reserve(static_cast<size_t>(std::min(count, kMaxReserve)));
      for (uint64_t i = 0; i < count; ++i) elems.push_back(read_value(c, out.elem_type, key, depth + 1));
      out.v = std::move(elems);
      break;
    }
  }
  return out;
}

uint64_t checked_mul(uint64_t a, uint64_t b, bool& overflow) {
  uint64_t r = 0;
  overflow = overflow || __builtin_mul_overflow(a, b, &r);
  return r;
}

// Reads tensor info `index` of the `count` the header declares.
TensorInfo read_tensor_info(Cursor& c, uint64_t index, uint64_t count) {
  const uint64_t at = c.pos();
  TensorInfo ti;
  ti.name = c.read_string(
      fmt::format("name of tensor info {} of the {} that the tensor count at byte 8 declares", index + 1, count));
  // Zero padding or tensor data read as an info gives an empty name first: say what a reader of the file can fix.
  if (ti.name.empty())
    fail("{}: tensor info {} of the {} that the tensor count at byte 8 declares (at byte {}) has an empty name; "
         "the file holds fewer tensor infos than its header's tensor count, or is corrupt",
         c.name(), index + 1, count, at);
  const std::string_view n = ti.name;
  const auto where = [&] { return fmt::format("{}: tensor '{}' (info at byte {})", c.name(), n, at); };
  ti.n_dims = c.read<uint32_t>("tensor n_dims");
  if (ti.n_dims < 1 || ti.n_dims > 4) fail("{} has n_dims {}, expected 1..4", where(), ti.n_dims);
  for (uint32_t d = 0; d < ti.n_dims; ++d) {
    const uint64_t x = c.read<uint64_t>("tensor ne");
    if (x > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail("{} has ne[{}] = {}, which is negative as int64", where(), d, static_cast<int64_t>(x));
    ti.ne[d] = static_cast<int64_t>(x);
  }
  const uint32_t type_id = c.read<uint32_t>("tensor type");
  const auto tt = quant::find_type(type_id);
  if (!tt) fail("{}: unknown tensor type id {} for tensor '{}' (info at byte {})", c.name(), type_id, n, at);
  ti.type = tt->type;
  ti.data_offset = c.read<uint64_t>("tensor data offset");

  bool overflow = false;
  uint64_t elems = 1;
  for (int64_t x : ti.ne) elems = checked_mul(elems, static_cast<uint64_t>(x), overflow);
  if (overflow || elems > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    fail("{} with shape {}: element count overflows int64", where(), ti.shape_string());
  if (ti.ne[0] % tt->block_size != 0)
    fail("{} of type {} has ne[0] = {}, not a multiple of the block size {}", where(), quant::type_name(ti.type),
         ti.ne[0], tt->block_size);
  ti.n_bytes = checked_mul(elems / static_cast<uint64_t>(tt->block_size), tt->type_size, overflow);
  if (overflow) fail("{} with shape {}: byte size overflows uint64", where(), ti.shape_string());
  return ti;
}

// Whether the bytes at `at` parse as one more tensor info: what a header whose tensor count is smaller than the
// tensor infos present leaves where the padding and the data section should begin. (Zero padding gives an empty
// name; tensor data almost never a name length that fits the file followed by a valid shape and type.)
bool tensor_info_follows(std::span<const uint8_t> bytes, uint64_t at, std::string_view name, std::string& found) {
  Cursor probe(bytes.subspan(static_cast<size_t>(at)), name);
  try {
    found = read_tensor_info(probe, 0, 1).name;
    return true;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace

ParsedHeader parse_header(std::span<const uint8_t> bytes, uint64_t file_size, std::string_view name) {
  Cursor c(bytes, name);
  ParsedHeader h;

  if (bytes.size() < 4) c.need(4, "magic \"GGUF\"");
  const uint32_t magic = c.read<uint32_t>("magic");
  if (magic != kMagic)
    fail("{}: bad magic at byte 0: expected \"GGUF\" (47 47 55 46), found {:02x} {:02x} {:02x} {:02x}; not a GGUF file",
         name, bytes[0], bytes[1], bytes[2], bytes[3]);
  h.version = c.read<uint32_t>("version");
  if (h.version != 2 && h.version != 3) {
    if (h.version == 1) fail("{}: GGUF version 1 at byte 4 is not supported (only versions 2 and 3)", name);
    // The magic is four bytes in file order, so a big-endian file (written on s390x, or converted with gguf-py's
    // gguf_convert_endian.py) passes it; its version is the first field that reads byte-swapped.
    const uint32_t swapped = __builtin_bswap32(h.version);
    if (swapped >= 1 && swapped <= 3)
      fail("{}: the version at byte 4 reads 0x{:08x}, which is version {} byte-swapped: a big-endian GGUF file; "
           "moetier reads little-endian GGUF files only (convert it back with gguf-py's gguf_convert_endian.py)",
           name, h.version, swapped);
    fail("{}: unsupported GGUF version {} at byte 4 (expected 2 or 3)", name, h.version);
  }
  const uint64_t n_tensors = c.read<uint64_t>("tensor count");
  const uint64_t n_kv = c.read<uint64_t>("metadata key/value count");
  if (n_kv > c.remaining() / kMinKvBytes)
    fail("{}: metadata key/value count {} at byte 16 cannot fit in the {} bytes left in the file (file truncated "
         "or count corrupt)",
         name, n_kv, c.remaining());

  for (uint64_t i = 0; i < n_kv; ++i) {
    const uint64_t at = c.pos();
    std::string key = c.read_string(fmt::format("key of metadata entry {}", i));
    if (h.metadata.has(key)) fail("{}: duplicate metadata key '{}' at byte {}", name, key, at);
    const uint64_t type_at = c.pos();
    const uint32_t t = c.read<uint32_t>("metadata value type");
    if (!valid_value_type(t)) fail("{}: unknown metadata value type {} for key '{}' at byte {}", name, t, key, type_at);
    Value v = read_value(c, static_cast<ValueType>(t), key, 0);
    h.metadata.set(std::move(key), std::move(v));
  }

  if (const Value* a = h.metadata.find("general.alignment")) {
    if (!a->is_integer()) fail("{}: general.alignment has type {}, expected uint32", name, value_type_name(a->type));
    const bool negative = std::holds_alternative<int64_t>(a->v) && std::get<int64_t>(a->v) < 0;
    const uint64_t al = negative ? 0 : a->as_uint();
    // The specification asks for a nonzero multiple of 8 (24 is valid: not necessarily a power of two, so every
    // alignment below is computed with %, never with a mask); 0 would divide by zero below.
    if (al == 0 || al % 8 != 0 || al > std::numeric_limits<uint32_t>::max())
      fail("{}: general.alignment is {}, expected a nonzero multiple of 8 that fits uint32", name, a->to_display());
    h.alignment = al;
  } else {
    h.alignment = kDefaultAlignment;
  }

  // Checked after the key/values so that a file cut inside them reports the truncation, not the count.
  if (n_tensors > c.remaining() / kMinTensorInfoBytes)
    fail("{}: tensor count {} at byte 8 cannot fit in the {} bytes left after the metadata (file truncated or "
         "count corrupt)",
         name, n_tensors, c.remaining());
  std::set<std::string, std::less<>> names;
  h.tensors.reserve(static_cast<size_t>(std::min(n_tensors, kMaxReserve)));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    const uint64_t at = c.pos();
    TensorInfo ti = read_tensor_info(c, i, n_tensors);
    if (!names.insert(ti.name).second)
      fail("{}: duplicate tensor name '{}' (info at byte {})", name, ti.name, at);
    h.tensors.push_back(std::move(ti));
  }

  // The data section starts at the next multiple of the alignment; align_up cannot overflow because pos < 2^63.
  const uint64_t pos = c.pos();
  if (std::string next; tensor_info_follows(bytes, pos, name, next))
    fail("{}: a tensor info for '{}' follows the {} tensor infos that the tensor count at byte 8 declares (at byte {}, "
         "where the padding before the data section should be): the header's tensor count is smaller than the "
         "tensors present",
         name, next, n_tensors, pos);
  h.data_section_offset = pos + (h.alignment - pos % h.alignment) % h.alignment;
  for (TensorInfo& ti : h.tensors) {
    if (ti.data_offset % h.alignment != 0)
      fail("{}: tensor '{}' has data offset {}, not a multiple of the alignment {}", name, ti.name, ti.data_offset,
           h.alignment);
    uint64_t begin = 0;
    uint64_t end = 0;
    if (__builtin_add_overflow(h.data_section_offset, ti.data_offset, &begin) ||
        __builtin_add_overflow(begin, ti.n_bytes, &end) || end > file_size)
      fail("{}: tensor '{}' data (offset {} + {} bytes after the data section at byte {}) runs past the end of the "
           "file ({} bytes)",
           name, ti.name, ti.data_offset, ti.n_bytes, h.data_section_offset, file_size);
    ti.file_offset = begin;
  }
  return h;
}

}  // namespace moetier::gguf
