// Arm dot-product kernels (int8_arm.h). Bit layouts: quant/blocks.h; the activation rows: int8_kernels.h.
//
// Shapes. A weight block of kQK elements (32, or 256 for the K formats and IQ4_XS) is decoded to kQK / 16
// vectors of 16 signed int8 codes in element order, its integer sub-block scales (one per kGroup elements; none
// when kGroup is 0: the block has one float scale), its mins (Q2_K: one per 16 elements; Q4_K, Q5_K: per 32) and its
// float scale(s). Rows go four at a time (lanes of a float32x4 per token: rows r .. r + 3), tokens one at a time
// (decode) or four at a time (prefill: each row's block decoded once for four tokens); a last group with fewer
// rows or tokens repeats its last one and drops those results.
#include "quant/kernels/int8_arm.h"

#include <atomic>

#if defined(__aarch64__)
#include <arm_neon.h>
#include <sys/auxv.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "quant/blocks.h"
#include "quant/e8m0.h"
#include "quant/kernels/matmul_kernels.h"
#include "quant/kquant_scales.h"

#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1UL << 20)  // Linux uapi asm/hwcap.h: FEAT_DotProd
#endif
#ifndef HWCAP2_I8MM
#define HWCAP2_I8MM (1UL << 13)  // Linux uapi asm/hwcap.h: FEAT_I8MM
#endif

// The kernels that use sdot, and those that use smmla too. Only called after features() says the CPU has them.
#define MOETIER_DOT __attribute__((target("arch=armv8.2-a+dotprod"), always_inline)) inline
#define MOETIER_DOT_FN __attribute__((target("arch=armv8.2-a+dotprod")))
#define MOETIER_MMLA_FN __attribute__((target("arch=armv8.2-a+dotprod+i8mm")))
#endif

