// Integer dot-product kernels (int8_kernels.h), compiled once per Highway target and dispatched at run time.
//
// Each decoder turns one weight block into int16 values w = code * integer sub-block scale (at most 4096 in
// magnitude: Q6_K's 32 * 128), the sub-block mins as int16 where the type has them, and the block's float
// scale(s). The dot product multiplies w with the int16-widened activation codes pairwise into int32 lanes
// (ReorderWidenMulAccumulate: one pmaddwd per 16 elements on AVX2), so a 256-element block sums exactly (a lane
// sums 32 products of at most 4096 * 127, below 2^24, so its conversion to float is exact too); the block then
// adds d_w * d_x * sum (and - dmin_w * d_x * sum(mins * bsums)) to float lanes. Bit patterns: quant/blocks.h;
// formulas: quant/dequant_*.cpp.

#include "quant/kernels/hwy_targets.h"  // must precede the Highway headers

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "quant/kernels/int8_kernels.cpp"
#include "hwy/foreach_target.h"  // must precede highway.h
#include "hwy/highway.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#include "quant/blocks.h"
#include "quant/e8m0.h"
#include "quant/fp16.h"
#include "quant/kernels/block_bytes-inl.h"
#include "quant/kernels/int8_arm.h"
#include "quant/kernels/int8_avx2-inl.h"
#include "quant/kernels/int8_kernels.h"
#include "quant/kernels/int8_vnni512-inl.h"
#include "quant/kernels/int8_rows16-inl.h"  // after int8_vnni512-inl.h, whose DpBusdBcast it takes
#include "quant/kernels/repack_rows16-inl.h"
#include "quant/kquant_scales.h"
#include "quant/repack.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

HWY_BEFORE_NAMESPACE();
namespace moetier::quant::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Weights and activation codes travel as int16 vectors of at most 16 lanes: one K sub-block of 16 elements per
// AVX2 vector; narrower targets loop over a sub-block.
using D16 = hn::CappedTag<int16_t, 16>;
using DU16 = hn::RebindToUnsigned<D16>;
using D32 = hn::Repartition<int32_t, D16>;
using DF = hn::Repartition<float, D16>;
using V16 = hn::Vec<D16>;
using V32 = hn::Vec<D32>;
using VF = hn::Vec<DF>;

HWY_INLINE size_t N16() { return hn::Lanes(D16()); }
HWY_INLINE V16 LoadU8(const uint8_t* p) { return hn::PromoteTo(D16(), hn::LoadU(hn::Rebind<uint8_t, D16>(), p)); }
HWY_INLINE V16 LoadI8(const int8_t* p) { return hn::PromoteTo(D16(), hn::LoadU(hn::Rebind<int8_t, D16>(), p)); }
HWY_INLINE V16 Set16(int v) { return hn::Set(D16(), static_cast<int16_t>(v)); }

// How a type's offsets enter the dot product: none (codes are signed), one float m per 32-block (Q4_1, Q5_1:
// m * d_x * sum of the block's activation codes), or an int16 min per 16-element sub-block with a float dmin
// (Q2_K, Q4_K, Q5_K: dmin * d_x * sum(min * bsum)).
enum class Mins { none, block, k16 };

// Every decoder: kQK elements per block of kBytes bytes, the same as the activation block of its q8 format.
// Decode(b, put, mn, d, dm) calls put(i, v) with the int16 weights i .. i + N16() - 1 of the block (every i once,
// in any order), writes the 16 sub-block mins mn[16] (0..63) for Mins::k16, and sets d to the block scale and dm to the dmin or m. `put`
// either stores the vector (several tokens share a decoded block) or multiplies it at once (one token).

struct DecQ8_0 {
  static constexpr int kQK = quant::kQK;
  static constexpr size_t kBytes = sizeof(BlockQ8_0);
  static constexpr Mins kMins = Mins::none;
  template <class Put>
  static HWY_INLINE void Decode(const uint8_t* b, const Put& put, uint8_t*, float& d, float&) {
    d = Fp16At(b);
    const auto* qs = reinterpret_cast<const int8_t*>(b + offsetof(BlockQ8_0, qs));
    for (size_t i = 0; i < kQK; i += N16()) put(i, LoadI8(qs + i));
  }
};

// Q4_0 / Q4_1: element j < 16 is the low nibble of qs[j], element j + 16 the high nibble; Q4_0 subtracts 8.
template <bool kMin>
struct DecQ4Legacy {
  using Block = std::conditional_t<kMin, BlockQ4_1, BlockQ4_0>;
  static constexpr int kQK = quant::kQK;
  static constexpr size_t kBytes = sizeof(Block);
  static constexpr Mins kMins = kMin ? Mins::block : Mins::none;
  template <class Put>
  static HWY_INLINE void Decode(const uint8_t* b, const Put& put, uint8_t*, float& d, float& m) {
    d = Fp16At(b);
    if constexpr (kMin) m = Fp16At(b + offsetof(BlockQ4_1, m));
    const uint8_t* qs = b + offsetof(Block, qs);
    const V16 bias = Set16(kMin ? 0 : 8);
    for (size_t i = 0; i < kQK / 2; i += N16()) {
      const V16 v = LoadU8(qs + i);
      put(i, hn::Sub(hn::And(v, Set16(0xf)), bias));
      put(kQK / 2 + i, hn::Sub(hn::ShiftRight<4>(v), bias));
    }
  }
};

