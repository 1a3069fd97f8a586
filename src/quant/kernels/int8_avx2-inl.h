// AVX2 fast paths of the integer kernels (int8_kernels.h) for the types that carry most of a model's bytes:
// Q4_K, Q6_K (Qwen3/Mixtral K-quant mixes), MXFP4 (gpt-oss experts), Q8_0, Q4_0, IQ4_NL. They multiply 8-bit
// weights with the 8-bit activation codes directly: pmaddubsw takes 32 unsigned x signed byte pairs and adds
// neighbours into 16 int16 lanes, then pmaddwd applies the sub-block scale (or 1) into 8 int32 lanes. That is
// 2 multiplies per 32 elements where the portable kernels (int16 operands) need 4, which is what bounds them.
//
// Exactness: every intermediate stays in range, so the block sums are the same integers the portable kernels
// and the scalar specification compute. pmaddubsw saturates at 2^15 - 1: its operands here are a weight code
// 0..63 (Q4_K nibble, Q6_K 6-bit code before its -32 shift) or |w| <= 128 (signed types, sign moved onto the
// activation with psignb) times an activation code |x| <= 127, so a pair is at most 2 * 128 * 127 = 32512.
// Included by int8_kernels.cpp inside its per-target namespace; compiled for the AVX2 and AVX-512 targets only.
#if defined(MOETIER_QUANT_KERNELS_INT8_AVX2_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MOETIER_QUANT_KERNELS_INT8_AVX2_INL_H_
#undef MOETIER_QUANT_KERNELS_INT8_AVX2_INL_H_
#else
#define MOETIER_QUANT_KERNELS_INT8_AVX2_INL_H_
#endif

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "hwy/highway.h"
#include "quant/blocks.h"
#include "quant/e8m0.h"
#include "quant/kernels/block_bytes-inl.h"
#include "quant/kernels/int8_kernels.h"

#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
#include <immintrin.h>

