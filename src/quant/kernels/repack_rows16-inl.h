// The rows16 repack (quant/repack.h) with AVX-512 (Highway's AVX3_DL target, the only one with rows16 kernels): the
// same bytes as the scalar specification, repack_rows16, which moves 4 bytes at a time from one row to one lane. Here
// each 64-byte vector of a group's block is one gather of the 16 rows' dwords at the same place (vpgatherdd, row r's at
// r * row_bytes from row 0's) and one store, full-line and non-temporal where the vector starts a cache line (the
// copy's fresh pages are not read for ownership first), with the next group's rows (one contiguous span) asked for
// while this group is written: its 16 rows read side by side are 16 streams, more than the hardware prefetcher follows.
// The fp16 scales (Q8_0's and Q6_K's d) are gathered as dwords and narrowed (vpmovdw) into their 32 bytes, MXFP4's
// exponent bytes (vpmovdb) into their 16. Gathers measured on Zen 4 only: on Intel CPUs with the Gather Data Sampling
// mitigation in their microcode they are far slower, and the scalar specification may be the faster there (not
// measured). Measured in docs/design.md ("Repack").
// Included by int8_kernels.cpp inside its per-target namespace.
#if defined(MOETIER_QUANT_KERNELS_REPACK_ROWS16_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MOETIER_QUANT_KERNELS_REPACK_ROWS16_INL_H_
#undef MOETIER_QUANT_KERNELS_REPACK_ROWS16_INL_H_
#else
#define MOETIER_QUANT_KERNELS_REPACK_ROWS16_INL_H_
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "hwy/highway.h"
#include "quant/blocks.h"
#include "quant/repack.h"

#if HWY_TARGET == HWY_AVX3_DL
#include <immintrin.h>

HWY_BEFORE_NAMESPACE();
namespace moetier::quant::kernels {
namespace HWY_NAMESPACE {
namespace repack16 {

// Where a group's block is written: one vector of 16 dwords per call, at `at` bytes into the block.
class GroupBlock {
 public:
  // row0: row 0's GGUF block; lanes: r * row_bytes in lane r.
  GroupBlock(const uint8_t* row0, __m512i lanes, uint8_t* out) : row0_(row0), lanes_(lanes), out_(out) {}
  // The vector at byte `at` of the block: dword `src` (a byte offset) of each row's block, each byte XOR `flip`. Every
  // dword read here, in Halves and in Bytes lies within its row's block (the last ones: Q8_0's bytes 30-33 of 34,
  // Q6_K's 206-209 of 210, MXFP4's 13-16 of 17, IQ4_XS's 132-135 of 136), so nothing past the matrix is read.
  HWY_INLINE void Dwords(size_t at, size_t src, uint8_t flip = 0) const {
    __m512i v = _mm512_i32gather_epi32(lanes_, row0_ + src, 1);
    if (flip != 0) v = _mm512_xor_si512(v, _mm512_set1_epi8(static_cast<char>(flip)));
    uint8_t* p = out_ + at;
    if ((reinterpret_cast<uintptr_t>(p) & 63) == 0) {
      _mm512_stream_si512(reinterpret_cast<__m512i*>(p), v);
    } else {
      _mm512_storeu_si512(p, v);
    }
  }
  // The 16 rows' fp16 in dword `src` of their blocks (its low half, or with `high` its high one), in row order at byte
  // `at` (32 bytes).
  HWY_INLINE void Halves(size_t at, size_t src, bool high) const {
    __m512i v = _mm512_i32gather_epi32(lanes_, row0_ + src, 1);
    if (high) v = _mm512_srli_epi32(v, 16);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out_ + at), _mm512_cvtepi32_epi16(v));
  }
  // The 16 rows' byte `src` of their blocks, in row order at byte `at` (16 bytes).
  HWY_INLINE void Bytes(size_t at, size_t src) const {
    const __m512i v = _mm512_i32gather_epi32(lanes_, row0_ + src, 1);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out_ + at), _mm512_cvtepi32_epi8(v));
  }

 private:
  const uint8_t* row0_;
  __m512i lanes_;
  uint8_t* out_;
};

template <class B>
HWY_INLINE void Q45K(const GroupBlock& o) {
  constexpr bool kFifth = std::is_same_v<B, BlockQ5_K>;
  constexpr size_t kNibblesAt = kFifth ? kRows16Q5KNibblesAt : 256;
  for (int v = 0; v < 4; ++v) o.Dwords(64 * v, 4 * v);
  if constexpr (kFifth) {
    for (int i = 0; i < 8; ++i) o.Dwords(kRows16Q5KQhAt + 64 * i, offsetof(B, qh) + 4 * i);
  }
  for (int p = 0; p < 4; ++p) {
    for (int i = 0; i < 8; ++i) o.Dwords(kNibblesAt + 64 * q4k_rows16_vector(p, i), offsetof(B, qs) + 32 * p + 4 * i);
  }
}