// Q5_0 / Q5_1: as Q4 plus bit j of the little-endian uint32 qh as the fifth bit of element j; Q5_0 subtracts 16.
template <bool kMin>
struct DecQ5Legacy {
  using Block = std::conditional_t<kMin, BlockQ5_1, BlockQ5_0>;
  static constexpr int kQK = quant::kQK;
  static constexpr size_t kBytes = sizeof(Block);
  static constexpr Mins kMins = kMin ? Mins::block : Mins::none;
  template <class Put>
  static HWY_INLINE void Decode(const uint8_t* b, const Put& put, uint8_t*, float& d, float& m) {
    static constexpr uint16_t kBit[16] = {1,     2,     4,     8,      16,     32,     64,     128,
                                          1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12, 1 << 13, 1 << 14, 1 << 15};
    const DU16 du;
    d = Fp16At(b);
    if constexpr (kMin) m = Fp16At(b + offsetof(BlockQ5_1, m));
    uint32_t qh;
    std::memcpy(&qh, b + offsetof(Block, qh), 4);
    const auto qh_lo = hn::Set(du, static_cast<uint16_t>(qh & 0xffff));  // fifth bits of elements 0..15
    const auto qh_hi = hn::Set(du, static_cast<uint16_t>(qh >> 16));     // and of 16..31
    const uint8_t* qs = b + offsetof(Block, qs);
    const V16 bias = Set16(kMin ? 0 : 16);
    const auto one = hn::Set(du, uint16_t{1});
    for (size_t i = 0; i < kQK / 2; i += N16()) {
      const auto bit = hn::LoadU(du, kBit + i);
      const V16 h_lo = hn::BitCast(D16(), hn::ShiftLeft<4>(hn::Min(hn::And(qh_lo, bit), one)));
      const V16 h_hi = hn::BitCast(D16(), hn::ShiftLeft<4>(hn::Min(hn::And(qh_hi, bit), one)));
      const V16 v = LoadU8(qs + i);
      put(i, hn::Sub(hn::Or(hn::And(v, Set16(0xf)), h_lo), bias));
      put(kQK / 2 + i, hn::Sub(hn::Or(hn::ShiftRight<4>(v), h_hi), bias));
    }
  }
};

// IQ4_NL and MXFP4: a 16-entry int8 table indexed by the nibbles (Q4_0 order).
struct DecIQ4_NL {
  static constexpr int kQK = quant::kQK;
  static constexpr size_t kBytes = sizeof(BlockIQ4_NL);
  static constexpr Mins kMins = Mins::none;
  template <class Put>
  static HWY_INLINE void Decode(const uint8_t* b, const Put& put, uint8_t*, float& d, float&) {
    d = Fp16At(b);
    HWY_ALIGN int8_t q[kQK];
    LookupNibbles(kIq4nlValues, b + offsetof(BlockIQ4_NL, qs), q);
    for (size_t i = 0; i < kQK; i += N16()) put(i, LoadI8(q + i));
  }
};

struct DecMXFP4 {
  static constexpr int kQK = quant::kQK;
  static constexpr size_t kBytes = sizeof(BlockMXFP4);
  static constexpr Mins kMins = Mins::none;
  template <class Put>
  static HWY_INLINE void Decode(const uint8_t* b, const Put& put, uint8_t*, float& d, float&) {
    d = e8m0_to_fp32_half(b[0]);  // with the doubled E2M1 table: exact (quant/blocks.h)
    HWY_ALIGN int8_t q[kQK];
    LookupNibbles(kMxfp4DoubledValues, b + offsetof(BlockMXFP4, qs), q);
    for (size_t i = 0; i < kQK; i += N16()) put(i, LoadI8(q + i));
  }
};

// The K formats: sub-block j of 16 elements is elements 16j .. 16j + 15 of the super-block.
struct DecQ2_K {
  static constexpr int kQK = kQK_K;
  static constexpr size_t kBytes = sizeof(BlockQ2_K);
  static constexpr Mins kMins = Mins::k16;
  template <class Put>
  static HWY_INLINE void Decode(const uint8_t* b, const Put& put, uint8_t* HWY_RESTRICT mn, float& d, float& dmin) {
    d = Fp16At(b + offsetof(BlockQ2_K, d));
    dmin = Fp16At(b + offsetof(BlockQ2_K, dmin));
    const uint8_t* scales = b + offsetof(BlockQ2_K, scales);
    for (int half = 0; half < 2; ++half) {
      const uint8_t* q = b + offsetof(BlockQ2_K, qs) + 32 * half;
      for (int k = 0; k < 4; ++k) {  // bit pair 2k of q[] holds elements 32k .. 32k+32 of this half
        for (int g = 0; g < 2; ++g) {
          const int j = 8 * half + 2 * k + g;
          const V16 sc = Set16(scales[j] & 0xf);
          mn[j] = static_cast<uint8_t>(scales[j] >> 4);
          for (size_t l = 0; l < 16; l += N16()) {
            const V16 v = hn::And(hn::ShiftRightSame(LoadU8(q + 16 * g + l), 2 * k), Set16(3));
            put(16 * j + l, hn::Mul(v, sc));
          }
        }
      }
    }
  }
};

