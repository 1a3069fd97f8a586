// Byte layouts of the quantized blocks moetier reads and writes, one struct per ggml block type.
//
// Source: ggml's ggml-common.h block structs (block_q4_0 ... block_iq4_xs, block_mxfp4) and, for MXFP4, the OCP
// Microscaling Formats (MX) v1.0 specification. All multi-byte fields are little-endian as stored in GGUF; "fp16"
// is an IEEE binary16 bit pattern (see quant/fp16.h). Every struct is exactly its on-disk size with no padding
// (static_asserts below), so a block can be memcpy'd out of a file mapping and read field by field.
//
// Within a block, element i of the block is the i-th element of the row (blocks are consecutive along ne[0]).
// The comments give, for each format, which bits of which bytes hold element i and the formula for its value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace moetier::quant {

inline constexpr int kQK = 32;    // elements per block of the "legacy" formats, IQ4_NL and MXFP4
inline constexpr int kQK_K = 256;  // elements per super-block of the K formats and IQ4_XS
inline constexpr int kScaleBytesK = 12;  // packed 6-bit scales+mins of Q4_K/Q5_K (and Q3_K's 6-bit scales)

// ---- legacy formats: 32 elements per block ------------------------------------------------------------------
// Nibble order shared by Q4_*, Q5_* and IQ4_NL: element j (j < 16) is the LOW nibble of qs[j], element j + 16 the
// HIGH nibble of qs[j] (a block is split in halves, not interleaved pairs).

// Q4_0, 18 B: [0,2) fp16 d | [2,18) qs. value = d * (nibble - 8).
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK / 2];
};

// Q4_1, 20 B: [0,2) fp16 d | [2,4) fp16 m | [4,20) qs. value = d * nibble + m.
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQK / 2];
};

// Q5_0, 22 B: [0,2) fp16 d | [2,6) qh (uint32 LE; bit j = 5th bit of element j) | [6,22) qs.
// value = d * ((nibble | high_bit << 4) - 16).
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};

// Q5_1, 24 B: [0,2) fp16 d | [2,4) fp16 m | [4,8) qh | [8,24) qs. value = d * (nibble | high_bit << 4) + m.
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};

// Q8_0, 34 B: [0,2) fp16 d | [2,34) int8 qs. value = d * qs[j].
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK];
};

// ---- K formats: 256 elements per super-block, split into 16 or 8 sub-blocks --------------------------------

// Q2_K, 84 B: [0,16) scales | [16,80) qs | [80,82) fp16 d | [82,84) fp16 dmin.
// 16 sub-blocks of 16. scales[s]: low nibble = scale, high nibble = min of sub-block s.
// Quants are 2 bits. The 256 elements are two halves of 128, each using 32 bytes of qs (q = qs + 32*half); within
// a half, element 32*k + l (k = 0..3, l = 0..31) is bits [2k, 2k+2) of q[l]; its sub-block is 8*half + 2k + l/16.
// value = (d * scale) * q - (dmin * min).
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];
  uint8_t qs[kQK_K / 4];
  uint16_t d;
  uint16_t dmin;
};

// Q3_K, 110 B: [0,32) hmask | [32,96) qs | [96,108) scales | [108,110) fp16 d.
// 16 sub-blocks of 16 with signed 6-bit scales (stored +32): for sub-block s, the low 4 bits are the low nibble of
// scales[s] (s < 8) or the high nibble of scales[s - 8] (s >= 8); the top 2 bits are bits [2*(s/4), 2*(s/4)+2) of
// scales[8 + s%4]. Low 2 bits of the quants are laid out as in Q2_K; the third bit of element 32*k + l of half h
// is bit (4h + k) of hmask[l]. A clear hmask bit means "subtract 4": q3 = low2 - (hbit ? 0 : 4), in -4..3.
// value = (d * (scale6 - 32)) * q3.
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];
  uint8_t qs[kQK_K / 4];
  uint8_t scales[kScaleBytesK];
  uint16_t d;
};

// Q4_K, 144 B: [0,2) fp16 d | [2,4) fp16 dmin | [4,16) scales | [16,144) qs.
// 8 sub-blocks of 32 with 6-bit scale and min packed in 12 bytes (unpacked by get_scale_min_k4, dequant_kquants.cpp).
// Quants are 4 bits; sub-blocks 2c and 2c+1 share qs[32c .. 32c+32): low nibbles for 2c, high nibbles for 2c+1.
// value = (d * scale) * q - (dmin * min).
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kScaleBytesK];
  uint8_t qs[kQK_K / 2];
};