HWY_BEFORE_NAMESPACE();
namespace moetier::quant::kernels {
namespace HWY_NAMESPACE {
namespace avx2 {

HWY_INLINE float Hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

HWY_INLINE __m256i LoadU(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// pshufb pattern that copies int16 lane w (0..7) of each 128-bit half into all eight lanes of that half.
HWY_INLINE __m256i BroadcastWord(int w) {
  return _mm256_set1_epi16(static_cast<int16_t>(0x0100 * (2 * w + 1) + 2 * w));
}

// The eight 6-bit scales (bytes 0-7) and mins (bytes 8-15) of a Q4_K block, from its 12 packed bytes q (the
// 16 bytes at q are read; the block's qs follow): unpack_scale_min_k4 (kquant_scales.h) on the four 32-bit
// words at once, in registers, so no scalar bytes are stored and reloaded per block.
HWY_INLINE __m128i Q4KScalesMins(const uint8_t* q) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));  // words u0 u1 u2 (u3 unused)
  const __m128i low6 = _mm_set1_epi8(0x3f), low4 = _mm_set1_epi8(0x0f), low2 = _mm_set1_epi8(0x03);
  const __m128i a = _mm_shuffle_epi32(v, _MM_SHUFFLE(2, 1, 2, 0));  // u0 u2 u1 u2
  const __m128i b = _mm_shuffle_epi32(v, _MM_SHUFFLE(1, 1, 0, 0));  // u0 u0 u1 u1
  // Words 0 and 2: scales 0-3 and mins 0-3 (low 6 bits). Words 1 and 3: scales / mins 4-7, the low or high
  // nibbles of u2 below the top 2 bits of u0 / u1.
  const __m128i low = _mm_and_si128(a, low6);
  const __m128i nib = _mm_and_si128(_mm_srlv_epi32(a, _mm_setr_epi32(0, 0, 0, 4)), low4);
  const __m128i top = _mm_slli_epi32(_mm_and_si128(_mm_srli_epi32(b, 6), low2), 4);
  return _mm_blend_epi32(low, _mm_or_si128(nib, top), 0b1010);
}

// Q4_K: super-blocks of 256 = 8 sub-blocks of 32 with 6-bit scales and mins; sub-blocks 2p, 2p + 1 are the low
// and high nibbles of qs[32p .. 32p + 31]. y = d * dx * sum_s scale_s * (q_s . x_s) - dmin * dx * sum_s min_s *
// (sum of x_s's codes).
template <size_t NT>
HWY_INLINE void Q4KTile(const uint8_t* HWY_RESTRICT row, const Q8Rows& x, int64_t t0, float* HWY_RESTRICT y,
                        int64_t y_stride) {
  const int64_t cols = x.cols, nb = cols / kQK_K, n_sums = cols / 16;
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  __m256 acc[NT];
  __m128 macc[NT];  // the min terms, in 4 lanes
  for (size_t t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps(), macc[t] = _mm_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = row + static_cast<size_t>(b) * sizeof(BlockQ4_K);
    if constexpr (NT == 1) PrefetchAhead<sizeof(BlockQ4_K)>(blk);
    const float d = Fp16At(blk + offsetof(BlockQ4_K, d));
    const float dmin = Fp16At(blk + offsetof(BlockQ4_K, dmin));
    const __m128i sm = Q4KScalesMins(blk + offsetof(BlockQ4_K, scales));
    const __m128i mins = _mm_cvtepu8_epi16(_mm_unpackhi_epi64(sm, sm));
    const __m256i scales = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));  // int16 scales 0-7, both lanes
    __m256i lo[4], hi[4], sl[4], sh[4];  // nibbles (0..15) of sub-blocks 2p, 2p + 1, and their scales
    for (int p = 0; p < 4; ++p) {
      const __m256i q = LoadU(blk + offsetof(BlockQ4_K, qs) + 32 * p);
      lo[p] = _mm256_and_si256(q, m4);
      hi[p] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
      sl[p] = _mm256_shuffle_epi8(scales, BroadcastWord(2 * p));
      sh[p] = _mm256_shuffle_epi8(scales, BroadcastWord(2 * p + 1));
    }
    for (size_t t = 0; t < NT; ++t) {
      const int64_t tok = t0 + static_cast<int64_t>(t);
      const int8_t* xq = x.q + tok * cols + b * kQK_K;
      __m256i sumi = _mm256_setzero_si256();
      for (int p = 0; p < 4; ++p) {
        const __m256i pl = _mm256_madd_epi16(_mm256_maddubs_epi16(lo[p], LoadU(xq + 64 * p)), sl[p]);
        const __m256i ph = _mm256_madd_epi16(_mm256_maddubs_epi16(hi[p], LoadU(xq + 64 * p + 32)), sh[p]);
        sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(pl, ph));
      }
      const float dx = x.d[tok * nb + b];
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(d * dx), _mm256_cvtepi32_ps(sumi), acc[t]);
      const __m256i bs = LoadU(x.sums + tok * n_sums + b * 16);  // 16 sums of 16 codes
      const __m128i bs32 = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));  // of 32
      macc[t] = _mm_fmadd_ps(_mm_set1_ps(-dmin * dx), _mm_cvtepi32_ps(_mm_madd_epi16(mins, bs32)), macc[t]);
    }
  }
  for (size_t t = 0; t < NT; ++t) {
    __m128 m = _mm_add_ps(macc[t], _mm_movehl_ps(macc[t], macc[t]));
    m = _mm_add_ss(m, _mm_movehdup_ps(m));
    y[static_cast<int64_t>(t) * y_stride] = Hsum(acc[t]) + _mm_cvtss_f32(m);
  }
}