struct DecQ3_K {
  static constexpr int kQK = kQK_K;
  static constexpr size_t kBytes = sizeof(BlockQ3_K);
  static constexpr Mins kMins = Mins::none;
  template <class Put>
  static HWY_INLINE void Decode(const uint8_t* b, const Put& put, uint8_t*, float& d, float&) {
    d = Fp16At(b + offsetof(BlockQ3_K, d));
    const uint8_t* scales = b + offsetof(BlockQ3_K, scales);
    const uint8_t* hmask = b + offsetof(BlockQ3_K, hmask);
    for (int half = 0; half < 2; ++half) {
      const uint8_t* q = b + offsetof(BlockQ3_K, qs) + 32 * half;
      for (int k = 0; k < 4; ++k) {
        const int hbit = 4 * half + k;  // bit of hmask[l] holding the third bit of these 32 elements
        for (int g = 0; g < 2; ++g) {
          const int j = 8 * half + 2 * k + g;
          const V16 sc = Set16(detail::q3_k_scale6(j, scales) - 32);
          for (size_t l = 0; l < 16; l += N16()) {
            const size_t e = 16 * static_cast<size_t>(g) + l;
            const V16 low2 = hn::And(hn::ShiftRightSame(LoadU8(q + e), 2 * k), Set16(3));
            const V16 h = hn::And(hn::ShiftRightSame(LoadU8(hmask + e), hbit), Set16(1));
            const V16 q3 = hn::Sub(hn::Add(low2, hn::ShiftLeft<2>(h)), Set16(4));  // low2 - (h ? 0 : 4)
            put(16 * j + l, hn::Mul(q3, sc));
          }
        }
      }
    }
  }
};

template <bool kHigh>  // Q4_K, or Q5_K with its fifth bits
struct DecQ45_K {
  using Block = std::conditional_t<kHigh, BlockQ5_K, BlockQ4_K>;
  static constexpr int kQK = kQK_K;
  static constexpr size_t kBytes = sizeof(Block);
  static constexpr Mins kMins = Mins::k16;
  template <class Put>
  static HWY_INLINE void Decode(const uint8_t* b, const Put& put, uint8_t* HWY_RESTRICT mn, float& d, float& dmin) {
    d = Fp16At(b + offsetof(Block, d));
    dmin = Fp16At(b + offsetof(Block, dmin));
    uint8_t scale[8], min[8];
    detail::unpack_scale_min_k4(b + offsetof(Block, scales), scale, min);
    // One min per 32 elements = two sub-blocks of 16: each byte doubled, four at a time in a 64-bit word.
    const auto doubled = [](const uint8_t* m4) {
      uint32_t x;
      std::memcpy(&x, m4, 4);
      uint64_t t = x;
      t = (t | t << 16) & 0x0000ffff0000ffffull;
      t = (t | t << 8) & 0x00ff00ff00ff00ffull;
      return t | t << 8;
    };
    const uint64_t m03 = doubled(min), m47 = doubled(min + 4);
    std::memcpy(mn, &m03, 8);
    std::memcpy(mn + 8, &m47, 8);
    const uint8_t* qs = b + offsetof(Block, qs);
    // Sub-blocks 2p and 2p + 1 (elements 64p .. 64p + 63) are the low and high nibbles of qs[32p .. 32p + 31].
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) {
      const V16 sc_lo = Set16(scale[2 * p]);
      const V16 sc_hi = Set16(scale[2 * p + 1]);
      for (size_t i = 0; i < 32; i += N16()) {
        const V16 v = LoadU8(qs + 32 * p + i);
        V16 lo = hn::And(v, Set16(0xf));
        V16 hi = hn::ShiftRight<4>(v);
        if constexpr (kHigh) {  // bit s of qh[i] is the fifth bit of element 32s + i
          const V16 h = LoadU8(b + offsetof(BlockQ5_K, qh) + i);
          lo = hn::Or(lo, hn::ShiftLeft<4>(hn::And(hn::ShiftRightSame(h, 2 * p), Set16(1))));
          hi = hn::Or(hi, hn::ShiftLeft<4>(hn::And(hn::ShiftRightSame(h, 2 * p + 1), Set16(1))));
        }
        put(64 * p + i, hn::Mul(lo, sc_lo));
        put(64 * p + 32 + i, hn::Mul(hi, sc_hi));
      }
    }
  }
};