namespace moetier::quant::kernels::arm {
namespace {

std::atomic<unsigned> g_mask{kArmAllFeatures};

unsigned detect() {
#if defined(__aarch64__)
  const unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
  unsigned f = 0;
  if (hw & HWCAP_ASIMDDP) f |= kArmDotProd;
  if ((hw & HWCAP_ASIMDDP) && (hw2 & HWCAP2_I8MM)) f |= kArmI8mm;
  return f;
#else
  return 0;
#endif
}

}  // namespace

unsigned features() {
  static const unsigned cpu = detect();
  return cpu & g_mask.load(std::memory_order_relaxed);
}

void limit_features_for_test(unsigned mask) { g_mask.store(mask, std::memory_order_relaxed); }

#if !defined(__aarch64__)
bool matmul_rows(GgmlType, const uint8_t*, size_t, const Q8Rows&, int64_t, float*, int64_t, int64_t, int64_t) {
  return false;
}
#else
namespace {

enum class Mins { none, block, k16 };  // as int8_kernels.cpp: no offsets, m per 32-block, min per 16 elements

inline float Fp16(const uint8_t* p) {
  __fp16 h;
  std::memcpy(&h, p, 2);
  return static_cast<float>(h);  // exact: every binary16 is a float
}
inline uint8x16_t Nibbles(uint8x16_t v) { return vandq_u8(v, vdupq_n_u8(0x0f)); }
inline int8x16_t S8(uint8x16_t v) { return vreinterpretq_s8_u8(v); }

// One decoded weight block.
struct Decoded {
  int8x16_t c[16];  // [kQK / 16]: the codes, elements 16k .. 16k + 15 in c[k]
  int32_t sc[16];   // [kQK / kGroup]: integer sub-block scales
  uint8_t mn[16];   // [kQK / kMinGroup]: the sub-block mins (Mins::k16)
  float d = 0.0f;   // the block scale
  float dm = 0.0f;  // dmin (Mins::k16) or m (Mins::block)
};

struct DecQ8_0 {
  static constexpr int kQK = quant::kQK, kGroup = 0;
  static constexpr size_t kBytes = sizeof(BlockQ8_0);
  static constexpr Mins kMins = Mins::none;
  static void Decode(const uint8_t* b, Decoded& o) {
    o.d = Fp16(b);
    const auto* qs = reinterpret_cast<const int8_t*>(b + offsetof(BlockQ8_0, qs));
    o.c[0] = vld1q_s8(qs), o.c[1] = vld1q_s8(qs + 16);
  }
};

// Bit j of the little-endian 32-bit qh as 0x10 in byte j (j = 16 * half .. 16 * half + 15): each of the two qh
// bytes copied into eight lanes, each lane testing its own bit.
inline uint8x16_t FifthBits(const uint8_t* qh, int half) {
  static constexpr uint8_t kBit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
  const uint8x16_t bytes = vcombine_u8(vdup_n_u8(qh[2 * half]), vdup_n_u8(qh[2 * half + 1]));
  return vandq_u8(vtstq_u8(bytes, vld1q_u8(kBit)), vdupq_n_u8(0x10));
}

// Q4_0 / Q4_1 / Q5_0 / Q5_1: element j < 16 the low nibble of qs[j], j + 16 the high one; Q5 adds bit j of qh as
// the fifth bit; the types without m subtract 8 (Q4_0) or 16 (Q5_0).
template <bool kFive, bool kMin>
struct DecLegacy {
  using Block = std::conditional_t<kFive, std::conditional_t<kMin, BlockQ5_1, BlockQ5_0>,
                                   std::conditional_t<kMin, BlockQ4_1, BlockQ4_0>>;
  static constexpr int kQK = quant::kQK, kGroup = 0;
  static constexpr size_t kBytes = sizeof(Block);
  static constexpr Mins kMins = kMin ? Mins::block : Mins::none;
  static void Decode(const uint8_t* b, Decoded& o) {
    o.d = Fp16(b);
    if constexpr (kMin) o.dm = Fp16(b + offsetof(Block, m));
    const uint8x16_t v = vld1q_u8(b + offsetof(Block, qs));
    uint8x16_t lo = Nibbles(v), hi = vshrq_n_u8(v, 4);
    if constexpr (kFive) {
      const uint8_t* qh = b + offsetof(Block, qh);
      lo = vorrq_u8(lo, FifthBits(qh, 0));
      hi = vorrq_u8(hi, FifthBits(qh, 1));
    }
    const int8x16_t bias = vdupq_n_s8(kMin ? 0 : (kFive ? 16 : 8));
    o.c[0] = vsubq_s8(S8(lo), bias);
    o.c[1] = vsubq_s8(S8(hi), bias);
  }
};
using DecQ4_0 = DecLegacy<false, false>;
using DecQ4_1 = DecLegacy<false, true>;
using DecQ5_0 = DecLegacy<true, false>;
using DecQ5_1 = DecLegacy<true, true>;

// IQ4_NL and MXFP4: a 16-entry table indexed by the nibbles (Q4_0 order), one tbl per 16 codes.
template <class Block, const int8_t (&kTable)[16], bool kE8M0>
struct DecTable32 {
  static constexpr int kQK = quant::kQK, kGroup = 0;
  static constexpr size_t kBytes = sizeof(Block);
  static constexpr Mins kMins = Mins::none;
  static void Decode(const uint8_t* b, Decoded& o) {
    o.d = kE8M0 ? e8m0_to_fp32_half(b[0]) : Fp16(b);  // MXFP4: with the doubled table, exact (quant/blocks.h)
    const int8x16_t tbl = vld1q_s8(kTable);
    const uint8x16_t v = vld1q_u8(b + offsetof(Block, qs));
    o.c[0] = vqtbl1q_s8(tbl, Nibbles(v));
    o.c[1] = vqtbl1q_s8(tbl, vshrq_n_u8(v, 4));
  }
};
using DecIQ4_NL = DecTable32<BlockIQ4_NL, kIq4nlValues, false>;
using DecMXFP4 = DecTable32<BlockMXFP4, kMxfp4DoubledValues, true>;

// v >> (2 * k) & 3 for a run-time k.
inline uint8x16_t BitPair(uint8x16_t v, int k) {
  return vandq_u8(vshlq_u8(v, vdupq_n_s8(static_cast<int8_t>(-2 * k))), vdupq_n_u8(3));
}

// Q2_K: element 32k + l of half h is bit pair k of qs[32h + l]; sub-block 8h + 2k + l / 16.
struct DecQ2_K {
  static constexpr int kQK = kQK_K, kGroup = 16, kMinGroup = 16;
  static constexpr size_t kBytes = sizeof(BlockQ2_K);
  static constexpr Mins kMins = Mins::k16;
  static void Decode(const uint8_t* b, Decoded& o) {
    o.d = Fp16(b + offsetof(BlockQ2_K, d));
    o.dm = Fp16(b + offsetof(BlockQ2_K, dmin));
    const uint8_t* scales = b + offsetof(BlockQ2_K, scales);
    for (int j = 0; j < 16; ++j) o.sc[j] = scales[j] & 0xf, o.mn[j] = static_cast<uint8_t>(scales[j] >> 4);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* q = b + offsetof(BlockQ2_K, qs) + 32 * h;
      const uint8x16_t v[2] = {vld1q_u8(q), vld1q_u8(q + 16)};
      for (int k = 0; k < 4; ++k)
        for (int g = 0; g < 2; ++g) o.c[8 * h + 2 * k + g] = S8(BitPair(v[g], k));
    }
  }
};

// Q3_K: Q2_K's low bit pairs plus bit 4h + k of hmask[l] (clear: minus 4); signed 6-bit scales per 16.
struct DecQ3_K {
  static constexpr int kQK = kQK_K, kGroup = 16;
  static constexpr size_t kBytes = sizeof(BlockQ3_K);
  static constexpr Mins kMins = Mins::none;
  static void Decode(const uint8_t* b, Decoded& o) {
    o.d = Fp16(b + offsetof(BlockQ3_K, d));
    const uint8_t* scales = b + offsetof(BlockQ3_K, scales);
    for (int j = 0; j < 16; ++j) o.sc[j] = detail::q3_k_scale6(j, scales) - 32;
    const uint8_t* hmask = b + offsetof(BlockQ3_K, hmask);
    const uint8x16_t hm[2] = {vld1q_u8(hmask), vld1q_u8(hmask + 16)};
    for (int h = 0; h < 2; ++h) {
      const uint8_t* q = b + offsetof(BlockQ3_K, qs) + 32 * h;
      const uint8x16_t v[2] = {vld1q_u8(q), vld1q_u8(q + 16)};
      for (int k = 0; k < 4; ++k) {
        const int8x16_t hbit = vdupq_n_s8(static_cast<int8_t>(-(4 * h + k)));
        for (int g = 0; g < 2; ++g) {
          const uint8x16_t third = vandq_u8(vshlq_u8(hm[g], hbit), vdupq_n_u8(1));
          const uint8x16_t q3 = vorrq_u8(BitPair(v[g], k), vshlq_n_u8(third, 2));  // low2 + 4 * hbit
          o.c[8 * h + 2 * k + g] = vsubq_s8(S8(q3), vdupq_n_s8(4));
        }
      }
    }
  }
};

// Q4_K / Q5_K: sub-blocks 2p and 2p + 1 (elements 64p .. 64p + 63) are the low and high nibbles of
// qs[32p .. 32p + 31]; Q5_K's fifth bit of element l of sub-block s is bit s of qh[l].
template <bool kHigh>
struct DecQ45_K {
  using Block = std::conditional_t<kHigh, BlockQ5_K, BlockQ4_K>;
  static constexpr int kQK = kQK_K, kGroup = 32, kMinGroup = 32;
  static constexpr size_t kBytes = sizeof(Block);
  static constexpr Mins kMins = Mins::k16;
  static void Decode(const uint8_t* b, Decoded& o) {
    o.d = Fp16(b + offsetof(Block, d));
    o.dm = Fp16(b + offsetof(Block, dmin));
    uint8_t scale[8], min[8];
    detail::unpack_scale_min_k4(b + offsetof(Block, scales), scale, min);
    std::memcpy(o.mn, min, 8);
    const uint16x8_t sc16 = vmovl_u8(vld1_u8(scale));
    vst1q_s32(o.sc, vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(sc16))));
    vst1q_s32(o.sc + 4, vreinterpretq_s32_u32(vmovl_high_u16(sc16)));
    const uint8_t* qs = b + offsetof(Block, qs);
    uint8x16_t qh[2] = {vdupq_n_u8(0), vdupq_n_u8(0)};
    if constexpr (kHigh) qh[0] = vld1q_u8(b + offsetof(BlockQ5_K, qh)), qh[1] = vld1q_u8(b + offsetof(BlockQ5_K, qh) + 16);
    for (int p = 0; p < 4; ++p) {
      for (int i = 0; i < 2; ++i) {
        const uint8x16_t v = vld1q_u8(qs + 32 * p + 16 * i);
        uint8x16_t lo = Nibbles(v), hi = vshrq_n_u8(v, 4);
        if constexpr (kHigh) {
          const uint8x16_t one = vdupq_n_u8(1);
          lo = vorrq_u8(lo, vshlq_n_u8(vandq_u8(vshlq_u8(qh[i], vdupq_n_s8(static_cast<int8_t>(-2 * p))), one), 4));
          hi = vorrq_u8(hi, vshlq_n_u8(vandq_u8(vshlq_u8(qh[i], vdupq_n_s8(static_cast<int8_t>(-2 * p - 1))), one), 4));
        }
        o.c[4 * p + i] = S8(lo);
        o.c[4 * p + 2 + i] = S8(hi);
      }
    }
  }
};

