// Fused dequantize-and-dot kernels, compiled once per Highway target (foreach_target) and dispatched at run time.
// Each decoder turns one block into the exact floats of the scalar reference dequantizer (same formulas, same
// evaluation order, no fused multiply-add inside a decode) in a one-block stack buffer; the dot product then
// accumulates w * x in float32 lanes with MulAdd. Bit patterns: quant/blocks.h; formulas: quant/dequant_*.cpp.

#include "quant/kernels/hwy_targets.h"  // must precede the Highway headers

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "quant/kernels/matmul_kernels.cpp"
#include "hwy/foreach_target.h"  // must precede highway.h
#include "hwy/highway.h"

#include <cstddef>
#include <cstring>

#include "quant/blocks.h"
#include "quant/e8m0.h"
#include "quant/fp16.h"
#include "quant/kernels/block_bytes-inl.h"
#include "quant/kernels/matmul_kernels.h"
#include "quant/kquant_scales.h"

HWY_BEFORE_NAMESPACE();
namespace moetier::quant::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// At most 16 float lanes: every decoder below steps through sub-blocks of 16 or 32 elements in whole vectors.
using DF = hn::CappedTag<float, 16>;
using DI = hn::RebindToSigned<DF>;
using DU = hn::RebindToUnsigned<DF>;
using VF = hn::Vec<DF>;
using VI = hn::Vec<DI>;

HWY_INLINE size_t NF() { return hn::Lanes(DF()); }
// Lanes(DF) bytes at p, widened to int32 lanes.
HWY_INLINE VI LoadU8(const uint8_t* p) { return hn::PromoteTo(DI(), hn::LoadU(hn::Rebind<uint8_t, DF>(), p)); }
HWY_INLINE VI LoadI8(const int8_t* p) { return hn::PromoteTo(DI(), hn::LoadU(hn::Rebind<int8_t, DF>(), p)); }
HWY_INLINE VF ToF(VI v) { return hn::ConvertTo(DF(), v); }
HWY_INLINE VF SetF(float v) { return hn::Set(DF(), v); }
HWY_INLINE VI SetI(int32_t v) { return hn::Set(DI(), v); }
HWY_INLINE void StoreF(VF v, float* p) { hn::Store(v, DF(), p); }


// Each decoder: kQK elements per block of kBytes bytes; Decode(block, buf) returns the kQK floats (in buf, or
// in place for F32). kAnyCols types also accept rows that are not whole blocks: Scalar(row, c) gives element c.

struct DecF32 {
  static constexpr int kQK = 32;
  static constexpr size_t kBytes = 4 * kQK;
  static constexpr bool kAnyCols = true;
  static HWY_INLINE const float* Decode(const uint8_t* b, float*) { return reinterpret_cast<const float*>(b); }
  static HWY_INLINE float Scalar(const uint8_t* row, int64_t c) {
    float v;
    std::memcpy(&v, row + 4 * c, 4);
    return v;
  }
};

struct DecF16 {
  static constexpr int kQK = 32;
  static constexpr size_t kBytes = 2 * kQK;
  static constexpr bool kAnyCols = true;
  static HWY_INLINE const float* Decode(const uint8_t* b, float* HWY_RESTRICT buf) {
    const hn::Rebind<hwy::float16_t, DF> dh;
    const auto* h = reinterpret_cast<const hwy::float16_t*>(b);
    for (size_t i = 0; i < kQK; i += NF()) StoreF(hn::PromoteTo(DF(), hn::LoadU(dh, h + i)), buf + i);
    return buf;
  }
  static HWY_INLINE float Scalar(const uint8_t* row, int64_t c) { return fp16_to_fp32(Load16(row + 2 * c)); }
};

struct DecBF16 {
  static constexpr int kQK = 32;
  static constexpr size_t kBytes = 2 * kQK;
  static constexpr bool kAnyCols = true;
  static HWY_INLINE const float* Decode(const uint8_t* b, float* HWY_RESTRICT buf) {
    const hn::Rebind<uint16_t, DF> d16;
    const auto* h = reinterpret_cast<const uint16_t*>(b);
    for (size_t i = 0; i < kQK; i += NF()) {
      const auto u = hn::ShiftLeft<16>(hn::PromoteTo(DU(), hn::LoadU(d16, h + i)));  // bf16 = top half of f32
      StoreF(hn::BitCast(DF(), u), buf + i);
    }
    return buf;
  }
  static HWY_INLINE float Scalar(const uint8_t* row, int64_t c) { return bf16_to_fp32(Load16(row + 2 * c)); }
};