struct DecQ6_K {
  static constexpr int kQK = kQK_K;
  static constexpr size_t kBytes = sizeof(BlockQ6_K);
  static constexpr Mins kMins = Mins::none;
  template <class Put>
  static HWY_INLINE void Decode(const uint8_t* b, const Put& put, uint8_t*, float& d, float&) {
    d = Fp16At(b + offsetof(BlockQ6_K, d));
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = b + offsetof(BlockQ6_K, ql) + 64 * half;
      const uint8_t* qh = b + offsetof(BlockQ6_K, qh) + 32 * half;
      const auto* sc = reinterpret_cast<const int8_t*>(b + offsetof(BlockQ6_K, scales)) + 8 * half;
      for (int r = 0; r < 4; ++r) {
        const uint8_t* lo = ql + 32 * (r % 2);
        for (size_t l = 0; l < 32; l += N16()) {  // N16() <= 16 divides 16: one sub-block scale per vector
          const V16 v = LoadU8(lo + l);
          const V16 q4 = (r / 2) ? hn::ShiftRight<4>(v) : hn::And(v, Set16(0xf));
          const V16 h2 = hn::And(hn::ShiftRightSame(LoadU8(qh + l), 2 * r), Set16(3));
          const V16 q6 = hn::Sub(hn::Or(q4, hn::ShiftLeft<4>(h2)), Set16(32));
          put(128 * half + 32 * r + l, hn::Mul(q6, Set16(sc[2 * r + static_cast<int>(l / 16)])));
        }
      }
    }
  }
};

struct DecIQ4_XS {
  static constexpr int kQK = kQK_K;
  static constexpr size_t kBytes = sizeof(BlockIQ4_XS);
  static constexpr Mins kMins = Mins::none;
  template <class Put>
  static HWY_INLINE void Decode(const uint8_t* b, const Put& put, uint8_t*, float& d, float&) {
    d = Fp16At(b);
    const uint16_t scales_h = Load16(b + offsetof(BlockIQ4_XS, scales_h));
    const uint8_t* scales_l = b + offsetof(BlockIQ4_XS, scales_l);
    const uint8_t* qs = b + offsetof(BlockIQ4_XS, qs);
    HWY_ALIGN int8_t q[32];
    for (int s = 0; s < 8; ++s) {
      const int low4 = (scales_l[s / 2] >> (4 * (s % 2))) & 0xf;
      const int high2 = (scales_h >> (2 * s)) & 3;
      const V16 sc = Set16((low4 | high2 << 4) - 32);
      LookupNibbles(kIq4nlValues, qs + 16 * s, q);
      for (size_t i = 0; i < 32; i += N16()) put(32 * s + i, hn::Mul(LoadI8(q + i), sc));
    }
  }
};

// Adds one block's products to a token's float lanes: isum (int32 lanes) times d_w * d_x, then the min terms.
template <class Dec>
HWY_INLINE void AddBlock(VF& acc, float& macc, hn::Vec<D32> isum, const uint8_t* HWY_RESTRICT mn, float d, float dm,
                         float dx, const int16_t* HWY_RESTRICT sums) {
  const D16 d16;
  const D32 d32;
  const DF df;
  acc = hn::MulAdd(hn::ConvertTo(df, isum), hn::Set(df, d * dx), acc);
  if constexpr (Dec::kMins == Mins::k16) {
    V32 m0 = hn::Zero(d32), m1 = hn::Zero(d32);
    for (size_t i = 0; i < 16; i += hn::Lanes(d16))
      m0 = hn::ReorderWidenMulAccumulate(d32, LoadU8(mn + i), hn::LoadU(d16, sums + i), m0, m1);
    acc = hn::MulAdd(hn::ConvertTo(df, hn::Add(m0, m1)), hn::Set(df, -dm * dx), acc);
  } else if constexpr (Dec::kMins == Mins::block) {
    macc += dm * dx * static_cast<float>(sums[0] + sums[1]);
  }
}