// Q6_K: per half h (ql + 64h, qh + 32h), element 32r + l is nibble r / 2 of ql[32 (r % 2) + l] with bit pair r of
// qh[l] on top, minus 32; int8 scales per 16.
struct DecQ6_K {
  static constexpr int kQK = kQK_K, kGroup = 16;
  static constexpr size_t kBytes = sizeof(BlockQ6_K);
  static constexpr Mins kMins = Mins::none;
  static void Decode(const uint8_t* b, Decoded& o) {
    o.d = Fp16(b + offsetof(BlockQ6_K, d));
    const auto* scales = reinterpret_cast<const int8_t*>(b + offsetof(BlockQ6_K, scales));
    for (int j = 0; j < 16; ++j) o.sc[j] = scales[j];
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = b + offsetof(BlockQ6_K, ql) + 64 * h;
      const uint8_t* qh = b + offsetof(BlockQ6_K, qh) + 32 * h;
      const uint8x16_t hv[2] = {vld1q_u8(qh), vld1q_u8(qh + 16)};
      for (int r = 0; r < 4; ++r) {
        for (int l = 0; l < 2; ++l) {
          const uint8x16_t v = vld1q_u8(ql + 32 * (r % 2) + 16 * l);
          const uint8x16_t q4 = r / 2 ? vshrq_n_u8(v, 4) : Nibbles(v);
          const uint8x16_t q6 = vorrq_u8(q4, vshlq_n_u8(BitPair(hv[l], r), 4));
          o.c[8 * h + 2 * r + l] = vsubq_s8(S8(q6), vdupq_n_s8(32));
        }
      }
    }
  }
};

