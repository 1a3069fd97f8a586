#include "quant/ggml_type.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cctype>
#include <string>

#include "util/error.h"

namespace moetier::quant {
namespace {

// Block geometry from ggml's type_traits (ggml.c) and block structs (ggml-common.h). QK_K = 256.
constexpr std::array<TypeTraits, 32> kTypes{{
    {GgmlType::F32, "f32", 1, 4, true},
    {GgmlType::F16, "f16", 1, 2, true},
    {GgmlType::Q4_0, "q4_0", 32, 18, true},    // fp16 d + 16 B nibbles
    {GgmlType::Q4_1, "q4_1", 32, 20, true},    // fp16 d, m + 16 B nibbles
    {GgmlType::Q5_0, "q5_0", 32, 22, true},    // fp16 d + 4 B high bits + 16 B nibbles
    {GgmlType::Q5_1, "q5_1", 32, 24, true},    // fp16 d, m + 4 B high bits + 16 B nibbles
    {GgmlType::Q8_0, "q8_0", 32, 34, true},    // fp16 d + 32 int8
    {GgmlType::Q8_1, "q8_1", 32, 36, false},   // activation-side type of ggml, never stored in models
    {GgmlType::Q2_K, "q2_K", 256, 84, true},   // 16 B scales + 64 B quants + fp16 d, dmin
    {GgmlType::Q3_K, "q3_K", 256, 110, true},  // 32 B hmask + 64 B quants + 12 B scales + fp16 d
    {GgmlType::Q4_K, "q4_K", 256, 144, true},  // fp16 d, dmin + 12 B scales + 128 B nibbles
    {GgmlType::Q5_K, "q5_K", 256, 176, true},  // fp16 d, dmin + 12 B scales + 32 B high bits + 128 B nibbles
    {GgmlType::Q6_K, "q6_K", 256, 210, true},  // 128 B low + 64 B high + 16 int8 scales + fp16 d
    {GgmlType::Q8_K, "q8_K", 256, 292, true},   // float d + 256 int8 + 16 int16 sums (activation-side)
    {GgmlType::IQ2_XXS, "iq2_xxs", 256, 66, false},
    {GgmlType::IQ2_XS, "iq2_xs", 256, 74, false},
    {GgmlType::IQ3_XXS, "iq3_xxs", 256, 98, false},
    {GgmlType::IQ1_S, "iq1_s", 256, 50, false},
    {GgmlType::IQ4_NL, "iq4_nl", 32, 18, true},   // fp16 d + 16 B nibbles into a non-linear table
    {GgmlType::IQ3_S, "iq3_s", 256, 110, false},
    {GgmlType::IQ2_S, "iq2_s", 256, 82, false},
    {GgmlType::IQ4_XS, "iq4_xs", 256, 136, true},  // fp16 d + 2 B high scales + 4 B low scales + 128 B nibbles
    {GgmlType::I8, "i8", 1, 1, false},
    {GgmlType::I16, "i16", 1, 2, false},
    {GgmlType::I32, "i32", 1, 4, false},
    {GgmlType::I64, "i64", 1, 8, false},
    {GgmlType::F64, "f64", 1, 8, false},
    {GgmlType::IQ1_M, "iq1_m", 256, 56, false},
    {GgmlType::BF16, "bf16", 1, 2, true},
    {GgmlType::TQ1_0, "tq1_0", 256, 54, false},
    {GgmlType::TQ2_0, "tq2_0", 256, 66, false},
    {GgmlType::MXFP4, "mxfp4", 32, 17, true},  // E8M0 scale + 16 B of E2M1 nibbles (OCP MX v1.0)
}};

// Display names, indexed like kTypes.
constexpr std::array<std::string_view, 32> kDisplay{
    "F32",   "F16",    "Q4_0",    "Q4_1",   "Q5_0",  "Q5_1",  "Q8_0",  "Q8_1",  "Q2_K",  "Q3_K",   "Q4_K",
    "Q5_K",  "Q6_K",   "Q8_K",    "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS",
    "I8",    "I16",    "I32",     "I64",    "F64",   "IQ1_M", "BF16",  "TQ1_0", "TQ2_0", "MXFP4"};

size_t index_of(GgmlType t) {
  for (size_t i = 0; i < kTypes.size(); ++i)
    if (kTypes[i].type == t) return i;
  assert(false && "GgmlType not in the table");
  return 0;
}

}  // namespace

std::span<const TypeTraits> all_types() { return kTypes; }

std::optional<TypeTraits> find_type(uint32_t id) {
  for (const auto& t : kTypes)
    if (static_cast<uint32_t>(t.type) == id) return t;
  return std::nullopt;
}

const TypeTraits& traits(GgmlType t) { return kTypes[index_of(t)]; }

std::string_view type_name(GgmlType t) { return kDisplay[index_of(t)]; }

std::optional<GgmlType> parse_type(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const auto& t : kTypes) {
    std::string tn(t.name);
    std::transform(tn.begin(), tn.end(), tn.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (tn == lower) return t.type;
  }
  return std::nullopt;
}

size_t row_bytes(GgmlType t, int64_t n) {
  const TypeTraits& tr = traits(t);
  if (n < 0 || n % tr.block_size != 0)
    fail("a row of {} elements is not a whole number of {} blocks ({} elements each)", n, type_name(t),
         tr.block_size);
  return static_cast<size_t>(n / tr.block_size) * tr.type_size;
}

}  // namespace moetier::quant