// y[t * y_stride] = row . x[t0 + t] for t < NT. One token multiplies each decoded vector at once; several tokens
// share a block decoded into a buffer.
template <class Dec, size_t NT>
HWY_INLINE void DotTile(const uint8_t* HWY_RESTRICT row, const Q8Rows& x, int64_t t0, float* HWY_RESTRICT y,
                        int64_t y_stride) {
  const D16 d16;
  const D32 d32;
  const DF df;
  const size_t N = hn::Lanes(d16);
  const int64_t cols = x.cols;
  const int64_t nb = cols / Dec::kQK;  // weight blocks = activation blocks per row
  const int64_t n_sums = cols / 16;
  VF acc[NT];
  float macc[NT];
  for (size_t t = 0; t < NT; ++t) acc[t] = hn::Zero(df), macc[t] = 0.0f;
  HWY_ALIGN int16_t w[Dec::kQK];  // [kQK]: one decoded block (NT > 1)
  HWY_ALIGN uint8_t mn[16];       // [16]: its sub-block mins (Mins::k16)
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = row + static_cast<size_t>(b) * Dec::kBytes;
    float d = 0.0f, dm = 0.0f;
    if constexpr (NT == 1) {
      PrefetchAhead<Dec::kBytes>(blk);
      const int8_t* HWY_RESTRICT xq = x.q + t0 * cols + b * Dec::kQK;
      V32 s0 = hn::Zero(d32), s1 = hn::Zero(d32);
      Dec::Decode(blk, [&](size_t i, V16 v) { s0 = hn::ReorderWidenMulAccumulate(d32, v, LoadI8(xq + i), s0, s1); },
                  mn, d, dm);
      AddBlock<Dec>(acc[0], macc[0], hn::Add(s0, s1), mn, d, dm, x.d[t0 * nb + b],
                    x.sums + t0 * n_sums + b * (Dec::kQK / 16));
    } else {
      Dec::Decode(blk, [&](size_t i, V16 v) { hn::Store(v, d16, w + i); }, mn, d, dm);
      for (size_t t = 0; t < NT; ++t) {
        const int64_t tok = t0 + static_cast<int64_t>(t);
        const int8_t* HWY_RESTRICT xq = x.q + tok * cols + b * Dec::kQK;
        V32 s0 = hn::Zero(d32), s1 = hn::Zero(d32);
        for (size_t i = 0; i < static_cast<size_t>(Dec::kQK); i += N)
          s0 = hn::ReorderWidenMulAccumulate(d32, hn::Load(d16, w + i), LoadI8(xq + i), s0, s1);
        AddBlock<Dec>(acc[t], macc[t], hn::Add(s0, s1), mn, d, dm, x.d[tok * nb + b],
                      x.sums + tok * n_sums + b * (Dec::kQK / 16));
      }
    }
  }
  for (size_t t = 0; t < NT; ++t)
    y[static_cast<int64_t>(t) * y_stride] = hn::GetLane(hn::SumOfLanes(df, acc[t])) + macc[t];
}

template <class Dec>
void Rows(const uint8_t* w, size_t row_bytes, const Q8Rows& x, int64_t n_tok, float* y, int64_t y_stride,
          int64_t r0, int64_t r1) {
  RowsByTokenTiles(w, row_bytes, n_tok, r0, r1, false, [&](auto nt, const uint8_t* row, int64_t r, int64_t t) HWY_ATTR {
    DotTile<Dec, decltype(nt)::value>(row, x, t, y + t * y_stride + r, y_stride);
  });
}

bool UsesTokenTiles(GgmlType type) {
#if HWY_TARGET == HWY_AVX3_DL
  if (type == GgmlType::Q8_0) return true;  // vnni512::Block32Lanes<Q8_0Offset>, and the rows16 layout's
  if (type == GgmlType::IQ4_XS) return true;  // vnni512::Iq4XsLanes
#endif
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  return type == GgmlType::Q4_K || type == GgmlType::Q5_K || type == GgmlType::Q6_K || type == GgmlType::Q4_0 ||
         type == GgmlType::Q5_0 || type == GgmlType::MXFP4;
#else
  (void)type;
  return false;
#endif
}

int CodeOffset(GgmlType type) {
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  return avx2::CodeOffset(type);
#else
  (void)type;
  return 0;
#endif
}

void MatmulRowsQ8(GgmlType type, const uint8_t* w, size_t row_bytes, const Q8Rows& x, int64_t n_tok, float* y,
                  int64_t y_stride, int64_t r0, int64_t r1) {
#if HWY_TARGET == HWY_AVX3_DL
  if (vnni512::MatmulRows(type, w, row_bytes, x, n_tok, y, y_stride, r0, r1)) return;
#endif
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  if (avx2::MatmulRows(type, w, row_bytes, x, n_tok, y, y_stride, r0, r1)) return;
#endif
#define MOETIER_ROWS(Dec) return Rows<Dec>(w, row_bytes, x, n_tok, y, y_stride, r0, r1)
  switch (type) {
    case GgmlType::Q4_0: MOETIER_ROWS(DecQ4Legacy<false>);
    case GgmlType::Q4_1: MOETIER_ROWS(DecQ4Legacy<true>);
    case GgmlType::Q5_0: MOETIER_ROWS(DecQ5Legacy<false>);
    case GgmlType::Q5_1: MOETIER_ROWS(DecQ5Legacy<true>);
    case GgmlType::Q8_0: MOETIER_ROWS(DecQ8_0);
    case GgmlType::Q2_K: MOETIER_ROWS(DecQ2_K);
    case GgmlType::Q3_K: MOETIER_ROWS(DecQ3_K);
    case GgmlType::Q4_K: MOETIER_ROWS(DecQ45_K<false>);
    case GgmlType::Q5_K: MOETIER_ROWS(DecQ45_K<true>);
    case GgmlType::Q6_K: MOETIER_ROWS(DecQ6_K);
    case GgmlType::IQ4_NL: MOETIER_ROWS(DecIQ4_NL);
    case GgmlType::IQ4_XS: MOETIER_ROWS(DecIQ4_XS);
    case GgmlType::MXFP4: MOETIER_ROWS(DecMXFP4);
    default: HWY_ASSERT(false);  // callers check q8_format()
  }
#undef MOETIER_ROWS
}