// IQ4_XS: IQ4_NL's table over 8 sub-blocks of 32, each with a 6-bit scale stored + 32.
struct DecIQ4_XS {
  static constexpr int kQK = kQK_K, kGroup = 32;
  static constexpr size_t kBytes = sizeof(BlockIQ4_XS);
  static constexpr Mins kMins = Mins::none;
  static void Decode(const uint8_t* b, Decoded& o) {
    o.d = Fp16(b);
    uint16_t scales_h;
    std::memcpy(&scales_h, b + offsetof(BlockIQ4_XS, scales_h), 2);
    const uint8_t* scales_l = b + offsetof(BlockIQ4_XS, scales_l);
    const uint8_t* qs = b + offsetof(BlockIQ4_XS, qs);
    const int8x16_t tbl = vld1q_s8(kIq4nlValues);
    for (int s = 0; s < 8; ++s) {
      o.sc[s] = (((scales_l[s / 2] >> (4 * (s % 2))) & 0xf) | ((scales_h >> (2 * s)) & 3) << 4) - 32;
      const uint8x16_t v = vld1q_u8(qs + 16 * s);
      o.c[2 * s] = vqtbl1q_s8(tbl, Nibbles(v));
      o.c[2 * s + 1] = vqtbl1q_s8(tbl, vshrq_n_u8(v, 4));
    }
  }
};