struct DecQ8_0 {
  static constexpr int kQK = quant::kQK;
  static constexpr size_t kBytes = sizeof(BlockQ8_0);
  static constexpr bool kAnyCols = false;
  static HWY_INLINE const float* Decode(const uint8_t* b, float* HWY_RESTRICT buf) {
    const VF d = SetF(Fp16At(b));
    const auto* qs = reinterpret_cast<const int8_t*>(b + offsetof(BlockQ8_0, qs));
    for (size_t i = 0; i < kQK; i += NF()) StoreF(hn::Mul(ToF(LoadI8(qs + i)), d), buf + i);
    return buf;
  }
};

// Q4_0 / Q4_1: element j < 16 is the low nibble of qs[j], element j + 16 the high nibble.
template <bool kMin>
struct DecQ4Legacy {
  using Block = std::conditional_t<kMin, BlockQ4_1, BlockQ4_0>;
  static constexpr int kQK = quant::kQK;
  static constexpr size_t kBytes = sizeof(Block);
  static constexpr bool kAnyCols = false;
  static HWY_INLINE const float* Decode(const uint8_t* b, float* HWY_RESTRICT buf) {
    const VF d = SetF(Fp16At(b));
    const uint8_t* qs = b + offsetof(Block, qs);
    for (size_t i = 0; i < kQK / 2; i += NF()) {
      const VI v = LoadU8(qs + i);
      const VI lo = hn::And(v, SetI(0xf));
      const VI hi = hn::ShiftRight<4>(v);
      if constexpr (kMin) {  // d * q + m
        const VF m = SetF(Fp16At(b + 2));
        StoreF(hn::Add(hn::Mul(ToF(lo), d), m), buf + i);
        StoreF(hn::Add(hn::Mul(ToF(hi), d), m), buf + kQK / 2 + i);
      } else {  // (q - 8) * d
        StoreF(hn::Mul(ToF(hn::Sub(lo, SetI(8))), d), buf + i);
        StoreF(hn::Mul(ToF(hn::Sub(hi, SetI(8))), d), buf + kQK / 2 + i);
      }
    }
    return buf;
  }
};

// Q5_0 / Q5_1: as Q4 plus bit j of the little-endian uint32 qh as the fifth bit of element j.
template <bool kMin>
struct DecQ5Legacy {
  using Block = std::conditional_t<kMin, BlockQ5_1, BlockQ5_0>;
  static constexpr int kQK = quant::kQK;
  static constexpr size_t kBytes = sizeof(Block);
  static constexpr bool kAnyCols = false;
  static HWY_INLINE const float* Decode(const uint8_t* b, float* HWY_RESTRICT buf) {
    const DU du;
    const VF d = SetF(Fp16At(b));
    uint32_t qh32;
    std::memcpy(&qh32, b + offsetof(Block, qh), 4);
    const auto qh = hn::Set(du, qh32);
    const uint8_t* qs = b + offsetof(Block, qs);
    for (size_t i = 0; i < kQK / 2; i += NF()) {
      const VI v = LoadU8(qs + i);
      const auto one = hn::Set(du, 1u);
      const VI hb_lo = hn::BitCast(DI(), hn::And(qh >> hn::Iota(du, static_cast<uint32_t>(i)), one));
      const VI hb_hi =
          hn::BitCast(DI(), hn::And(qh >> hn::Iota(du, static_cast<uint32_t>(i + kQK / 2)), one));
      const VI lo = hn::Or(hn::And(v, SetI(0xf)), hn::ShiftLeft<4>(hb_lo));
      const VI hi = hn::Or(hn::ShiftRight<4>(v), hn::ShiftLeft<4>(hb_hi));
      if constexpr (kMin) {
        const VF m = SetF(Fp16At(b + 2));
        StoreF(hn::Add(hn::Mul(ToF(lo), d), m), buf + i);
        StoreF(hn::Add(hn::Mul(ToF(hi), d), m), buf + kQK / 2 + i);
      } else {
        StoreF(hn::Mul(ToF(hn::Sub(lo, SetI(16))), d), buf + i);
        StoreF(hn::Mul(ToF(hn::Sub(hi, SetI(16))), d), buf + kQK / 2 + i);
      }
    }
    return buf;
  }
};

struct DecIQ4_NL {
  static constexpr int kQK = quant::kQK;
  static constexpr size_t kBytes = sizeof(BlockIQ4_NL);
  static constexpr bool kAnyCols = false;
  static HWY_INLINE const float* Decode(const uint8_t* b, float* HWY_RESTRICT buf) {
    const VF d = SetF(Fp16At(b));
    int8_t q[kQK];
    LookupNibbles(kIq4nlValues, b + offsetof(BlockIQ4_NL, qs), q);
    for (size_t i = 0; i < kQK; i += NF()) StoreF(hn::Mul(d, ToF(LoadI8(q + i))), buf + i);
    return buf;
  }
};