// One token row: per block the scale from the largest magnitude, then codes rounded half to even (Round) in
// float lanes, narrowed to int16; then the sums of every 16 codes.
void QuantizeQ8Row(const float* x, int64_t tok, const Q8Rows& out) {
  const hn::CappedTag<float, 16> df;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::Rebind<int16_t, decltype(df)> dh;
  const hn::Rebind<int8_t, decltype(df)> d8;
  const size_t N = hn::Lanes(df);
  const int64_t cols = out.cols;
  const int64_t blk = q8_block(out.format);
  const int64_t nb = cols / blk;
  const float* xr = x + tok * cols;
  int8_t* q = out.q + tok * cols;
  float* d = out.d + tok * nb;
  for (int64_t b = 0; b < nb; ++b) {
    const float* xb = xr + b * blk;
    auto vmax = hn::Zero(df), vzero = hn::Zero(df);  // vzero: the sum of x * 0, NaN iff some x is NaN or infinite
    for (int64_t i = 0; i < blk; i += static_cast<int64_t>(N)) {
      const auto v = hn::LoadU(df, xb + i);
      vmax = hn::Max(vmax, hn::Abs(v));
      vzero = hn::MulAdd(v, hn::Zero(df), vzero);
    }
    if (hn::GetLane(hn::SumOfLanes(df, vzero)) != 0.0f) {
      // A NaN or infinite activation (from a damaged or hostile file's weights, or an overflow): the block's scale
      // NaN and its codes 0, so every product with it is NaN, where codes would hide it in a finite result (and
      // the scan below for the largest magnitude would find no NaN and run past the block).
      std::memset(q + b * blk, 0, static_cast<size_t>(blk));
      d[b] = std::numeric_limits<float>::quiet_NaN();
      continue;
    }
    const float amax = hn::GetLane(hn::MaxOfLanes(df, vmax));
    float scale;
    if (out.format == Q8Format::q8_0) {
      const float dd = bf16_to_fp32(fp32_to_bf16(amax / 127.0f));
      scale = dd != 0.0f ? 1.0f / dd : 0.0f;
      d[b] = dd;
    } else {
      if (amax == 0.0f) {
        std::memset(q + b * blk, 0, static_cast<size_t>(blk));
        d[b] = 0.0f;
        continue;
      }
      int64_t j = 0;
      // The first element of largest magnitude, as ggml's scan keeps; in a finite block (above) the scan finds it.
      while (std::fabs(xb[j]) != amax) ++j;
      scale = -127.0f / xb[j];
      d[b] = 1.0f / scale;
    }
    const auto vs = hn::Set(df, scale);
    for (int64_t i = 0; i < blk; i += static_cast<int64_t>(N)) {
      auto v = hn::Round(hn::Mul(hn::LoadU(df, xb + i), vs));
      v = hn::Min(v, hn::Set(df, 127.0f));
      if (out.format == Q8Format::q8_0) v = hn::Max(v, hn::Set(df, -127.0f));
      hn::StoreU(hn::DemoteTo(d8, hn::DemoteTo(dh, hn::ConvertTo(di, v))), d8, q + b * blk + i);
    }
  }
  int16_t* sums = out.sums + tok * (cols / 16);
  for (int64_t s = 0; s < cols / 16; ++s) {
    int sum = 0;
    for (int64_t i = 0; i < 16; ++i) sum += q[16 * s + i];
    sums[s] = static_cast<int16_t>(sum);
  }
}

bool HasRows16(GgmlType type) {
#if HWY_TARGET == HWY_AVX3_DL
  return type == GgmlType::Q8_0 || type == GgmlType::Q4_K || type == GgmlType::Q5_K || type == GgmlType::Q6_K ||
         type == GgmlType::MXFP4 || type == GgmlType::IQ4_XS;
#else
  (void)type;
  return false;
#endif
}

void MatmulRows16Q8(GgmlType type, const uint8_t* w, int64_t cols, const Q8Rows& x, int64_t n_tok, float* y,
                    int64_t y_stride, int64_t g0, int64_t g1) {
#if HWY_TARGET == HWY_AVX3_DL
  if (rows16::MatmulRows16(type, w, cols, x, n_tok, y, y_stride, g0, g1)) return;
#else
  (void)type, (void)w, (void)cols, (void)x, (void)n_tok, (void)y, (void)y_stride, (void)g0, (void)g1;
#endif
  HWY_ASSERT(false);  // callers check has_rows16_kernel()
}