// A block's exact integer sum with one token's codes xq (kQK of them), spread over four int32 lanes.
template <class Dec>
MOETIER_DOT int32x4_t BlockDot(const Decoded& w, const int8_t* xq) {
  int32x4_t acc = vdupq_n_s32(0);
  if constexpr (Dec::kGroup == 0) {
    for (int k = 0; k < Dec::kQK / 16; ++k) acc = vdotq_s32(acc, w.c[k], vld1q_s8(xq + 16 * k));
  } else {
    // Each sub-block's sum in its own vector; four sub-blocks' lane sums side by side (two pairwise adds), times
    // their four scales at once.
    constexpr int kPer = Dec::kGroup / 16, kGroups = Dec::kQK / Dec::kGroup;
    static_assert(kGroups % 4 == 0);
    int32x4_t p[kGroups];
    for (int g = 0; g < kGroups; ++g) {
      p[g] = vdupq_n_s32(0);
      for (int k = 0; k < kPer; ++k) p[g] = vdotq_s32(p[g], w.c[kPer * g + k], vld1q_s8(xq + 16 * (kPer * g + k)));
    }
    for (int q = 0; q < kGroups / 4; ++q) {
      const int32x4_t sums = vpaddq_s32(vpaddq_s32(p[4 * q], p[4 * q + 1]), vpaddq_s32(p[4 * q + 2], p[4 * q + 3]));
      acc = vmlaq_s32(acc, sums, vld1q_s32(w.sc + 4 * q));
    }
  }
  return acc;
}

// The min term's exact integer part for one row and token: the sum of the sub-block mins times the token's code
// sums over the same elements (Mins::k16: from its sums of 16, paired for mins per 32), or the block's code sum
// (Mins::block).
template <class Dec>
inline int32_t MinSum(const Decoded& w, const int16_t* sums) {
  if constexpr (Dec::kMins == Mins::k16) {
    const int16x8_t s0 = vld1q_s16(sums), s1 = vld1q_s16(sums + 8);
    int32x4_t p;
    if constexpr (Dec::kMinGroup == 32) {  // 8 mins; a sum of 32 codes is at most 32 * 127 in magnitude: int16
      const int16x8_t s = vpaddq_s16(s0, s1);
      const int16x8_t m = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(w.mn)));
      p = vmlal_high_s16(vmull_s16(vget_low_s16(m), vget_low_s16(s)), m, s);
    } else {
      const int16x8_t m0 = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(w.mn)));
      const int16x8_t m1 = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(w.mn + 8)));
      p = vmull_s16(vget_low_s16(m0), vget_low_s16(s0));
      p = vmlal_high_s16(p, m0, s0);
      p = vmlal_s16(p, vget_low_s16(m1), vget_low_s16(s1));
      p = vmlal_high_s16(p, m1, s1);
    }
    return vaddvq_s32(p);
  } else {
    return sums[0] + sums[1];
  }
}

// Four lanes' sums: lane i = the sum of a[i]'s lanes.
inline int32x4_t Reduce4(const int32x4_t (&a)[4]) {
  return vpaddq_s32(vpaddq_s32(a[0], a[1]), vpaddq_s32(a[2], a[3]));
}

// One block's float steps for four (row, token) lanes: f += isum * (d_w * d_x), then the min term (k16: minus
// dmin_w * d_x * msum; block: plus m_w * d_x * msum). Every kernel here goes through this, lane by lane the same.
template <class Dec>
inline float32x4_t AddBlock(float32x4_t f, int32x4_t isum, int32x4_t msum, float32x4_t d, float32x4_t dm,
                            float32x4_t dx) {
  f = vfmaq_f32(f, vcvtq_f32_s32(isum), vmulq_f32(d, dx));
  if constexpr (Dec::kMins == Mins::k16) {
    f = vfmaq_f32(f, vcvtq_f32_s32(msum), vnegq_f32(vmulq_f32(dm, dx)));
  } else if constexpr (Dec::kMins == Mins::block) {
    f = vfmaq_f32(f, vcvtq_f32_s32(msum), vmulq_f32(dm, dx));
  }
  return f;
}