struct DecMXFP4 {
  static constexpr int kQK = quant::kQK;
  static constexpr size_t kBytes = sizeof(BlockMXFP4);
  static constexpr bool kAnyCols = false;
  static HWY_INLINE const float* Decode(const uint8_t* b, float* HWY_RESTRICT buf) {
    const VF d = SetF(e8m0_to_fp32_half(b[0]));
    int8_t q[kQK];
    LookupNibbles(kMxfp4DoubledValues, b + offsetof(BlockMXFP4, qs), q);
    for (size_t i = 0; i < kQK; i += NF()) StoreF(hn::Mul(ToF(LoadI8(q + i)), d), buf + i);
    return buf;
  }
};

struct DecIQ4_XS {
  static constexpr int kQK = kQK_K;
  static constexpr size_t kBytes = sizeof(BlockIQ4_XS);
  static constexpr bool kAnyCols = false;
  static HWY_INLINE const float* Decode(const uint8_t* b, float* HWY_RESTRICT buf) {
    const float d = Fp16At(b);
    const uint16_t scales_h = Load16(b + offsetof(BlockIQ4_XS, scales_h));
    const uint8_t* scales_l = b + offsetof(BlockIQ4_XS, scales_l);
    const uint8_t* qs = b + offsetof(BlockIQ4_XS, qs);
    int8_t q[32];
    for (int s = 0; s < 8; ++s) {
      const int low4 = (scales_l[s / 2] >> (4 * (s % 2))) & 0xf;
      const int high2 = (scales_h >> (2 * s)) & 3;
      const VF dl = SetF(d * static_cast<float>((low4 | high2 << 4) - 32));
      LookupNibbles(kIq4nlValues, qs + 16 * s, q);
      for (size_t i = 0; i < 32; i += NF()) StoreF(hn::Mul(dl, ToF(LoadI8(q + i))), buf + 32 * s + i);
    }
    return buf;
  }
};

struct DecQ2_K {
  static constexpr int kQK = kQK_K;
  static constexpr size_t kBytes = sizeof(BlockQ2_K);
  static constexpr bool kAnyCols = false;
  static HWY_INLINE const float* Decode(const uint8_t* b, float* HWY_RESTRICT buf) {
    const float d = Fp16At(b + offsetof(BlockQ2_K, d));
    const float dmin = Fp16At(b + offsetof(BlockQ2_K, dmin));
    const uint8_t* scales = b + offsetof(BlockQ2_K, scales);
    for (int half = 0; half < 2; ++half) {
      const uint8_t* q = b + offsetof(BlockQ2_K, qs) + 32 * half;
      for (int k = 0; k < 4; ++k) {
        for (int g = 0; g < 2; ++g) {
          const uint8_t sc = scales[8 * half + 2 * k + g];
          const VF dl = SetF(d * static_cast<float>(sc & 0xf));
          const VF ml = SetF(dmin * static_cast<float>(sc >> 4));
          float* y = buf + 128 * half + 32 * k + 16 * g;
          for (size_t i = 0; i < 16; i += NF()) {
            const VI v = hn::And(hn::ShiftRightSame(LoadU8(q + 16 * g + i), 2 * k), SetI(3));
            StoreF(hn::Sub(hn::Mul(dl, ToF(v)), ml), y + i);
          }
        }
      }
    }
    return buf;
  }
};

struct DecQ3_K {
  static constexpr int kQK = kQK_K;
  static constexpr size_t kBytes = sizeof(BlockQ3_K);
  static constexpr bool kAnyCols = false;
  static HWY_INLINE const float* Decode(const uint8_t* b, float* HWY_RESTRICT buf) {
    const float d = Fp16At(b + offsetof(BlockQ3_K, d));
    const uint8_t* scales = b + offsetof(BlockQ3_K, scales);
    const uint8_t* hmask = b + offsetof(BlockQ3_K, hmask);
    for (int half = 0; half < 2; ++half) {
      const uint8_t* q = b + offsetof(BlockQ3_K, qs) + 32 * half;
      for (int k = 0; k < 4; ++k) {
        const int hbit = 4 * half + k;
        for (int g = 0; g < 2; ++g) {
          const VF dl = SetF(d * static_cast<float>(detail::q3_k_scale6(8 * half + 2 * k + g, scales) - 32));
          float* y = buf + 128 * half + 32 * k + 16 * g;
          for (size_t i = 0; i < 16; i += NF()) {
            const size_t l = 16 * static_cast<size_t>(g) + i;
            const VI low2 = hn::And(hn::ShiftRightSame(LoadU8(q + l), 2 * k), SetI(3));
            const VI h = hn::And(hn::ShiftRightSame(LoadU8(hmask + l), hbit), SetI(1));
            const VI q3 = hn::Sub(hn::Add(low2, hn::ShiftLeft<2>(h)), SetI(4));  // low2 - (h ? 0 : 4)
            StoreF(hn::Mul(dl, ToF(q3)), y + i);
          }
        }
      }
    }
    return buf;
  }
};