bool RepackRows16(GgmlType type, const uint8_t* src, size_t row_bytes, int64_t cols, int64_t g0, int64_t g1,
                  uint8_t* dst) {
#if HWY_TARGET == HWY_AVX3_DL
  repack16::Groups(type, src, row_bytes, cols, g0, g1, dst);
  return true;
#else
  (void)type, (void)src, (void)row_bytes, (void)cols, (void)g0, (void)g1, (void)dst;
  return false;
#endif
}

int64_t Target() { return HWY_TARGET; }

}  // namespace HWY_NAMESPACE
}  // namespace moetier::quant::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace moetier::quant::kernels {

HWY_EXPORT(MatmulRowsQ8);
HWY_EXPORT(QuantizeQ8Row);
HWY_EXPORT(UsesTokenTiles);
HWY_EXPORT(CodeOffset);
HWY_EXPORT(Target);
HWY_EXPORT(HasRows16);
HWY_EXPORT(MatmulRows16Q8);
HWY_EXPORT(RepackRows16);

namespace {

std::atomic<int> g_one_stream_for_test{-1};
std::atomic<int> g_rows16_prefetch_for_test{-1};

// The CPU's family if it is an AMD one (0x19: Zen 3, which has no AVX-512, and Zen 4; 0x1a: Zen 5), else 0.
unsigned amd_family() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(0, &a, &b, &c, &d) == 0) return 0;
  char vendor[13] = {};
  std::memcpy(vendor, &b, 4);
  std::memcpy(vendor + 4, &d, 4);
  std::memcpy(vendor + 8, &c, 4);
  if (std::strcmp(vendor, "AuthenticAMD") != 0 || __get_cpuid(1, &a, &b, &c, &d) == 0) return 0;
  const unsigned base = (a >> 8) & 0xf;
  return base == 0xf ? base + ((a >> 20) & 0xff) : base;
#else
  return 0;
#endif
}

bool cpu_is_amd_family_19h() { return amd_family() == 0x19; }

}  // namespace

bool one_stream_rows() {
  static const bool cpu = cpu_is_amd_family_19h();
  const int forced = g_one_stream_for_test.load(std::memory_order_relaxed);
  return forced < 0 ? cpu : forced != 0;
}

void set_one_stream_rows_for_test(int one) { g_one_stream_for_test.store(one, std::memory_order_relaxed); }

bool rows16_prefetch() {
  static const bool cpu = amd_family() >= 0x1a;
  const int forced = g_rows16_prefetch_for_test.load(std::memory_order_relaxed);
  return forced < 0 ? cpu : forced != 0;
}

void set_rows16_prefetch_for_test(int prefetch) {
  g_rows16_prefetch_for_test.store(prefetch, std::memory_order_relaxed);
}

std::string int8_kernels_name() {
  const unsigned arm = arm::features();
  if (arm & arm::kArmDotProd) return arm & arm::kArmI8mm ? "NEON + sdot + smmla" : "NEON + sdot";
  const int64_t target = HWY_DYNAMIC_DISPATCH(Target)();
  std::string name = hwy::TargetName(target);
  if (one_stream_rows()) name += ", one-token K-quant rows read in one stream per thread";
  if (rows16_prefetch() && has_rows16_kernel(GgmlType::Q4_K)) name += ", rows16 K-quant rows prefetched 8 KiB ahead";
  return name;
}

Q8Format q8_format(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_0: case GgmlType::Q4_1: case GgmlType::Q5_0: case GgmlType::Q5_1: case GgmlType::Q8_0:
    case GgmlType::IQ4_NL: case GgmlType::MXFP4:
      return Q8Format::q8_0;
    case GgmlType::Q2_K: case GgmlType::Q3_K: case GgmlType::Q4_K: case GgmlType::Q5_K: case GgmlType::Q6_K:
    case GgmlType::IQ4_XS:
      return Q8Format::q8_k;
    default:
      return Q8Format::none;
  }
}

void quantize_q8_row(const float* x, int64_t tok, const Q8Rows& out) { HWY_DYNAMIC_DISPATCH(QuantizeQ8Row)(x, tok, out); }

bool uses_token_tiles(GgmlType t) { return HWY_DYNAMIC_DISPATCH(UsesTokenTiles)(t); }

int code_offset(GgmlType t) { return HWY_DYNAMIC_DISPATCH(CodeOffset)(t); }

void offset_pair_sums(const Q8Rows& x, int64_t n_tok, int o) {
  assert(x.c != nullptr && x.cols % 2 == 0);
  const int64_t pairs = x.cols / 2;
  for (int64_t tok = 0; tok < n_tok; ++tok) {
    const int8_t* q = x.q + tok * x.cols;
    int16_t* c = x.c + tok * pairs;
    for (int64_t i = 0; i < pairs; ++i) c[i] = static_cast<int16_t>(o * (q[2 * i] + q[2 * i + 1]));
  }
}

