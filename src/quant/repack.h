// Weight layouts other than the GGUF file's, made at load for the kernels that read them faster.
//
// rows16 ("16 rows in the lanes"), Q8_0, Q4_K, Q5_K, Q6_K, MXFP4 and IQ4_XS: the rows in groups of 16, each group's
// blocks one after the other, each block the 16 rows' GGUF blocks rearranged so that a 512-bit vector holds the same
// 4 bytes of each of the 16 rows, row r in 32-bit lane r:
// Q8_0, 544 bytes per block of 32 columns (as 16 GGUF blocks of 34):
//   [0, 32)    fp16 d of rows 0..15 of the group (row order)
//   [32, 544)  8 quads q (columns 4q .. 4q + 3 of the block), 64 bytes each: 4 bytes per row, rows 0..15 in order,
//              each byte the row's int8 code plus 128 (an unsigned byte, code ^ 0x80)
// Q4_K, 2304 bytes per block of 256 columns (as 16 GGUF blocks of 144; BlockQ4_K: d, dmin, 12 scale bytes, qs):
//   [0, 256)     4 vectors of the blocks' first 16 bytes: vector i holds bytes 4i .. 4i + 3 of each row's block
//                (i = 0: fp16 d and dmin; 1-3: the 6-bit scales and mins as the file packs them)
//   [256, 2304)  32 vectors of the nibbles, each holding one dword of each row's qs: qs bytes 32p + 4i .. 32p +
//                4i + 3 (low nibbles: elements 64p + 4i ..; high nibbles: 64p + 32 + 4i ..; p < 4, i < 8) in
//                vector q4k_rows16_vector(p, i), the order in which the one-token kernel reads them (four per
//                pair of its lanes: int8_rows16-inl.h), so that it reads the block front to back
// Q5_K, 2816 bytes per block of 256 columns (as 16 GGUF blocks of 176; BlockQ5_K: Q4_K's fields and qh):
//   [0, 256)     the 4 vectors of the blocks' first 16 bytes, as Q4_K's
//   [256, 768)   8 vectors of the fifth bits: vector i holds qh bytes 4i .. 4i + 3 of each row (bit s of byte l:
//                element l of sub-block s)
//   [768, 2816)  the 32 vectors of the nibbles, as Q4_K's [256, 2304)
// Q6_K, 3360 bytes per block of 256 columns (as 16 GGUF blocks of 210; BlockQ6_K: ql, qh, int8 scales, fp16 d):
//   [0, 256)      4 vectors of the scales: vector c holds scales 4c .. 4c + 3 of each row
//   [256, 3328)   48 vectors of the codes, 6 per dword index i < 8, for half h = 0, 1 of the block: vector 6i + 3h
//                 holds qh bytes 32h + 4i .. 4i + 3 of each row (the high bit pairs of elements 128h + 4i + 32k, k
//                 < 4, at bits 2k), 6i + 3h + 1 its ql bytes 64h + 4i .. (low nibbles: elements 128h + 4i ..; high:
//                 128h + 64 + 4i ..) and 6i + 3h + 2 its ql bytes 64h + 32 + 4i .. (elements 128h + 32 + 4i .., 128h
//                 + 96 + 4i ..): the three that make the codes of lanes i and i + 8 of the one-token kernel's sums
//                 (int8_rows16-inl.h), in the order it reads them
//   [3328, 3360)  fp16 d of rows 0..15 of the group (row order)
// MXFP4, 272 bytes per block of 32 columns (as 16 GGUF blocks of 17; BlockMXFP4: the E8M0 exponent e, then qs):
//   [0, 256)      4 vectors of the codes: vector i holds qs bytes 4i .. 4i + 3 of each row (low nibbles: elements
//                 4i .., high nibbles: elements 16 + 4i ..)
//   [256, 272)    e of rows 0..15 of the group (row order)
// IQ4_XS, 2176 bytes per block of 256 columns (as 16 GGUF blocks of 136; BlockIQ4_XS: d, scales_h, scales_l, qs):
//   [0, 128)      2 vectors of the blocks' first 8 bytes: vector 0 holds fp16 d | scales_h << 16 of each row, vector 1
//                 its 4 scales_l bytes
//   [128, 2176)   32 vectors of the codes: vector i holds qs bytes 4i .. 4i + 3 of each row (sub-block i / 4: low
//                 nibbles elements 4 (i % 4) .., high nibbles 16 + 4 (i % 4) ..)
// A 512-bit vector then holds one quad of 16 rows, one row per 32-bit lane, and vpdpbusd (u8 x s8) multiplies it
// with one token's 4 activation codes broadcast to every lane: 64 products per instruction with the rows' sums in
// the lanes, where the GGUF layout puts a row's codes in one vector and needs a horizontal sum per row, and the
// token tiles (int8_vnni512-inl.h) transpose 16 rows' blocks in registers. For Q8_0 the offset's share, 128 times
// the activations' quad sum, is the same for every row (Q8Rows::quad_bias); for MXFP4, whose kernels make its codes
// unsigned too, 12 times a block's activation sum (Q8Rows::sums); for IQ4_XS, whose levels the kernels offset by 128,
// 128 times each sum of 16 (Q8Rows::sums). Same size as the GGUF bytes; the integer sums, and
// so the kernels' results, are the GGUF layout kernels' bit for bit (int8_rows16-inl.h says why). A repacked matrix
// lives in memory the engine owns (never the file's mapping) and feeds only the CPU's integer kernels: the scalar
// reference, the float kernels and the GPU read the GGUF layout.
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/ggml_type.h"