template <bool kHigh>  // Q4_K, or Q5_K with its fifth bits
struct DecQ45_K {
  using Block = std::conditional_t<kHigh, BlockQ5_K, BlockQ4_K>;
  static constexpr int kQK = kQK_K;
  static constexpr size_t kBytes = sizeof(Block);
  static constexpr bool kAnyCols = false;
  static HWY_INLINE const float* Decode(const uint8_t* b, float* HWY_RESTRICT buf) {
    const float d = Fp16At(b + offsetof(Block, d));
    const float dmin = Fp16At(b + offsetof(Block, dmin));
    const uint8_t* scales = b + offsetof(Block, scales);
    for (int s = 0; s < 8; ++s) {
      const detail::ScaleMin sm = detail::get_scale_min_k4(s, scales);
      const VF ds = SetF(d * static_cast<float>(sm.scale));
      const VF ms = SetF(dmin * static_cast<float>(sm.min));
      const uint8_t* q = b + offsetof(Block, qs) + 32 * (s / 2);
      for (size_t i = 0; i < 32; i += NF()) {
        const VI v = LoadU8(q + i);
        VI q4 = (s % 2) ? hn::ShiftRight<4>(v) : hn::And(v, SetI(0xf));
        if constexpr (kHigh) {
          const VI h = hn::And(hn::ShiftRightSame(LoadU8(b + offsetof(BlockQ5_K, qh) + i), s), SetI(1));
          q4 = hn::Or(q4, hn::ShiftLeft<4>(h));
        }
        StoreF(hn::Sub(hn::Mul(ds, ToF(q4)), ms), buf + 32 * s + i);
      }
    }
    return buf;
  }
};

struct DecQ6_K {
  static constexpr int kQK = kQK_K;
  static constexpr size_t kBytes = sizeof(BlockQ6_K);
  static constexpr bool kAnyCols = false;
  static HWY_INLINE const float* Decode(const uint8_t* b, float* HWY_RESTRICT buf) {
    const float d = Fp16At(b + offsetof(BlockQ6_K, d));
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = b + offsetof(BlockQ6_K, ql) + 64 * half;
      const uint8_t* qh = b + offsetof(BlockQ6_K, qh) + 32 * half;
      const auto* sc = reinterpret_cast<const int8_t*>(b + offsetof(BlockQ6_K, scales)) + 8 * half;
      for (int r = 0; r < 4; ++r) {
        const uint8_t* lo = ql + 32 * (r % 2);
        for (size_t l = 0; l < 32; l += NF()) {  // NF() <= 16 divides 16: one sub-block scale per vector
          const VI v = LoadU8(lo + l);
          const VI q4 = (r / 2) ? hn::ShiftRight<4>(v) : hn::And(v, SetI(0xf));
          const VI h2 = hn::And(hn::ShiftRightSame(LoadU8(qh + l), 2 * r), SetI(3));
          const VI q6 = hn::Sub(hn::Or(q4, hn::ShiftLeft<4>(h2)), SetI(32));
          const VF ds = SetF(d * static_cast<float>(sc[2 * r + static_cast<int>(l / 16)]));
          StoreF(hn::Mul(ds, ToF(q6)), buf + 128 * half + 32 * r + l);
        }
      }
    }
    return buf;
  }
};