void interleave_q8_tokens(const Q8Rows& x, int64_t n_tok) {
  interleave_q8_tiles(x, n_tok, 0, padded_tokens(n_tok) / kTokenTile);
}

void interleave_q8_tiles(const Q8Rows& x, int64_t n_tok, int64_t g0, int64_t g1) {
  assert(x.format != Q8Format::none && x.qt != nullptr && x.st != nullptr && x.dt != nullptr);
  assert(0 <= g0 && g0 <= g1 && g1 <= padded_tokens(n_tok) / kTokenTile);
  const int64_t T = kTokenTile, cols = x.cols, quads = cols / 4, blocks32 = cols / 32;
  const int64_t blocks = cols / q8_block(x.format);
  for (int64_t g = g0; g < g1; ++g) {
    int8_t* qt = x.qt + g * quads * 4 * T;
    int16_t* st = x.st + g * blocks32 * 2 * T;
    float* dt = x.dt + g * blocks * T;
    const int64_t in_tile = std::min(T, n_tok - g * T);
    const bool paired = paired_tile(in_tile);
    for (int64_t lane = 0; lane < T; ++lane) {
      const int64_t t = paired ? lane / 2 : lane;
      if (t >= in_tile) {  // padding: zero codes and scale give zero products
        for (int64_t j = 0; j < quads; ++j) std::memset(qt + (j * T + lane) * 4, 0, 4);
        for (int64_t k = 0; k < blocks32; ++k) std::memset(st + (k * T + lane) * 2, 0, 4);
        for (int64_t b = 0; b < blocks; ++b) dt[b * T + lane] = 0.0f;
        continue;
      }
      const int64_t tok = g * T + t;
      const int8_t* q = x.q + tok * cols;
      for (int64_t j = 0; j < quads; ++j) std::memcpy(qt + (j * T + lane) * 4, q + 4 * j, 4);
      const int16_t* s16 = x.sums + tok * (cols / 16);
      for (int64_t k = 0; k < blocks32; ++k) std::memcpy(st + (k * T + lane) * 2, s16 + 2 * k, 4);
      for (int64_t b = 0; b < blocks; ++b) dt[b * T + lane] = x.d[tok * blocks + b];
    }
  }
}

bool has_rows16_kernel(GgmlType t) {
  // Arm's dot-product kernels take precedence over Highway's target there, and have no rows16 form.
  return arm::features() == 0 && HWY_DYNAMIC_DISPATCH(HasRows16)(t);
}

void quad_biases(const Q8Rows& x, int64_t n_tok) {
  assert(x.quad_bias != nullptr && x.cols % 4 == 0);
  const int64_t quads = x.cols / 4;
  for (int64_t tok = 0; tok < n_tok; ++tok) {
    const int8_t* q = x.q + tok * x.cols;
    int32_t* bias = x.quad_bias + tok * quads;
    for (int64_t i = 0; i < quads; ++i) bias[i] = -128 * (q[4 * i] + q[4 * i + 1] + q[4 * i + 2] + q[4 * i + 3]);
  }
}

void matmul_rows16_q8(GgmlType type, const uint8_t* w, int64_t cols, const Q8Rows& x, int64_t n_tok, float* y,
                      int64_t y_stride, int64_t g0, int64_t g1) {
  assert(x.cols == cols && x.format == q8_format(type) &&
         (x.qt != nullptr ||
          (n_tok == 1 && !x.batched && (type == GgmlType::Q8_0 ? x.quad_bias != nullptr : x.sums != nullptr))));
  HWY_DYNAMIC_DISPATCH(MatmulRows16Q8)(type, w, cols, x, n_tok, y, y_stride, g0, g1);
}

void repack_rows16(GgmlType type, const uint8_t* src, size_t row_bytes, int64_t cols, int64_t g0, int64_t g1,
                   uint8_t* dst) {
  assert(g0 <= g1 && rows16_layout_fits(type, kRows16, cols) && row_bytes == quant::row_bytes(type, cols));
  // The gathers' offsets (int32): row 15's last byte from row 0's.
  const bool offsets_fit = row_bytes <= static_cast<size_t>(INT32_MAX) / kRows16;
  if (offsets_fit && HWY_DYNAMIC_DISPATCH(RepackRows16)(type, src, row_bytes, cols, g0, g1, dst)) return;
  quant::repack_rows16(type, src, row_bytes, cols, g0, g1, dst);
}

void matmul_rows_q8(GgmlType type, const uint8_t* w, size_t row_bytes, const Q8Rows& x, int64_t n_tok, float* y,
                    int64_t y_stride, int64_t r0, int64_t r1) {
  if (arm::matmul_rows(type, w, row_bytes, x, n_tok, y, y_stride, r0, r1)) return;  // Arm with FEAT_DotProd
  HWY_DYNAMIC_DISPATCH(MatmulRowsQ8)(type, w, row_bytes, x, n_tok, y, y_stride, r0, r1);
}

}  // namespace moetier::quant::kernels
#endif  // HWY_ONCE