// Q4_K, four rows at once (rows row0 + k * row_bytes, k < 4), NT tokens: the same integer sums as Q4KTile, but
// each row's block sum is reduced to one int32 lane (phaddd) and the four rows share one conversion and one float
// multiply-add per block and token, with their scales d, dmin in the lanes, where the one-row tile spends a
// conversion, a broadcast, a scalar product and a multiply-add per row, for the sums and again for the mins
// (bench_matvec Matmul/Q4_K/768x2048/tok8, 1 thread: 25.9 -> 30.2 G MAC/s). Results differ from Q4KTile only
// by float rounding (the lanes are summed in another order).
template <size_t NT>
HWY_INLINE void Q4KTile4(const uint8_t* HWY_RESTRICT row0, size_t row_bytes, const Q8Rows& x, int64_t t0,
                         float* HWY_RESTRICT y, int64_t y_stride) {
  const int64_t cols = x.cols, nb = cols / kQK_K, n_sums = cols / 16;
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  const __m256i even_odd = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
  __m128 acc[NT];  // lane k: row k
  for (size_t t = 0; t < NT; ++t) acc[t] = _mm_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk[4];
    for (size_t k = 0; k < 4; ++k) blk[k] = row0 + k * row_bytes + static_cast<size_t>(b) * sizeof(BlockQ4_K);
    // d and dmin of the four rows: the fp16 pairs at each block's start, converted together, split into lanes.
    uint32_t dd[4];
    for (size_t k = 0; k < 4; ++k) std::memcpy(&dd[k], blk[k], 4);
    const __m256 d_dmin = _mm256_permutevar8x32_ps(
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(dd))), even_odd);
    const __m128 d4 = _mm256_castps256_ps128(d_dmin), dmin4 = _mm256_extractf128_ps(d_dmin, 1);
    __m256i sumi[4][NT];
    __m128i mins[4];  // eight int16 mins per row
    for (size_t k = 0; k < 4; ++k) {
      const __m128i sm = Q4KScalesMins(blk[k] + offsetof(BlockQ4_K, scales));
      mins[k] = _mm_cvtepu8_epi16(_mm_unpackhi_epi64(sm, sm));
      const __m256i scales = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));
      for (size_t t = 0; t < NT; ++t) sumi[k][t] = _mm256_setzero_si256();
      for (int p = 0; p < 4; ++p) {
        const __m256i q = LoadU(blk[k] + offsetof(BlockQ4_K, qs) + 32 * p);
        const __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
        const __m256i sl = _mm256_shuffle_epi8(scales, BroadcastWord(2 * p));
        const __m256i sh = _mm256_shuffle_epi8(scales, BroadcastWord(2 * p + 1));
        for (size_t t = 0; t < NT; ++t) {
          const int8_t* xq = x.q + (t0 + static_cast<int64_t>(t)) * cols + b * kQK_K + 64 * p;
          const __m256i pl = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, LoadU(xq)), sl);
          const __m256i ph = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, LoadU(xq + 32)), sh);
          sumi[k][t] = _mm256_add_epi32(sumi[k][t], _mm256_add_epi32(pl, ph));
        }
      }
    }
    for (size_t t = 0; t < NT; ++t) {
      const int64_t tok = t0 + static_cast<int64_t>(t);
      const __m256 dx = _mm256_set1_ps(x.d[tok * nb + b]);
      // Row k's eight partial sums into lane k (both halves hold a share; added after).
      const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(sumi[0][t], sumi[1][t]),
                                          _mm256_hadd_epi32(sumi[2][t], sumi[3][t]));
      const __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
      acc[t] = _mm_fmadd_ps(_mm_cvtepi32_ps(s4), _mm_mul_ps(d4, _mm256_castps256_ps128(dx)), acc[t]);
      const __m256i bs = LoadU(x.sums + tok * n_sums + b * 16);  // 16 sums of 16 codes
      const __m128i bs32 = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));  // of 32
      const __m128i m4r = _mm_hadd_epi32(_mm_hadd_epi32(_mm_madd_epi16(mins[0], bs32), _mm_madd_epi16(mins[1], bs32)),
                                         _mm_hadd_epi32(_mm_madd_epi16(mins[2], bs32), _mm_madd_epi16(mins[3], bs32)));
      acc[t] = _mm_fnmadd_ps(_mm_cvtepi32_ps(m4r), _mm_mul_ps(dmin4, _mm256_castps256_ps128(dx)), acc[t]);
    }
  }
  for (size_t t = 0; t < NT; ++t) _mm_storeu_ps(y + static_cast<int64_t>(t) * y_stride, acc[t]);
}