HWY_INLINE void Q6K(const GroupBlock& o) {
  for (int c = 0; c < 4; ++c) o.Dwords(64 * c, offsetof(BlockQ6_K, scales) + 4 * c);
  for (int i = 0; i < 8; ++i) {
    for (int h = 0; h < 2; ++h) {
      const size_t at = kRows16Q6KCodesAt + 64 * static_cast<size_t>(6 * i + 3 * h);
      o.Dwords(at, offsetof(BlockQ6_K, qh) + 32 * h + 4 * i);
      o.Dwords(at + 64, offsetof(BlockQ6_K, ql) + 64 * h + 4 * i);
      o.Dwords(at + 128, offsetof(BlockQ6_K, ql) + 64 * h + 32 + 4 * i);
    }
  }
  static_assert(offsetof(BlockQ6_K, d) + 2 == sizeof(BlockQ6_K));  // the block's last 2 bytes: the dword before them
  o.Halves(kRows16Q6KDAt, offsetof(BlockQ6_K, d) - 2, true);
}

HWY_INLINE void Q8_0(const GroupBlock& o) {
  static_assert(offsetof(BlockQ8_0, d) == 0);  // the block's first 2 bytes: the dword at 0, its low half
  o.Halves(0, 0, false);
  for (int q = 0; q < kQK / 4; ++q) o.Dwords(32 + 64 * q, offsetof(BlockQ8_0, qs) + 4 * q, 0x80);
}

HWY_INLINE void Mxfp4(const GroupBlock& o) {
  for (int i = 0; i < 4; ++i) o.Dwords(64 * i, offsetof(BlockMXFP4, qs) + 4 * i);
  static_assert(offsetof(BlockMXFP4, e) == 0);  // the block's first byte: the dword at 0, its low byte
  o.Bytes(kRows16Mxfp4EAt, 0);
}

HWY_INLINE void Iq4Xs(const GroupBlock& o) {
  for (size_t i = 0; i < sizeof(BlockIQ4_XS) / 4; ++i) o.Dwords(64 * i, 4 * i);
}

// repack_rows16's contract (quant/repack.h); row_bytes * 15 + a row's bytes must fit an int32 (gather offsets).
HWY_INLINE void Groups(GgmlType type, const uint8_t* src, size_t row_bytes, int64_t cols, int64_t g0, int64_t g1,
                       uint8_t* dst) {
  const size_t block = type == GgmlType::Q8_0   ? sizeof(BlockQ8_0)
                       : type == GgmlType::Q4_K ? sizeof(BlockQ4_K)
                       : type == GgmlType::Q5_K ? sizeof(BlockQ5_K)
                       : type == GgmlType::MXFP4 ? sizeof(BlockMXFP4)
                       : type == GgmlType::IQ4_XS ? sizeof(BlockIQ4_XS)
                                                 : sizeof(BlockQ6_K);
  const int64_t nb = cols / (type == GgmlType::Q8_0 || type == GgmlType::MXFP4 ? kQK : kQK_K);
  const __m512i lanes = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32(static_cast<int32_t>(row_bytes)));
  // A group's 16 rows are one contiguous span (16 * row_bytes): the next group's is asked for while this one is
  // written, a share at each block, so the gathers find it in cache (the rows' 16 interleaved streams are more than
  // the hardware prefetcher follows).
  const size_t group_bytes = kRows16 * row_bytes;
  const size_t share = (group_bytes + static_cast<size_t>(nb) * 64 - 1) / (static_cast<size_t>(nb) * 64) * 64;
  for (int64_t g = g0; g < g1; ++g) {
    const uint8_t* rows = src + static_cast<size_t>(g) * group_bytes;
    uint8_t* out = dst + static_cast<size_t>(g) * group_bytes;
    for (int64_t b = 0; b < nb; ++b) {
      if (g + 1 < g1) {
        const size_t end = std::min(group_bytes, static_cast<size_t>(b + 1) * share);
        for (size_t off = static_cast<size_t>(b) * share; off < end; off += 64) hwy::Prefetch(rows + group_bytes + off);
      }
      const GroupBlock o(rows + static_cast<size_t>(b) * block, lanes, out + static_cast<size_t>(b) * kRows16 * block);
      switch (type) {
        case GgmlType::Q8_0: Q8_0(o); break;
        case GgmlType::Q4_K: Q45K<BlockQ4_K>(o); break;
        case GgmlType::Q5_K: Q45K<BlockQ5_K>(o); break;
        case GgmlType::MXFP4: Mxfp4(o); break;
        case GgmlType::IQ4_XS: Iq4Xs(o); break;
        default: Q6K(o); break;
      }
    }
  }
  _mm_sfence();  // the non-temporal stores before whatever the caller does next (threads joining)
}

}  // namespace repack16
}  // namespace HWY_NAMESPACE
}  // namespace moetier::quant::kernels
HWY_AFTER_NAMESPACE();

#endif  // HWY_TARGET == HWY_AVX3_DL
#endif  // MOETIER_QUANT_KERNELS_REPACK_ROWS16_INL_H_