// Rows rows[0..3] times tokens tok[0 .. NT-1] (NT = 1 or 4) by sdot: f[t] lane i = row i . token t.
template <class Dec, int NT>
MOETIER_DOT_FN void DotRows(const uint8_t* const (&rows)[4], const Q8Rows& x, const int64_t (&tok)[NT],
                            float32x4_t (&f)[NT]) {
  const int64_t cols = x.cols, nb = cols / Dec::kQK, n16 = cols / 16;
  for (int t = 0; t < NT; ++t) f[t] = vdupq_n_f32(0.0f);
  for (int64_t b = 0; b < nb; ++b) {
    int32x4_t isum[NT][4], msum[NT][4];
    float d[4], dm[4];
    for (int r = 0; r < 4; ++r) {
      const uint8_t* blk = rows[r] + static_cast<size_t>(b) * Dec::kBytes;
      if constexpr (NT == 1) {  // decode: ask for the bytes kPrefetchAhead on (block_bytes-inl.h says why)
        // (formed as an integer: past the matrix's end it would not be a valid pointer; a prefetch never faults)
        const uintptr_t ahead = reinterpret_cast<uintptr_t>(blk) + kPrefetchAhead;
        for (size_t off = 0; off < Dec::kBytes; off += 64) __builtin_prefetch(reinterpret_cast<const void*>(ahead + off));
      }
      Decoded w;
      Dec::Decode(blk, w);
      d[r] = w.d, dm[r] = w.dm;
      for (int t = 0; t < NT; ++t) {
        isum[t][r] = BlockDot<Dec>(w, x.q + tok[t] * cols + b * Dec::kQK);
        if constexpr (Dec::kMins != Mins::none) {
          msum[t][r] = vdupq_n_s32(MinSum<Dec>(w, x.sums + tok[t] * n16 + b * (Dec::kQK / 16)));
        }
      }
    }
    const float32x4_t dv = vld1q_f32(d), dmv = vld1q_f32(dm);
    for (int t = 0; t < NT; ++t) {
      // msum[t][r] holds row r's min sum in every lane: lane 0 of each, gathered.
      int32x4_t m = vdupq_n_s32(0);
      if constexpr (Dec::kMins != Mins::none) {
        m = vsetq_lane_s32(vgetq_lane_s32(msum[t][0], 0), m, 0);
        m = vsetq_lane_s32(vgetq_lane_s32(msum[t][1], 0), m, 1);
        m = vsetq_lane_s32(vgetq_lane_s32(msum[t][2], 0), m, 2);
        m = vsetq_lane_s32(vgetq_lane_s32(msum[t][3], 0), m, 3);
      }
      f[t] = AddBlock<Dec>(f[t], Reduce4(isum[t]), m, dv, dmv, vdupq_n_f32(x.d[tok[t] * nb + b]));
    }
  }
}

// 8-byte halves of two 16-byte vectors side by side: lo = (a[0..7], b[0..7]), hi = (a[8..15], b[8..15]): the
// 2x8 operand layout of smmla.
inline int8x16_t ZipLo(int8x16_t a, int8x16_t b) {
  return vreinterpretq_s8_s64(vzip1q_s64(vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b)));
}
inline int8x16_t ZipHi(int8x16_t a, int8x16_t b) {
  return vreinterpretq_s8_s64(vzip2q_s64(vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b)));
}

