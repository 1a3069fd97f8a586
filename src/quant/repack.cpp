#include "quant/repack.h"

#include <cassert>
#include <cstddef>
#include <cstring>
#include <type_traits>

#include "quant/blocks.h"

namespace moetier::quant {

bool rows16_layout_fits(GgmlType type, int64_t rows, int64_t cols) {
  const int64_t block =
      type == GgmlType::Q8_0 || type == GgmlType::MXFP4                                      ? kQK
      : type == GgmlType::Q4_K || type == GgmlType::Q5_K || type == GgmlType::Q6_K || type == GgmlType::IQ4_XS ? kQK_K
                                                                                                              : 0;
  return block > 0 && rows > 0 && rows % kRows16 == 0 && cols > 0 && cols % block == 0;
}

namespace {

void repack_q8_0(const uint8_t* src, size_t row_bytes, int64_t nb, int64_t g, uint8_t* out) {
  for (int64_t b = 0; b < nb; ++b, out += kRows16BlockBytes) {
    for (int64_t l = 0; l < kRows16; ++l) {
      BlockQ8_0 blk;
      const size_t at = static_cast<size_t>(g * kRows16 + l) * row_bytes + static_cast<size_t>(b) * sizeof blk;
      std::memcpy(&blk, src + at, sizeof blk);
      std::memcpy(out + 2 * l, &blk.d, 2);
      for (int q = 0; q < kQK / 4; ++q) {
        for (int j = 0; j < 4; ++j) {
          out[32 + 64 * q + 4 * l + j] = static_cast<uint8_t>(static_cast<uint8_t>(blk.qs[4 * q + j]) ^ 0x80u);
        }
      }
    }
  }
}

// qs dword i of a row's block to lane l of vector i, its exponent to byte l after the 4 vectors.
void repack_mxfp4(const uint8_t* src, size_t row_bytes, int64_t nb, int64_t g, uint8_t* out) {
  static_assert(sizeof(BlockMXFP4) * kRows16 == kRows16Mxfp4BlockBytes && sizeof(BlockMXFP4{}.qs) == 16);
  for (int64_t b = 0; b < nb; ++b, out += kRows16Mxfp4BlockBytes) {
    for (int64_t l = 0; l < kRows16; ++l) {
      const uint8_t* blk =
          src + static_cast<size_t>(g * kRows16 + l) * row_bytes + static_cast<size_t>(b) * sizeof(BlockMXFP4);
      for (int i = 0; i < 4; ++i) std::memcpy(out + 64 * i + 4 * l, blk + offsetof(BlockMXFP4, qs) + 4 * i, 4);
      out[kRows16Mxfp4EAt + l] = blk[offsetof(BlockMXFP4, e)];
    }
  }
}

// Every 4 bytes of a row's block go to lane l of one vector: the first 16 (d, dmin, scales) to vectors 0-3, then
// (Q5_K) qh dword i to vector 4 + i, then qs dword i of part p to nibble vector q4k_rows16_vector(p, i).
template <class B>
void repack_q45_k(const uint8_t* src, size_t row_bytes, int64_t nb, int64_t g, uint8_t* out) {
  constexpr bool kFifth = std::is_same_v<B, BlockQ5_K>;
  constexpr size_t kBlockBytes = kFifth ? kRows16Q5KBlockBytes : kRows16Q4KBlockBytes;
  constexpr size_t kNibblesAt = kFifth ? kRows16Q5KNibblesAt : 256;
  static_assert(sizeof(B) * kRows16 == kBlockBytes && offsetof(B, scales) + kScaleBytesK == 16);
  for (int64_t b = 0; b < nb; ++b, out += kBlockBytes) {
    for (int64_t l = 0; l < kRows16; ++l) {
      const uint8_t* blk = src + static_cast<size_t>(g * kRows16 + l) * row_bytes + static_cast<size_t>(b) * sizeof(B);
      for (int v = 0; v < 4; ++v) std::memcpy(out + 64 * v + 4 * l, blk + 4 * v, 4);
      if constexpr (kFifth) {
        for (int i = 0; i < 8; ++i) {
          std::memcpy(out + kRows16Q5KQhAt + 64 * i + 4 * l, blk + offsetof(B, qh) + 4 * i, 4);
        }
      }
      for (int p = 0; p < 4; ++p) {
        for (int i = 0; i < 8; ++i) {
          std::memcpy(out + kNibblesAt + 64 * q4k_rows16_vector(p, i) + 4 * l, blk + offsetof(B, qs) + 32 * p + 4 * i,
                      4);
        }
      }
    }
  }
}

// Every 4 bytes of a row's block go to lane l of one vector (the d's 2 bytes to fp16 l of the last 32): the scales
// to vectors 0-3, then for each dword index i and half h its qh dword and its two ql dwords to 4 + 6i + 3h + 0, 1, 2.
void repack_q6_k(const uint8_t* src, size_t row_bytes, int64_t nb, int64_t g, uint8_t* out) {
  static_assert(sizeof(BlockQ6_K) * kRows16 == kRows16Q6KBlockBytes);
  for (int64_t b = 0; b < nb; ++b, out += kRows16Q6KBlockBytes) {
    for (int64_t l = 0; l < kRows16; ++l) {
      const uint8_t* blk =
          src + static_cast<size_t>(g * kRows16 + l) * row_bytes + static_cast<size_t>(b) * sizeof(BlockQ6_K);
      for (int c = 0; c < 4; ++c) std::memcpy(out + 64 * c + 4 * l, blk + offsetof(BlockQ6_K, scales) + 4 * c, 4);
      for (int i = 0; i < 8; ++i) {
        for (int h = 0; h < 2; ++h) {
          uint8_t* v = out + kRows16Q6KCodesAt + 64 * (6 * i + 3 * h) + 4 * l;
          std::memcpy(v, blk + offsetof(BlockQ6_K, qh) + 32 * h + 4 * i, 4);
          std::memcpy(v + 64, blk + offsetof(BlockQ6_K, ql) + 64 * h + 4 * i, 4);
          std::memcpy(v + 128, blk + offsetof(BlockQ6_K, ql) + 64 * h + 32 + 4 * i, 4);
        }
      }
      std::memcpy(out + kRows16Q6KDAt + 2 * l, blk + offsetof(BlockQ6_K, d), 2);
    }
  }
}

// The block's dwords in order: dword i of a row's block to lane l of vector i (its 8-byte head to vectors 0 and 1, qs
// dword i to vector 2 + i).
void repack_iq4_xs(const uint8_t* src, size_t row_bytes, int64_t nb, int64_t g, uint8_t* out) {
  static_assert(sizeof(BlockIQ4_XS) * kRows16 == kRows16Iq4XsBlockBytes && offsetof(BlockIQ4_XS, qs) == 8 &&
                kRows16Iq4XsQsAt == 2 * 64);
  for (int64_t b = 0; b < nb; ++b, out += kRows16Iq4XsBlockBytes) {
    for (int64_t l = 0; l < kRows16; ++l) {
      const uint8_t* blk =
          src + static_cast<size_t>(g * kRows16 + l) * row_bytes + static_cast<size_t>(b) * sizeof(BlockIQ4_XS);
      for (size_t i = 0; i < sizeof(BlockIQ4_XS) / 4; ++i) std::memcpy(out + 64 * i + 4 * l, blk + 4 * i, 4);
    }
  }
}

}  // namespace

void repack_rows16(GgmlType type, const uint8_t* src, size_t row_bytes, int64_t cols, int64_t g0, int64_t g1,
                   uint8_t* dst) {
  assert(g0 <= g1 && rows16_layout_fits(type, kRows16, cols));
  const int64_t nb = cols / (type == GgmlType::Q8_0 || type == GgmlType::MXFP4 ? kQK : kQK_K);
  assert(row_bytes == quant::row_bytes(type, cols));
  for (int64_t g = g0; g < g1; ++g) {
    uint8_t* out = dst + static_cast<size_t>(g) * kRows16 * row_bytes;
    switch (type) {
      case GgmlType::Q8_0: repack_q8_0(src, row_bytes, nb, g, out); break;
      case GgmlType::Q4_K: repack_q45_k<BlockQ4_K>(src, row_bytes, nb, g, out); break;
      case GgmlType::Q5_K: repack_q45_k<BlockQ5_K>(src, row_bytes, nb, g, out); break;
      case GgmlType::MXFP4: repack_mxfp4(src, row_bytes, nb, g, out); break;
      case GgmlType::IQ4_XS: repack_iq4_xs(src, row_bytes, nb, g, out); break;
      default: repack_q6_k(src, row_bytes, nb, g, out); break;
    }
  }
}

}  // namespace moetier::quant