// Q6_K: 16 sub-blocks of 16 with int8 scales; code q = ql nibble | 2 qh bits << 4 (0..63), value q - 32.
// sum_j sc_j * ((q - 32) . x)_j = sum_j sc_j * (q . x)_j - 32 * sum_j sc_j * bsum_j.
template <size_t NT>
HWY_INLINE void Q6KTile(const uint8_t* HWY_RESTRICT row, const Q8Rows& x, int64_t t0, float* HWY_RESTRICT y,
                        int64_t y_stride) {
  const int64_t cols = x.cols, nb = cols / kQK_K, n_sums = cols / 16;
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  const __m256i m2 = _mm256_set1_epi8(0x03);
  __m256 acc[NT];
  for (size_t t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = row + static_cast<size_t>(b) * sizeof(BlockQ6_K);
    if constexpr (NT == 1) PrefetchAhead<sizeof(BlockQ6_K)>(blk);
    const float d = Fp16At(blk + offsetof(BlockQ6_K, d));
    const auto* sc = reinterpret_cast<const int8_t*>(blk + offsetof(BlockQ6_K, scales));
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc)));
    __m256i q[8], s[8];  // q[4h + r]: elements 128h + 32r .. +31 (0..63); s: their two sub-block scales
    for (int h = 0; h < 2; ++h) {
      const __m256i ql0 = LoadU(blk + offsetof(BlockQ6_K, ql) + 64 * h);
      const __m256i ql1 = LoadU(blk + offsetof(BlockQ6_K, ql) + 64 * h + 32);
      const __m256i qh = LoadU(blk + offsetof(BlockQ6_K, qh) + 32 * h);
      // The high bits are masked to 0..3 before the 16-bit shift, so no bit crosses into the next byte.
      const auto high = [&](int shift) {
        return _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, shift), m2), 4);
      };
      q[4 * h + 0] = _mm256_or_si256(_mm256_and_si256(ql0, m4), high(0));
      q[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(ql1, m4), high(2));
      q[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), high(4));
      q[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4), high(6));
    }
    // s[k]: sub-block 2k's scale in the low 128 bits (elements 32k .. 32k + 15), 2k + 1's in the high; the
    // scales as int16, 0-7 and 8-15 in both halves, picked by pshufb.
    const __m256i sc_lo = _mm256_broadcastsi128_si256(_mm256_castsi256_si128(sc16));
    const __m256i sc_hi = _mm256_broadcastsi128_si256(_mm256_extracti128_si256(sc16, 1));
    for (int k = 0; k < 8; ++k) {
      const __m256i pick = _mm256_set_m128i(_mm256_castsi256_si128(BroadcastWord((2 * k + 1) % 8)),
                                            _mm256_castsi256_si128(BroadcastWord((2 * k) % 8)));
      s[k] = _mm256_shuffle_epi8(k < 4 ? sc_lo : sc_hi, pick);
    }
    for (size_t t = 0; t < NT; ++t) {
      const int64_t tok = t0 + static_cast<int64_t>(t);
      const int8_t* xq = x.q + tok * cols + b * kQK_K;
      __m256i sumi = _mm256_setzero_si256();
      for (int k = 0; k < 8; ++k)
        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(_mm256_maddubs_epi16(q[k], LoadU(xq + 32 * k)), s[k]));
      const __m256i corr = _mm256_madd_epi16(sc16, LoadU(x.sums + tok * n_sums + b * 16));
      sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(corr, 5));
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(d * x.d[tok * nb + b]), _mm256_cvtepi32_ps(sumi), acc[t]);
    }
  }
  for (size_t t = 0; t < NT; ++t) y[static_cast<int64_t>(t) * y_stride] = Hsum(acc[t]);
}

// Blocks of 32 signed int8 weights with one float scale: Q8_0 as stored; Q4_0, IQ4_NL and MXFP4 through a
// 16-entry byte table (pshufb) indexed by the nibbles (element j < 16: low nibble of qs[j], j + 16: high).
// Weights(b, tbl): the 32 int8 weights of block b (tbl: the type's table in both 128-bit lanes, loaded once).
struct BlockQ8_0Weights {
  static constexpr size_t kBytes = sizeof(BlockQ8_0);
  static HWY_INLINE __m256i Table() { return _mm256_setzero_si256(); }
  static HWY_INLINE float Scale(const uint8_t* b) { return Fp16At(b); }
  static HWY_INLINE __m256i Weights(const uint8_t* b, __m256i) { return LoadU(b + offsetof(BlockQ8_0, qs)); }
};