// Rows rows[0..3] times tokens tok[0..3] by smmla, two rows by two tokens per instruction: f[p][q] lanes =
// (row 2p . token 2q, row 2p . token 2q + 1, row 2p + 1 . token 2q, row 2p + 1 . token 2q + 1).
template <class Dec>
MOETIER_MMLA_FN void MmlaRows(const uint8_t* const (&rows)[4], const Q8Rows& x, const int64_t (&tok)[4],
                              float32x4_t (&f)[2][2]) {
  constexpr int kV = Dec::kQK / 16;  // code vectors per block
  const int64_t cols = x.cols, nb = cols / Dec::kQK, n16 = cols / 16;
  for (auto& fp : f) fp[0] = fp[1] = vdupq_n_f32(0.0f);
  for (int64_t b = 0; b < nb; ++b) {
    Decoded w[4];
    for (int r = 0; r < 4; ++r) Dec::Decode(rows[r] + static_cast<size_t>(b) * Dec::kBytes, w[r]);
    // The token pairs' codes in smmla's layout, once for both row pairs.
    int8x16_t xs[2][2][kV];  // [token pair][lo, hi][vector]
    for (int q = 0; q < 2; ++q) {
      const int8_t* xa = x.q + tok[2 * q] * cols + b * Dec::kQK;
      const int8_t* xb = x.q + tok[2 * q + 1] * cols + b * Dec::kQK;
      for (int k = 0; k < kV; ++k) {
        const int8x16_t a = vld1q_s8(xa + 16 * k), c = vld1q_s8(xb + 16 * k);
        xs[q][0][k] = ZipLo(a, c), xs[q][1][k] = ZipHi(a, c);
      }
    }
    float32x4_t dx[2];  // [token pair]: (dx_t, dx_u, dx_t, dx_u)
    for (int q = 0; q < 2; ++q) {
      const float a = x.d[tok[2 * q] * nb + b], c = x.d[tok[2 * q + 1] * nb + b];
      const float v[4] = {a, c, a, c};
      dx[q] = vld1q_f32(v);
    }
    for (int p = 0; p < 2; ++p) {
      const Decoded& wa = w[2 * p];
      const Decoded& wb = w[2 * p + 1];
      int8x16_t ws[2][kV];  // [lo, hi][vector]
      for (int k = 0; k < kV; ++k) ws[0][k] = ZipLo(wa.c[k], wb.c[k]), ws[1][k] = ZipHi(wa.c[k], wb.c[k]);
      const float dv4[4] = {wa.d, wa.d, wb.d, wb.d}, dm4[4] = {wa.dm, wa.dm, wb.dm, wb.dm};
      const float32x4_t dv = vld1q_f32(dv4), dmv = vld1q_f32(dm4);
      for (int q = 0; q < 2; ++q) {
        int32x4_t acc = vdupq_n_s32(0);
        if constexpr (Dec::kGroup == 0) {
          for (int k = 0; k < kV; ++k) {
            acc = vmmlaq_s32(acc, ws[0][k], xs[q][0][k]);
            acc = vmmlaq_s32(acc, ws[1][k], xs[q][1][k]);
          }
        } else {
          constexpr int kPer = Dec::kGroup / 16;
          for (int g = 0; g < Dec::kQK / Dec::kGroup; ++g) {
            int32x4_t s = vdupq_n_s32(0);
            for (int k = kPer * g; k < kPer * (g + 1); ++k) {
              s = vmmlaq_s32(s, ws[0][k], xs[q][0][k]);
              s = vmmlaq_s32(s, ws[1][k], xs[q][1][k]);
            }
            const int32_t sc4[4] = {wa.sc[g], wa.sc[g], wb.sc[g], wb.sc[g]};
            acc = vmlaq_s32(acc, s, vld1q_s32(sc4));
          }
        }
        int32x4_t m = vdupq_n_s32(0);
        if constexpr (Dec::kMins != Mins::none) {
          const int16_t* st = x.sums + tok[2 * q] * n16 + b * (Dec::kQK / 16);
          const int16_t* su = x.sums + tok[2 * q + 1] * n16 + b * (Dec::kQK / 16);
          const int32_t m4[4] = {MinSum<Dec>(wa, st), MinSum<Dec>(wa, su), MinSum<Dec>(wb, st), MinSum<Dec>(wb, su)};
          m = vld1q_s32(m4);
        }
        f[p][q] = AddBlock<Dec>(f[p][q], acc, m, dv, dmv, dx[q]);
      }
    }
  }
}

