// Weight layouts other than the GGUF file's, made at load for the kernels that read them faster.
//
// rows16 ("16 rows in the lanes"), Q8_0 only: the rows in groups of 16, each group's blocks of 32 columns one after
// the other, each block 544 bytes (as 16 GGUF blocks of 34):
//   [0, 32)    fp16 d of rows 0..15 of the group (row order)
//   [32, 544)  8 quads q (columns 4q .. 4q + 3 of the block), 64 bytes each: 4 bytes per row, rows 0..15 in order,
//              each byte the row's int8 code plus 128 (an unsigned byte, code ^ 0x80)
// A 512-bit vector then holds one quad of 16 rows, one row per 32-bit lane, and vpdpbusd (u8 x s8) multiplies it
// with one token's 4 activation codes broadcast to every lane: 64 products per instruction with the rows' sums in
// the lanes, where the GGUF layout puts a row's 32 codes in one vector and needs a horizontal sum per row. The
// offset's share, 128 times the activations' quad sum, is the same for every row (Q8Rows::quad_bias). Same size as
// the GGUF bytes; the integer sums, and so the kernels' results, are the GGUF layout kernels' bit for bit
// (int8_rows16-inl.h says why). A repacked matrix lives in memory the engine owns (never the file's mapping) and
// feeds only the CPU's integer kernels: the scalar reference, the float kernels and the GPU read the GGUF layout.
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/ggml_type.h"

namespace moetier::quant {

enum class WeightLayout : uint8_t { gguf, rows16 };

inline constexpr int64_t kRows16 = 16;            // rows per group of the rows16 layout
inline constexpr size_t kRows16BlockBytes = 544;  // one 32-column block of a group: 16 scales, 512 code bytes

// Whether a matrix of this type and shape can take the rows16 layout: Q8_0, rows a multiple of 16 (cols are a
// multiple of 32 for any Q8_0 matrix). Says nothing about the CPU: kernels::has_rows16_kernel does.
bool rows16_layout_fits(GgmlType type, int64_t rows, int64_t cols);

// Writes groups [g0, g1) (rows 16 g0 .. 16 g1 - 1) of the rows16 layout of a GGUF Q8_0 matrix: src is the
// matrix's GGUF bytes (row r at src + r * row_bytes, row_bytes = cols / 32 * 34), dst the whole repacked matrix
// (the same size; group g at dst + g * (cols / 32) * kRows16BlockBytes). Requires rows16_layout_fits (asserted).
// Thread-safe for disjoint group ranges.
void repack_rows16(GgmlType type, const uint8_t* src, size_t row_bytes, int64_t cols, int64_t g0, int64_t g1,
                   uint8_t* dst);

}  // namespace moetier::quant
