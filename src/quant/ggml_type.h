// Tensor element types of the GGML/GGUF ecosystem: ids, names and block geometry.
//
// Source: the GGUF specification (ggml docs/gguf.md, "ggml_type") and ggml's type_traits table. Ids are stored in
// GGUF tensor infos as uint32; a block of `block_size` elements occupies `type_size` bytes, so a row of n elements
// (n a multiple of block_size) takes n / block_size * type_size bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace moetier::quant {

// Spelled as ggml spells them (GGML_TYPE_Q4_K -> Q4_K), not in lower_snake_case: the names users know from files.
enum class GgmlType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3,
  // 4 (Q4_2) and 5 (Q4_3) were removed from ggml and are not valid in files.
  Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22, IQ4_XS = 23,
  I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
  // 31..33 (Q4_0_4_4, Q4_0_4_8, Q4_0_8_8) and 36..38 (IQ4_NL_4_4/4_8/8_8) were repacked CPU layouts, now removed.
  TQ1_0 = 34, TQ2_0 = 35,
  MXFP4 = 39,
};

struct TypeTraits {
  GgmlType type;
  std::string_view name;   // as ggml prints it, e.g. "q4_K", "mxfp4"; see type_name() for display
  int64_t block_size;      // elements per block
  size_t type_size;        // bytes per block
  bool can_dequantize;     // moetier has a reference dequantizer for it (others are refused by name)
};

// Every type moetier recognises, in id order. A type listed here but with can_dequantize = false is known by
// name (so errors can say "IQ2_XXS is not supported yet" rather than "unknown type 16").
std::span<const TypeTraits> all_types();

// Traits of a raw type id read from a file; nullopt when the id is not a ggml type at all.
std::optional<TypeTraits> find_type(uint32_t id);

// Traits of a known type (asserts it is in the table).
const TypeTraits& traits(GgmlType t);

// Display name in upper case as users see it in quant names: "Q4_K", "IQ4_XS", "MXFP4", "F16".
std::string_view type_name(GgmlType t);

// Parse a display or ggml name, case-insensitive ("q4_k", "Q4_K", "mxfp4"); nullopt if unknown.
std::optional<GgmlType> parse_type(std::string_view name);

// Bytes of a row of n elements. Throws moetier::Error if n is not a multiple of the block size.
size_t row_bytes(GgmlType t, int64_t n);

}  // namespace moetier::quant