inline constexpr int8_t kQ4_0Levels[16] = {-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7};

// e8m0_to_fp32_half for every exponent byte: one load per block instead of a branch and bit work.
inline constexpr auto kE8M0Half = [] {
  std::array<float, 256> t{};
  for (int e = 0; e < 256; ++e) t[static_cast<size_t>(e)] = e8m0_to_fp32_half(static_cast<uint8_t>(e));
  return t;
}();

template <class Block, const int8_t (&kTable)[16], bool kE8M0>
struct NibbleWeights {
  static constexpr size_t kBytes = sizeof(Block);
  static HWY_INLINE __m256i Table() {
    return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kTable)));
  }
  static HWY_INLINE float Scale(const uint8_t* b) { return kE8M0 ? kE8M0Half[b[0]] : Fp16At(b); }
  static HWY_INLINE __m256i Weights(const uint8_t* b, __m256i tbl) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + offsetof(Block, qs)));
    const __m128i m4 = _mm_set1_epi8(0x0f);
    const __m256i idx = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m4), _mm_and_si128(v, m4));
    return _mm256_shuffle_epi8(tbl, idx);
  }
};

// A block of 32 is little work, so two accumulator sets (even and odd blocks) keep the float multiply-add
// chain from bounding the loop (its latency is ~4 cycles, one block's integer work about as long).
template <class W, size_t NT>
HWY_INLINE void Block32Tile(const uint8_t* HWY_RESTRICT row, const Q8Rows& x, int64_t t0, float* HWY_RESTRICT y,
                            int64_t y_stride) {
  const int64_t cols = x.cols, nb = cols / 32;
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i tbl = W::Table();
  __m256 acc[2][NT];
  for (size_t t = 0; t < NT; ++t) acc[0][t] = acc[1][t] = _mm256_setzero_ps();
  const auto block = [&](int64_t b, __m256(&a)[NT]) {
    const uint8_t* blk = row + static_cast<size_t>(b) * W::kBytes;
    const float d = W::Scale(blk);
    const __m256i w = W::Weights(blk, tbl);
    const __m256i aw = _mm256_sign_epi8(w, w);  // |w| as unsigned bytes; the sign moves onto x
    for (size_t t = 0; t < NT; ++t) {
      const int64_t tok = t0 + static_cast<int64_t>(t);
      const __m256i xs = _mm256_sign_epi8(LoadU(x.q + tok * cols + b * 32), w);
      const __m256i sumi = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, xs), ones);
      a[t] = _mm256_fmadd_ps(_mm256_set1_ps(d * x.d[tok * nb + b]), _mm256_cvtepi32_ps(sumi), a[t]);
    }
  };
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    if constexpr (NT == 1) PrefetchAhead<2 * W::kBytes>(row + static_cast<size_t>(b) * W::kBytes);
    block(b, acc[0]);
    block(b + 1, acc[1]);
  }
  if (b < nb) block(b, acc[0]);
  for (size_t t = 0; t < NT; ++t) y[static_cast<int64_t>(t) * y_stride] = Hsum(_mm256_add_ps(acc[0][t], acc[1][t]));
}

// Rows r0 .. r1 - 1 by RowsByTokenTiles (block_bytes-inl.h) with Tile<NT>::Run.
template <template <size_t> class Tile>
void Rows(const uint8_t* w, size_t row_bytes, const Q8Rows& x, int64_t n_tok, float* y, int64_t y_stride,
          int64_t r0, int64_t r1) {
  RowsByTokenTiles(w, row_bytes, n_tok, r0, r1, [&](auto nt, const uint8_t* row, int64_t r, int64_t t) HWY_ATTR {
    Tile<decltype(nt)::value>::Run(row, x, t, y + t * y_stride + r, y_stride);
  });
}