// Rows r0 .. r1 - 1 of w times tokens 0 .. n_tok - 1 of x into y[t * y_stride + r].
template <class Dec>
MOETIER_DOT_FN void Rows(const uint8_t* w, size_t row_bytes, const Q8Rows& x, int64_t n_tok, float* y,
                         int64_t y_stride, int64_t r0, int64_t r1, bool mmla) {
  for (int64_t r = r0; r < r1; r += 4) {
    const int64_t nr = std::min<int64_t>(4, r1 - r);
    const uint8_t* rows[4];
    for (int64_t i = 0; i < 4; ++i) rows[i] = w + static_cast<size_t>(r + std::min(i, nr - 1)) * row_bytes;
    int64_t t = 0;
    if (n_tok > 1) {
      for (; t < n_tok; t += 4) {
        const int64_t nt = std::min<int64_t>(4, n_tok - t);
        int64_t tok[4];
        for (int64_t i = 0; i < 4; ++i) tok[i] = t + std::min(i, nt - 1);
        float out[4][4];  // [token][row]
        if (mmla) {
          float32x4_t f[2][2];
          MmlaRows<Dec>(rows, x, tok, f);
          for (int p = 0; p < 2; ++p) {
            for (int q = 0; q < 2; ++q) {
              float v[4];
              vst1q_f32(v, f[p][q]);
              out[2 * q][2 * p] = v[0], out[2 * q + 1][2 * p] = v[1];
              out[2 * q][2 * p + 1] = v[2], out[2 * q + 1][2 * p + 1] = v[3];
            }
          }
        } else {
          float32x4_t f[4];
          DotRows<Dec, 4>(rows, x, tok, f);
          for (int i = 0; i < 4; ++i) vst1q_f32(out[i], f[i]);
        }
        for (int64_t i = 0; i < nt; ++i)
          for (int64_t j = 0; j < nr; ++j) y[(t + i) * y_stride + r + j] = out[i][j];
      }
    } else {
      const int64_t tok[1] = {0};
      float32x4_t f[1];
      DotRows<Dec, 1>(rows, x, tok, f);
      float out[4];
      vst1q_f32(out, f[0]);
      for (int64_t j = 0; j < nr; ++j) y[r + j] = out[j];
    }
  }
}

}  // namespace

bool matmul_rows(GgmlType type, const uint8_t* w, size_t row_bytes, const Q8Rows& x, int64_t n_tok, float* y,
                 int64_t y_stride, int64_t r0, int64_t r1) {
  const unsigned f = features();
  if (!(f & kArmDotProd)) return false;
  const bool mmla = (f & kArmI8mm) != 0;
#define MOETIER_ROWS(Dec) Rows<Dec>(w, row_bytes, x, n_tok, y, y_stride, r0, r1, mmla); return true
  switch (type) {
    case GgmlType::Q4_0: MOETIER_ROWS(DecQ4_0);
    case GgmlType::Q4_1: MOETIER_ROWS(DecQ4_1);
    case GgmlType::Q5_0: MOETIER_ROWS(DecQ5_0);
    case GgmlType::Q5_1: MOETIER_ROWS(DecQ5_1);
    case GgmlType::Q8_0: MOETIER_ROWS(DecQ8_0);
    case GgmlType::Q2_K: MOETIER_ROWS(DecQ2_K);
    case GgmlType::Q3_K: MOETIER_ROWS(DecQ3_K);
    case GgmlType::Q4_K: MOETIER_ROWS(DecQ45_K<false>);
    case GgmlType::Q5_K: MOETIER_ROWS(DecQ45_K<true>);
    case GgmlType::Q6_K: MOETIER_ROWS(DecQ6_K);
    case GgmlType::IQ4_NL: MOETIER_ROWS(DecIQ4_NL);
    case GgmlType::IQ4_XS: MOETIER_ROWS(DecIQ4_XS);
    case GgmlType::MXFP4: MOETIER_ROWS(DecMXFP4);
    default: return false;
  }
#undef MOETIER_ROWS
}
#endif  // __aarch64__

}  // namespace moetier::quant::kernels::arm