namespace moetier::quant {

enum class WeightLayout : uint8_t { gguf, rows16 };

inline constexpr int64_t kRows16 = 16;            // rows per group of the rows16 layout
inline constexpr size_t kRows16BlockBytes = 544;  // Q8_0: one 32-column block of a group: 16 scales, 512 code bytes
inline constexpr size_t kRows16Q4KBlockBytes = 2304;  // Q4_K: one 256-column block of a group: 256 head, 2048 nibbles
inline constexpr size_t kRows16Q5KBlockBytes = 2816;  // Q5_K: one 256-column block of a group (head, qh, nibbles)
inline constexpr size_t kRows16Q5KQhAt = 256;         // Q5_K: where a group block's 8 fifth-bit vectors start
inline constexpr size_t kRows16Q5KNibblesAt = 768;    // Q5_K: where its 32 nibble vectors start
inline constexpr size_t kRows16Q6KBlockBytes = 3360;  // Q6_K: one 256-column block of a group (scales, codes, d)
inline constexpr size_t kRows16Q6KCodesAt = 256;   // Q6_K: where a group block's code vectors start
inline constexpr size_t kRows16Q6KDAt = 3328;      // Q6_K: where a group block's 16 fp16 d start
inline constexpr size_t kRows16Mxfp4BlockBytes = 272;  // MXFP4: one 32-column block of a group: codes, exponents
inline constexpr size_t kRows16Mxfp4EAt = 256;         // MXFP4: where a group block's 16 exponent bytes start
inline constexpr size_t kRows16Iq4XsBlockBytes = 2176;  // IQ4_XS: one 256-column block of a group: head, codes
inline constexpr size_t kRows16Iq4XsQsAt = 128;         // IQ4_XS: where a group block's 32 code vectors start

// The position (0..31) among a Q4_K block's nibble vectors of qs dword i (i < 8) of part p (p < 4): in order of lane
// pair l = 4 (i / 4) + 2 (p % 2) + (i % 4) / 2, then 2 (p / 2) + i % 2.
inline constexpr int q4k_rows16_vector(int p, int i) {
  return 4 * (4 * (i / 4) + 2 * (p % 2) + (i % 4) / 2) + 2 * (p / 2) + i % 2;
}

// Whether a matrix of this type and shape can take the rows16 layout: Q8_0, Q4_K, Q5_K, Q6_K, MXFP4 or IQ4_XS, rows a
// multiple of 16 (cols are a multiple of the block's for any such matrix). Says nothing about the CPU:
// kernels::has_rows16_kernel does.
bool rows16_layout_fits(GgmlType type, int64_t rows, int64_t cols);

// Writes groups [g0, g1) (rows 16 g0 .. 16 g1 - 1) of the rows16 layout of a GGUF Q8_0, Q4_K, Q5_K, Q6_K, MXFP4 or
// IQ4_XS matrix: src is the matrix's GGUF bytes (row r at src + r * row_bytes, row_bytes = cols / block columns * block
// bytes), dst the whole repacked matrix (the same size; group g at dst + g * 16 * row_bytes). Requires
// rows16_layout_fits (asserted). Thread-safe for disjoint group ranges. Scalar, 4 bytes at a time: the specification of
// the bytes; kernels::repack_rows16 (quant/kernels/int8_kernels.h) writes the same ones faster, and is what the engine
// calls.
void repack_rows16(GgmlType type, const uint8_t* src, size_t row_bytes, int64_t cols, int64_t g0, int64_t g1,
                   uint8_t* dst);

}  // namespace moetier::quant