// Q5_K, 176 B: [0,2) fp16 d | [2,4) fp16 dmin | [4,16) scales | [16,48) qh | [48,176) qs.
// As Q4_K plus a fifth bit: element l of sub-block s has its high bit at bit s of qh[l].
// value = (d * scale) * (q4 + 16 * hbit) - (dmin * min).
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kScaleBytesK];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};

// Q6_K, 210 B: [0,128) ql | [128,192) qh | [192,208) int8 scales | [208,210) fp16 d.
// 16 sub-blocks of 16 with signed 8-bit scales. Two halves of 128 (ql += 64, qh += 32, scales += 8 per half); within
// a half, for l = 0..31: element l = low nibble of ql[l], element l+32 = low nibble of ql[l+32], element l+64 = high
// nibble of ql[l], element l+96 = high nibble of ql[l+32]; their top 2 bits are bits 0-1, 2-3, 4-5, 6-7 of qh[l].
// Sub-block of element e (within the half) is e / 16. value = (d * scale) * (q6 - 32).
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};

// Q8_K, 292 B: [0,4) float32 d | [4,260) int8 qs | [260,292) int16 bsums. Activation-side format of ggml (never in
// model files): value = d * qs[j]; bsums[g] = sum of qs[16g .. 16g+16), used by K-quant dot products for the mins.
struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};

// ---- non-linear 4-bit formats ----------------------------------------------------------------------------------

// IQ4_NL, 18 B: [0,2) fp16 d | [2,18) qs. Nibbles as Q4_0. value = d * kIq4nlValues[nibble].
struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[kQK / 2];
};

// IQ4_XS, 136 B: [0,2) fp16 d | [2,4) scales_h (uint16 LE) | [4,8) scales_l | [8,136) qs.
// 8 sub-blocks of 32 with 6-bit scales stored +32: low 4 bits = nibble (s % 2) of scales_l[s / 2] (low first), top
// 2 bits = bits [2s, 2s+2) of scales_h. Sub-block s uses qs[16s .. 16s+16) with the Q4_0 nibble order.
// value = (d * (scale6 - 32)) * kIq4nlValues[nibble].
struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[kQK_K / 64];
  uint8_t qs[kQK_K / 2];
};

// The 16 levels of IQ4_NL / IQ4_XS (ggml's kvalues_iq4nl): a non-uniform grid denser near zero.
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// ---- MXFP4 (OCP MX v1.0), as stored in GGUF by gpt-oss -----------------------------------------------------------

// MXFP4, 17 B: [0,1) E8M0 exponent e | [1,17) qs. Nibbles as Q4_0; each nibble is an E2M1 code
// (sign bit 3, 2 exponent bits, 1 mantissa bit) whose value is one of {0, 0.5, 1, 1.5, 2, 3, 4, 6} with sign.
// value = E2M1(nibble) * 2^(e - 127). ggml stores the E2M1 values doubled (kMxfp4DoubledValues, integers) and folds
// the 1/2 into the scale: value = doubled(nibble) * 2^(e - 128). Both factors are exact in float32, so the two
// forms agree bit for bit (e = 255, NaN in the spec, is not special-cased, as in ggml).
struct BlockMXFP4 {
  uint8_t e;
  uint8_t qs[kQK / 2];
};

// E2M1 values times two, indexed by the 4-bit code (ggml's kvalues_mxfp4). Code 8 is -0, stored as 0.
inline constexpr int8_t kMxfp4DoubledValues[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210 && sizeof(BlockQ8_K) == 292);
static_assert(sizeof(BlockIQ4_NL) == 18 && sizeof(BlockIQ4_XS) == 136 && sizeof(BlockMXFP4) == 17);

// Block i of a packed row, copied out: rows come from file mappings at any byte offset, and memcpy avoids both
// misaligned access and aliasing questions (the copy is free next to the arithmetic in reference code).
template <class Block>
inline Block load_block(const void* row, int64_t i) {
  Block b;
  std::memcpy(&b, static_cast<const uint8_t*>(row) + static_cast<size_t>(i) * sizeof(Block), sizeof(Block));
  return b;
}

template <class Block>
inline void store_block(void* row, int64_t i, const Block& b) {
  std::memcpy(static_cast<uint8_t*>(row) + static_cast<size_t>(i) * sizeof(Block), &b, sizeof(Block));
}

}  // namespace moetier::quant