// y[t * y_stride] = row . x[t * cols ..] for t < NT. Two accumulator sets (alternate vectors) so one token's
// FMA chain is not bound by the FMA latency.
template <class Dec, size_t NT>
HWY_INLINE void DotTile(const uint8_t* HWY_RESTRICT row, int64_t cols, const float* HWY_RESTRICT x,
                        float* HWY_RESTRICT y, int64_t y_stride) {
  const DF df;
  const size_t N = hn::Lanes(df);
  const int64_t nb = cols / Dec::kQK;
  VF acc0[NT], acc1[NT];
  for (size_t t = 0; t < NT; ++t) acc0[t] = acc1[t] = hn::Zero(df);
  HWY_ALIGN float buf[Dec::kQK];  // [kQK]: one decoded block
  for (int64_t b = 0; b < nb; ++b) {
    if constexpr (NT == 1) PrefetchAhead<Dec::kBytes>(row + static_cast<size_t>(b) * Dec::kBytes);
    const float* HWY_RESTRICT w = Dec::Decode(row + static_cast<size_t>(b) * Dec::kBytes, buf);
    const float* xb = x + b * Dec::kQK;
    size_t i = 0;
    for (; i + 2 * N <= static_cast<size_t>(Dec::kQK); i += 2 * N) {
      const VF w0 = hn::LoadU(df, w + i);
      const VF w1 = hn::LoadU(df, w + i + N);
      for (size_t t = 0; t < NT; ++t) {
        acc0[t] = hn::MulAdd(w0, hn::LoadU(df, xb + static_cast<int64_t>(t) * cols + i), acc0[t]);
        acc1[t] = hn::MulAdd(w1, hn::LoadU(df, xb + static_cast<int64_t>(t) * cols + i + N), acc1[t]);
      }
    }
    for (; i < static_cast<size_t>(Dec::kQK); i += N) {
      const VF w0 = hn::LoadU(df, w + i);
      for (size_t t = 0; t < NT; ++t)
        acc0[t] = hn::MulAdd(w0, hn::LoadU(df, xb + static_cast<int64_t>(t) * cols + i), acc0[t]);
    }
  }
  float tail[NT] = {};
  if constexpr (Dec::kAnyCols) {
    for (int64_t c = nb * Dec::kQK; c < cols; ++c) {
      const float wc = Dec::Scalar(row, c);
      for (size_t t = 0; t < NT; ++t) tail[t] += wc * x[static_cast<int64_t>(t) * cols + c];
    }
  }
  for (size_t t = 0; t < NT; ++t) {
    y[static_cast<int64_t>(t) * y_stride] = hn::GetLane(hn::SumOfLanes(df, hn::Add(acc0[t], acc1[t]))) + tail[t];
  }
}

template <class Dec>
void Rows(const uint8_t* w, size_t row_bytes, int64_t cols, const float* x, int64_t n_tok, float* y,
          int64_t y_stride, int64_t r0, int64_t r1) {
  RowsByTokenTiles(w, row_bytes, n_tok, r0, r1, false, [&](auto nt, const uint8_t* row, int64_t r, int64_t t) HWY_ATTR {
    DotTile<Dec, decltype(nt)::value>(row, cols, x + t * cols, y + t * y_stride + r, y_stride);
  });
}

void MatmulRows(GgmlType type, const uint8_t* w, size_t row_bytes, int64_t cols, const float* x, int64_t n_tok,
                float* y, int64_t y_stride, int64_t r0, int64_t r1) {
#define MOETIER_ROWS(Dec) return Rows<Dec>(w, row_bytes, cols, x, n_tok, y, y_stride, r0, r1)
  switch (type) {
    case GgmlType::F32: MOETIER_ROWS(DecF32);
    case GgmlType::F16: MOETIER_ROWS(DecF16);
    case GgmlType::BF16: MOETIER_ROWS(DecBF16);
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
    default: HWY_ASSERT(false);  // callers check has_kernel()
  }
#undef MOETIER_ROWS
}

}  // namespace HWY_NAMESPACE
}  // namespace moetier::quant::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace moetier::quant::kernels {

HWY_EXPORT(MatmulRows);

bool has_kernel(GgmlType t) {
  switch (t) {
    case GgmlType::F32: case GgmlType::F16: case GgmlType::BF16:
    case GgmlType::Q4_0: case GgmlType::Q4_1: case GgmlType::Q5_0: case GgmlType::Q5_1: case GgmlType::Q8_0:
    case GgmlType::Q2_K: case GgmlType::Q3_K: case GgmlType::Q4_K: case GgmlType::Q5_K: case GgmlType::Q6_K:
    case GgmlType::IQ4_NL: case GgmlType::IQ4_XS: case GgmlType::MXFP4:
      return true;
    default:
      return false;
  }
}

void matmul_rows(GgmlType type, const uint8_t* w, size_t row_bytes, int64_t cols, const float* x, int64_t n_tok,
                 float* y, int64_t y_stride, int64_t r0, int64_t r1) {
  HWY_DYNAMIC_DISPATCH(MatmulRows)(type, w, row_bytes, cols, x, n_tok, y, y_stride, r0, r1);
}

std::vector<int64_t> compiled_targets() { return hwy::SupportedAndGeneratedTargets(); }

}  // namespace moetier::quant::kernels
#endif  // HWY_ONCE
