// Metadata values: typed access, conversions and display.
#include <cmath>
#include <limits>

#include "gguf/gguf.h"
#include "util/error.h"

namespace moetier::gguf {

std::string_view value_type_name(ValueType t) {
  switch (t) {
    case ValueType::UINT8: return "uint8";
    case ValueType::INT8: return "int8";
    case ValueType::UINT16: return "uint16";
    case ValueType::INT16: return "int16";
    case ValueType::UINT32: return "uint32";
    case ValueType::INT32: return "int32";
    case ValueType::FLOAT32: return "float32";
    case ValueType::BOOL: return "bool";
    case ValueType::STRING: return "string";
    case ValueType::ARRAY: return "array";
    case ValueType::UINT64: return "uint64";
    case ValueType::INT64: return "int64";
    case ValueType::FLOAT64: return "float64";
  }
  return "unknown";
}

bool Value::is_integer() const {
  switch (type) {
    case ValueType::UINT8: case ValueType::INT8: case ValueType::UINT16: case ValueType::INT16:
    case ValueType::UINT32: case ValueType::INT32: case ValueType::UINT64: case ValueType::INT64:
      return true;
    default:
      return false;
  }
}

int64_t Value::as_int() const {
  if (const auto* u = std::get_if<uint64_t>(&v)) {
    if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail("value {} of type {} does not fit in int64", *u, value_type_name(type));
    return static_cast<int64_t>(*u);
  }
  if (const auto* i = std::get_if<int64_t>(&v)) return *i;
  fail("has type {}, expected an integer", value_type_name(type));
}

uint64_t Value::as_uint() const {
  if (const auto* u = std::get_if<uint64_t>(&v)) return *u;
  if (const auto* i = std::get_if<int64_t>(&v)) {
    if (*i < 0) fail("value {} of type {} is negative, expected an unsigned integer", *i, value_type_name(type));
    return static_cast<uint64_t>(*i);
  }
  fail("has type {}, expected an unsigned integer", value_type_name(type));
}

double Value::as_double() const {
  if (const auto* d = std::get_if<double>(&v)) return *d;
  if (const auto* u = std::get_if<uint64_t>(&v)) return static_cast<double>(*u);
  if (const auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  fail("has type {}, expected a number", value_type_name(type));
}

bool Value::as_bool() const {
  if (const auto* b = std::get_if<bool>(&v)) return *b;
  fail("has type {}, expected bool", value_type_name(type));
}

const std::string& Value::as_string() const {
  if (const auto* s = std::get_if<std::string>(&v)) return *s;
  fail("has type {}, expected string", value_type_name(type));
}

const std::vector<Value>& Value::as_array() const {
  if (const auto* a = std::get_if<std::vector<Value>>(&v)) return *a;
  fail("has type {}, expected array", value_type_name(type));
}

namespace {

// Strings can be whole chat templates: show the start, escaped, on one line.
std::string display_string(const std::string& s) {
  constexpr size_t kMaxChars = 60;
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < kMaxChars; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '"') out += "\\\"";
    else if (c == '\\') out += "\\\\";
    else if (c < 0x20) out += fmt::format("\\x{:02x}", c);
    else out += static_cast<char>(c);
  }
  out += s.size() > kMaxChars ? "\"..." : "\"";
  return out;
}

}  // namespace

std::string Value::to_display(size_t max_elems) const {
  switch (type) {
    case ValueType::BOOL: return as_bool() ? "true" : "false";
    case ValueType::STRING: return display_string(as_string());
    case ValueType::FLOAT32: case ValueType::FLOAT64: return fmt::format("{}", std::get<double>(v));
    case ValueType::ARRAY: {
      const auto& a = as_array();
      std::string out = fmt::format("{}[{}] [", value_type_name(elem_type), a.size());
      for (size_t i = 0; i < a.size() && i < max_elems; ++i) {
        if (i > 0) out += ", ";
        out += a[i].to_display(max_elems);
      }
      out += a.size() > max_elems ? ", ...]" : "]";
      return out;
    }
    default:
      if (const auto* u = std::get_if<uint64_t>(&v)) return fmt::format("{}", *u);
      if (const auto* i = std::get_if<int64_t>(&v)) return fmt::format("{}", *i);
      return "?";
  }
}

Value Value::of_uint8(uint8_t x) { return Value{ValueType::UINT8, ValueType::UINT8, uint64_t{x}}; }
Value Value::of_uint16(uint16_t x) { return Value{ValueType::UINT16, ValueType::UINT8, uint64_t{x}}; }
Value Value::of_uint32(uint32_t x) { return Value{ValueType::UINT32, ValueType::UINT8, uint64_t{x}}; }
Value Value::of_int32(int32_t x) { return Value{ValueType::INT32, ValueType::UINT8, int64_t{x}}; }
Value Value::of_uint64(uint64_t x) { return Value{ValueType::UINT64, ValueType::UINT8, x}; }
Value Value::of_int64(int64_t x) { return Value{ValueType::INT64, ValueType::UINT8, x}; }
Value Value::of_float32(float x) { return Value{ValueType::FLOAT32, ValueType::UINT8, double{x}}; }
Value Value::of_float64(double x) { return Value{ValueType::FLOAT64, ValueType::UINT8, x}; }
Value Value::of_bool(bool x) { return Value{ValueType::BOOL, ValueType::UINT8, x}; }
Value Value::of_string(std::string s) { return Value{ValueType::STRING, ValueType::UINT8, std::move(s)}; }
Value Value::of_array(ValueType elem_type, std::vector<Value> elems) {
  return Value{ValueType::ARRAY, elem_type, std::move(elems)};
}

bool operator==(const Value& a, const Value& b) {
  return a.type == b.type && (a.type != ValueType::ARRAY || a.elem_type == b.elem_type) && a.v == b.v;
}

}  // namespace moetier::gguf