template <size_t NT>
struct Q4K {
  static HWY_INLINE void Run(const uint8_t* r, const Q8Rows& x, int64_t t0, float* y, int64_t ys) {
    Q4KTile<NT>(r, x, t0, y, ys);
  }
};
template <size_t NT>
struct Q6K {
  static HWY_INLINE void Run(const uint8_t* r, const Q8Rows& x, int64_t t0, float* y, int64_t ys) {
    Q6KTile<NT>(r, x, t0, y, ys);
  }
};
template <class W>
struct Block32 {
  template <size_t NT>
  struct Tile {
    static HWY_INLINE void Run(const uint8_t* r, const Q8Rows& x, int64_t t0, float* y, int64_t ys) {
      Block32Tile<W, NT>(r, x, t0, y, ys);
    }
  };
};

// Q4_K: with several tokens (prefill; compute-bound), rows four at a time (Q4KTile4), tokens two at a time, the
// rows left over one at a time. One token (decode; bound by memory) goes a row at a time: four interleaved row
// streams per thread defeat the hardware prefetcher (bench_matvec Matvec/Q4_K/2048x4096, 2 threads, alternating
// runs: 7.1-8.0 GB/s with the four-row tile against 10.0-11.1 row by row). The tiles start at r0: matmul_groups
// splits a product's rows at multiples of 4 from its first, so the four-row groups (and the rounding of their
// results) do not depend on the thread count.
inline void Q4KRows(const uint8_t* w, size_t row_bytes, const Q8Rows& x, int64_t n_tok, float* y, int64_t y_stride,
                    int64_t r0, int64_t r1) {
  int64_t r = r0;
  if (n_tok > 1) {
    for (; r + 4 <= r1; r += 4) {
      const uint8_t* row = w + static_cast<size_t>(r) * row_bytes;
      int64_t t = 0;
      for (; t + 2 <= n_tok; t += 2) Q4KTile4<2>(row, row_bytes, x, t, y + t * y_stride + r, y_stride);
      if (t < n_tok) Q4KTile4<1>(row, row_bytes, x, t, y + t * y_stride + r, y_stride);
    }
  }
  if (r < r1) Rows<Q4K>(w, row_bytes, x, n_tok, y, y_stride, r, r1);
}

// True (and the product done) for the types with a fast path here.
inline bool MatmulRows(GgmlType type, const uint8_t* w, size_t row_bytes, const Q8Rows& x, int64_t n_tok, float* y,
                       int64_t y_stride, int64_t r0, int64_t r1) {
  switch (type) {
    case GgmlType::Q4_K: Q4KRows(w, row_bytes, x, n_tok, y, y_stride, r0, r1); return true;
    case GgmlType::Q6_K: Rows<Q6K>(w, row_bytes, x, n_tok, y, y_stride, r0, r1); return true;
    case GgmlType::Q8_0:
      Rows<Block32<BlockQ8_0Weights>::Tile>(w, row_bytes, x, n_tok, y, y_stride, r0, r1);
      return true;
    case GgmlType::Q4_0:
      Rows<Block32<NibbleWeights<BlockQ4_0, kQ4_0Levels, false>>::Tile>(w, row_bytes, x, n_tok, y, y_stride, r0, r1);
      return true;
    case GgmlType::IQ4_NL:
      Rows<Block32<NibbleWeights<BlockIQ4_NL, kIq4nlValues, false>>::Tile>(w, row_bytes, x, n_tok, y, y_stride, r0,
                                                                             r1);
      return true;
    case GgmlType::MXFP4:
      Rows<Block32<NibbleWeights<BlockMXFP4, kMxfp4DoubledValues, true>>::Tile>(w, row_bytes, x, n_tok, y, y_stride,
                                                                                  r0, r1);
      return true;
    default:
      return false;
  }
}

}  // namespace avx2
}  // namespace HWY_NAMESPACE
}  // namespace moetier::quant::kernels
HWY_AFTER_NAMESPACE();

#endif  // HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
#endif  // MOETIER_QUANT_KERNELS_INT8_AVX2_INL_H_
