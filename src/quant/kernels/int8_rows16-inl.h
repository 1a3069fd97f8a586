// Integer kernels of weights repacked with 16 rows in the lanes (quant/repack.h, rows16), AVX512-VNNI (Highway's
// AVX3_DL target) only: Q8_0, Q4_K and Q5_K (Q45KGroup below; several tokens: vnni512::Rows16Q45KLanes), Q6_K
// (Q6KOneTokenGroups; several tokens: vnni512::Rows16Q6KLanes), MXFP4 (Mxfp4OneTokenGroups; several tokens:
// vnni512::Rows16Mxfp4Lanes) and IQ4_XS (Iq4XsOneTokenGroups; several tokens: vnni512::Rows16Iq4XsLanes).
//
// Q8_0: per group of 16 rows and 32-column block: the 16 rows' scales in one load (vcvtph2ps, times the token's block
// scale), then per quad of columns one vpdpbusd of the quad's 64 bytes (16 rows' 4 unsigned codes) with the token's
// 4 codes broadcast from memory, started from the offset's share (-128 times the token's quad sum, broadcast by the
// load), one conversion and one fused multiply-add: 3 vector operations per 64 products, where the GGUF-layout
// kernel (Block32Rows) spends 7 per 32 (two sign operations, pmaddubsw, pmaddwd, the conversion, the scale's
// broadcast and the multiply-add).
//
// Q8_0's exactness (one token; several take the token tiles, vnni512::Rows16Q8Lanes, the GGUF layout's bits): the
// GGUF-layout one-token kernel (Block32Rows, and Block32Tile on targets without the tiles) keeps, per row, eight float
// lanes l (columns 4l .. 4l + 3 of each block) in two chains (even and odd blocks), each adding d_w * d_x * (the
// quad's exact int32 sum) with one fused multiply-add per block, then add the chains and reduce the lanes as Hsum
// does: ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)). Here vector acc[c][l] holds lane l of chain c of the 16
// rows, updated by the same operations on the same values (the quad sums are the same integers: (code + 128) * x
// summed, less 128 * sum x, exact in int32), and reduced in that order, so every result is the same bits. The
// kernel test checks it against the GGUF layout for one token and several.
// Included by int8_kernels.cpp inside its per-target namespace, after int8_vnni512-inl.h.
#if defined(MOETIER_QUANT_KERNELS_INT8_ROWS16_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MOETIER_QUANT_KERNELS_INT8_ROWS16_INL_H_
#undef MOETIER_QUANT_KERNELS_INT8_ROWS16_INL_H_
#else
#define MOETIER_QUANT_KERNELS_INT8_ROWS16_INL_H_
#endif

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "hwy/highway.h"
#include "quant/blocks.h"
#include "quant/kernels/int8_kernels.h"
#include "quant/repack.h"

#if HWY_TARGET == HWY_AVX3_DL
#include <immintrin.h>

HWY_BEFORE_NAMESPACE();
namespace moetier::quant::kernels {
namespace HWY_NAMESPACE {
namespace rows16 {

// One token times G groups of a rows16 Q8_0 matrix (gw[k]: group k's bytes, y16[k]: its 16 results), the G
// groups' blocks in turn: G streams from memory, where one group alone is one. acc[k][c][l]: lane l of chain c
// of group k (the header says why that order).
template <size_t G>
HWY_INLINE void Q8_0OneToken(const uint8_t* const (&gw)[G], int64_t nb, const Q8Rows& x, int64_t t,
                             float* const (&y16)[G]) {
  const int8_t* xq = x.q + t * nb * 32;
  const float* xd = x.d + t * nb;
  const int32_t* bias = x.quad_bias + t * nb * 8;
  __m512 acc[G][2][8];
  for (auto& group : acc)
    for (auto& chain : group)
      for (__m512& a : chain) a = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    for (size_t k = 0; k < G; ++k) {
      const uint8_t* blk = gw[k] + static_cast<size_t>(b) * kRows16BlockBytes;
      PrefetchAhead<kRows16BlockBytes>(blk);  // block_bytes-inl.h: the address formed as an integer
      const __m512 s = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk))),
                                     _mm512_set1_ps(xd[b]));
      __m512(&a)[8] = acc[k][b & 1];
      for (int q = 0; q < 8; ++q) {
        const __m512i codes = _mm512_loadu_si512(blk + 32 + 64 * q);
        const __m512i sum = vnni512::DpBusdBcast(_mm512_set1_epi32(bias[b * 8 + q]), codes, xq + b * 32 + 4 * q);
        a[q] = _mm512_fmadd_ps(s, _mm512_cvtepi32_ps(sum), a[q]);
      }
    }
  }
  for (size_t k = 0; k < G; ++k) {
    __m512 v[8];
    for (int l = 0; l < 8; ++l) v[l] = _mm512_add_ps(acc[k][0][l], acc[k][1][l]);
    const __m512 r = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(v[0], v[4]), _mm512_add_ps(v[2], v[6])),
                                   _mm512_add_ps(_mm512_add_ps(v[1], v[5]), _mm512_add_ps(v[3], v[7])));
    _mm512_storeu_ps(y16[k], r);
  }
}

// Groups [g0, g1) of a rows16 Q8_0 matrix of `cols` columns times tokens 0 .. n_tok - 1 of x: y[t * y_stride + 16 g
// + l] for row l of group g. One token (with quad_bias): the first and second halves of the range side by side (two
// streams, as the GGUF-layout kernels read, TwoStreamRows). Several, or one of a prompt's (with the token tiles,
// x.qt): vnni512::TokenTiles, whose results are those of the GGUF layout's Q8_0 tiles.
HWY_FLATTEN void Q8_0Groups(const uint8_t* w, int64_t cols, const Q8Rows& x, int64_t n_tok, float* y,
                            int64_t y_stride, int64_t g0, int64_t g1) {
  const int64_t nb = cols / 32;
  const size_t group_bytes = static_cast<size_t>(nb) * kRows16BlockBytes;
  const auto group = [&](int64_t g) { return w + static_cast<size_t>(g) * group_bytes; };
  if (x.qt != nullptr) {
    vnni512::TokenTiles<vnni512::Rows16Q8Lanes>(w, 0, x, n_tok, y, y_stride, g0 * kRows16, g1 * kRows16);
    return;
  }
  assert(n_tok == 1 && !x.batched);  // matmul_groups gives several tokens (or a prompt's one) the tiles
  const int64_t half = (g1 - g0) / 2;
  for (int64_t i = 0; i < half; ++i) {
    const int64_t a = g0 + i, b = g1 - half + i;
    const uint8_t* const gw[2] = {group(a), group(b)};
    float* const y16[2] = {y + a * kRows16, y + b * kRows16};
    Q8_0OneToken<2>(gw, nb, x, 0, y16);
  }
  if ((g1 - g0) % 2 != 0) {
    const int64_t m = g0 + half;
    const uint8_t* const gw[1] = {group(m)};
    float* const y16[1] = {y + m * kRows16};
    Q8_0OneToken<1>(gw, nb, x, 0, y16);
  }
}

// avx2::ReduceLanes512 for 16 rows at once: acc[L] holds lane L of each row's float accumulator; the result's
// lane r is row r's sum, added in the same order (pairs 8 apart, then 4 apart, then ((0 + 2) + (1 + 3))).
HWY_INLINE __m512 ReduceLanes16Rows(const __m512 (&acc)[16]) {
  __m512 t3[8], t6[4];
  for (int l = 0; l < 8; ++l) t3[l] = _mm512_add_ps(acc[l + 8], acc[l]);
  for (int l = 0; l < 4; ++l) t6[l] = _mm512_add_ps(t3[l + 4], t3[l]);
  return _mm512_add_ps(_mm512_add_ps(t6[0], t6[2]), _mm512_add_ps(t6[1], t6[3]));
}

// Q4_K, one token: acc[L] holds lane L of avx2::Q4KRows512's float accumulator for the 16 rows, updated by the
// same operations on the same values. In that kernel, lane L = 4k + i (k, i < 4) of a block's integer sum is, over
// c = 0, 1, scale s * (the 8 products of qs dwords m and m + 1 of part p = 2c + j), j = i / 2, m = 4 (k % 2) + 2 (i
// % 2), in their low nibbles (sub-block s = 2p) for k < 2 and high ones (s = 2p + 1) otherwise; lane j of its min
// term (j < 8) is min j times the activation sums of 16 number 2j and 2j + 1, of the pair's first block in lanes
// 0-7 and its second in 8-15. Here each of those sums is 2 vpdpbusd per qs dword pair (exact in int32, under 2^14:
// it fits the int16 half that vpmaddwd multiplies by the scale) and the scale's product one vpmaddwd or vpdpwssd, so
// a group's block of 16 rows takes 64 vpdpbusd, 68 masks and ~150 other operations (the compiled loop), where the
// GGUF layout's kernel repeats its scale unpacking, min term and lane sum for every row. The lanes are then added
// in ReduceLanes512's order.
// Q5_K (B = BlockQ5_K; avx2::Q4KRows512<BlockQ5_K>) has the same lanes with codes of 5 bits (the fifth from the
// qh vectors: the same dwords m, m + 1 as the nibbles, bit s for sub-block s), whose sums of 8 products are still
// under 2^15 (8 * 31 * 127); its high nibbles come down (a shift) rather than stay 16 times over, which would not fit a
// byte. Per block of 16 rows that adds 64 fifth-bit merges (a shift and a ternary logic op each) and 32 shifts.
template <class B>
struct Q45KGroup {
  static constexpr bool kFifth = std::is_same_v<B, BlockQ5_K>;
  static constexpr size_t kBlockBytes = kFifth ? kRows16Q5KBlockBytes : kRows16Q4KBlockBytes;
  __m512 acc[16];

  // Block b of the group (blk: its kBlockBytes) times the token's codes: acc[L] += d * dx * (lane L's integer sum).
  HWY_INLINE void Sums(const uint8_t* blk, const int8_t* xb, float dx) {
    const __m512i low4 = _mm512_set1_epi8(0x0f), high4 = _mm512_set1_epi8(static_cast<char>(0xf0));
    __m512i h[4];
    for (int i = 0; i < 4; ++i) h[i] = _mm512_loadu_si512(blk + 64 * i);
    __m512i sc[2], mn[2];
    vnni512::Q4KLanes::ScalesMins(h, sc, mn);
    const __m512 dd = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(h[0])), _mm512_set1_ps(dx));
    const uint8_t* qs = blk + (kFifth ? kRows16Q5KNibblesAt : 256);
    // lane pair l's four vectors are 4l .. 4l + 3 (parts j then 2 + j, dwords m, m + 1): read front to back
    static_assert(q4k_rows16_vector(2, 2) == 4 * 1 + 2 && q4k_rows16_vector(1, 7) == 4 * 7 + 1);
    // Unrolled, so that every index is a constant and acc stays in registers (as a loop, acc lived in memory:
    // MatvecHot/Q4_K.rows16/768x2048 at 1 thread 18.9 GB/s, unrolled 30.8, the file layout's kernel 22.8).
#pragma GCC unroll 8
    for (int l = 0; l < 8; ++l) {  // lanes l (low nibbles) and l + 8 (high)
      const int k = l / 4, i = l % 4, j = i / 2, m = 4 * k + 2 * (i % 2);
      __m512i lo[2], hi[2];
#pragma GCC unroll 2
      for (int c = 0; c < 2; ++c) {
        const int p = 2 * c + j;
        const __m512i q0 = _mm512_loadu_si512(qs + 64 * q4k_rows16_vector(p, m));
        const __m512i q1 = _mm512_loadu_si512(qs + 64 * q4k_rows16_vector(p, m + 1));
        const int8_t* x0 = xb + 64 * p + 4 * m;
        if constexpr (kFifth) {
          using vnni512::Q5KLanes;
          const __m512i qh0 = _mm512_loadu_si512(blk + kRows16Q5KQhAt + 64 * m);
          const __m512i qh1 = _mm512_loadu_si512(blk + kRows16Q5KQhAt + 64 * (m + 1));
          const auto low = [&](__m512i q, __m512i qh, int s) HWY_ATTR {
            return Q5KLanes::WithFifth(_mm512_and_si512(q, low4), qh, s);
          };
          const auto high = [&](__m512i q, __m512i qh, int s) HWY_ATTR {
            return Q5KLanes::WithFifth(_mm512_and_si512(_mm512_srli_epi32(q, 4), low4), qh, s);
          };
          lo[c] = vnni512::DpBusdBcast(vnni512::DpBusdBcast(_mm512_setzero_si512(), low(q0, qh0, 2 * p), x0),
                                       low(q1, qh1, 2 * p), x0 + 4);
          hi[c] = vnni512::DpBusdBcast(vnni512::DpBusdBcast(_mm512_setzero_si512(), high(q0, qh0, 2 * p + 1), x0 + 32),
                                       high(q1, qh1, 2 * p + 1), x0 + 36);
        } else {
          lo[c] = vnni512::DpBusdBcast(vnni512::DpBusdBcast(_mm512_setzero_si512(), _mm512_and_si512(q0, low4), x0),
                                       _mm512_and_si512(q1, low4), x0 + 4);
          // The high nibbles in place are 16 times the codes: the exact sum divided by 16 (one shift where moving
          // the nibbles down takes two per vector).
          hi[c] = _mm512_srai_epi32(
              vnni512::DpBusdBcast(vnni512::DpBusdBcast(_mm512_setzero_si512(), _mm512_and_si512(q0, high4), x0 + 32),
                                   _mm512_and_si512(q1, high4), x0 + 36),
              4);
        }
      }
      // sub-blocks 4c + 2j (low) and 4c + 2j + 1 (high): scale bytes 2j, 2j + 1 of sc[c]
      const __m512i slo = avx2::DpWssd(_mm512_madd_epi16(lo[0], vnni512::ByteOfLanes(sc[0], 2 * j)), lo[1],
                                       vnni512::ByteOfLanes(sc[1], 2 * j));
      const __m512i shi = avx2::DpWssd(_mm512_madd_epi16(hi[0], vnni512::ByteOfLanes(sc[0], 2 * j + 1)), hi[1],
                                       vnni512::ByteOfLanes(sc[1], 2 * j + 1));
      acc[l] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(slo), dd, acc[l]);
      acc[l + 8] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(shi), dd, acc[l + 8]);
    }
  }
  // The min term of block blk: acc[o + j] -= dmin * dx * min j * (sums 2j and 2j + 1 of 16 of the token's codes,
  // xs). Lanes o + 8 .. (when `zeros`) take the product with zero that Q4KRows512's odd last block gives them.
  HWY_INLINE void Mins(const uint8_t* blk, const int16_t* xs, float dx, int o, bool zeros) {
    __m512i h[4];
    for (int i = 0; i < 4; ++i) h[i] = _mm512_loadu_si512(blk + 64 * i);
    __m512i sc[2], mn[2];
    vnni512::Q4KLanes::ScalesMins(h, sc, mn);
    const __m512 dm =
        _mm512_mul_ps(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(h[0], 16))), _mm512_set1_ps(dx));
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      int32_t pair;
      std::memcpy(&pair, xs + 2 * j, 4);
      const __m512i msum = _mm512_madd_epi16(vnni512::ByteTwiceOfLanes(mn[j / 4], j % 4), _mm512_set1_epi32(pair));
      acc[o + j] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum), dm, acc[o + j]);
    }
    if (zeros) {
#pragma GCC unroll 8
      for (int j = 8; j < 16; ++j) acc[j] = _mm512_fnmadd_ps(_mm512_setzero_ps(), dm, acc[j]);
    }
  }
};

// One token's rows16 K-quant kernels read the bytes front to back (the layout's order), one stream per thread. With
// kPrefetch (rows16_prefetch(): AMD family 1Ah, Zen 5, and later) each block asks for the bytes kRows16PrefetchAhead
// on, as the GGUF-layout kernels do; on Zen 4 the hardware's stream prefetcher kept up alone, and asking 4 KiB ahead
// per block pair cost more than it brought (an earlier form on a Xeon: docs/design.md, "Repacked weights"):
// bench_matvec on a 2-vCPU AMD EPYC (Zen 4), medians of 3, GB/s at 1 / 2 threads, GGUF layout -> rows16 with the
// prefetch -> rows16 without: Matvec/Q4_K/768x2048 21.1 / 29.4 -> 15.7 / 21.1 -> 25.2 / 28.6; 2048x768 17.4 / 27.0 ->
// 18.7 / 25.8 -> 27.6 / 30.6; 2048x4096 20.6 / 32.4 -> 15.9 / 23.8 -> 25.7 / 28.7 (the 2-thread read: 31.1);
// MatvecHot/Q4_K/768x2048 at 1 thread 23.0 -> 41.7 -> 38.9. On a 2-vCPU AMD EPYC of family 1Ah (Zen 5; a noisy host,
// 2-thread read 45-50 GB/s) the opposite. bench_matvec Matvec/<type>/2048x4096 at 2 threads, GB/s, GGUF layout /
// rows16, without -> 8 KiB ahead, one process per setting, medians of 3, two rounds: Q4_K 33.2 / 18.0 -> 21.4 / 28.1
// and 22.2 / 22.4 -> 28.3 / 27.3, Q6_K 35.3 / 17.9 -> 19.7 / 30.9 and 16.2 / 21.7 -> 23.6 / 35.1;
// Rows16Prefetch/<type>/2048x4096/<off|on>/2, both settings interleaved at random in one process, medians of 6: Q4_K
// 18.6 -> 20.6, Q6_K 13.2 -> 18.4.
inline constexpr size_t kRows16PrefetchAhead = 8192;

// One token times groups [g0, g1) of a rows16 Q4_K or Q5_K matrix, each group's blocks in order, each block pair
// as Q4KRows512 takes it: both blocks' sums, then the first's min term in lanes 0-7 and the second's in 8-15; an odd
// last block's min term in lanes 0-7.
template <class B, bool kPrefetch>
HWY_FLATTEN void Q45KOneTokenGroups(const uint8_t* w, int64_t cols, const Q8Rows& x, float* y, int64_t g0,
                                    int64_t g1) {
  constexpr size_t kBlockBytes = Q45KGroup<B>::kBlockBytes;
  const int64_t nb = cols / kQK_K;
  for (int64_t g = g0; g < g1; ++g) {
    const uint8_t* gw = w + static_cast<size_t>(g * nb) * kBlockBytes;
    Q45KGroup<B> q;
    for (__m512& a : q.acc) a = _mm512_setzero_ps();
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
      const uint8_t* ba = gw + static_cast<size_t>(b) * kBlockBytes;
      const uint8_t* bb = ba + kBlockBytes;
      if constexpr (kPrefetch) PrefetchAhead<2 * kBlockBytes, kRows16PrefetchAhead>(ba);
      q.Sums(ba, x.q + b * kQK_K, x.d[b]);
      q.Sums(bb, x.q + (b + 1) * kQK_K, x.d[b + 1]);
      q.Mins(ba, x.sums + b * 16, x.d[b], 0, false);
      q.Mins(bb, x.sums + (b + 1) * 16, x.d[b + 1], 8, false);
    }
    if (b < nb) {
      const uint8_t* ba = gw + static_cast<size_t>(b) * kBlockBytes;
      if constexpr (kPrefetch) PrefetchAhead<kBlockBytes, kRows16PrefetchAhead>(ba);
      q.Sums(ba, x.q + b * kQK_K, x.d[b]);
      q.Mins(ba, x.sums + b * 16, x.d[b], 0, true);
    }
    _mm512_storeu_ps(y + g * kRows16, ReduceLanes16Rows(q.acc));
  }
}

// Q6_K, one token: acc[L] holds lane L of avx2::Q6KRow512's float accumulator for the 16 rows, updated by the same
// operations on the same values. In that kernel, lane L of a block's integer sum is, over the block's halves h and
// k = 0, 1, scale 8h + 4k + L / 4 times the 4 products of elements 128h + 64k + 4L .. + 3, less, in lanes L < 8,
// 32 times (scale 2L times the activation sum of 16 number 2L, plus the same of 2L + 1): the codes' offset. Here,
// for dword index i, lanes i and i + 8 take the codes that vectors 6i + 3h .. 6i + 3h + 2 make (quant/repack.h):
// elements 128h + 32r + 4i .. for range r < 4 (r = 2k for lane i, 2k + 1 for lane i + 8), each code its ql nibble
// and its qh bit pair at bits 4-5 (three operations, as vnni512::Q6KLanes), its 4 products one vpdpbusd (exact, at
// most 4 * 63 * 128 < 2^15: it fits the int16 half that vpdpwssd multiplies by the scale) and the scale's product
// one vpdpwssd. A group's block of 16 rows takes 64 vpdpbusd, 64 vpdpwssd and ~260 other operations, where the
// GGUF layout's kernel spends ~45 per row. The lanes are then added in ReduceLanes512's order. kPrefetch: as
// Q45KOneTokenGroups.
template <bool kPrefetch>
HWY_FLATTEN void Q6KOneTokenGroups(const uint8_t* w, int64_t cols, const Q8Rows& x, float* y, int64_t g0,
                                   int64_t g1) {
  const int64_t nb = cols / kQK_K;
  const __m512i low4 = _mm512_set1_epi8(0x0f), bits45 = _mm512_set1_epi8(0x30);
  for (int64_t g = g0; g < g1; ++g) {
    const uint8_t* gw = w + static_cast<size_t>(g * nb) * kRows16Q6KBlockBytes;
    __m512 acc[16];
    for (__m512& a : acc) a = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = gw + static_cast<size_t>(b) * kRows16Q6KBlockBytes;
      const uint8_t* codes = blk + kRows16Q6KCodesAt;
      if constexpr (kPrefetch) PrefetchAhead<kRows16Q6KBlockBytes, kRows16PrefetchAhead>(blk);
      const int8_t* xb = x.q + b * kQK_K;
      const int16_t* xs = x.sums + b * 16;
      __m512i hs[4];  // lane r: row r's scales 4c .. 4c + 3 in hs[c]
      for (int c = 0; c < 4; ++c) hs[c] = _mm512_loadu_si512(blk + 64 * c);
      const __m256i d = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + kRows16Q6KDAt));
      const __m512 dd = _mm512_mul_ps(_mm512_cvtph_ps(d), _mm512_set1_ps(x.d[b]));
#pragma GCC unroll 2
      for (int iq = 0; iq < 2; ++iq) {  // i / 4: which scales the lanes take
        __m512i sc[2][4];  // sub-block 8h + 2r + iq's scale, for range r of half h
        for (int h = 0; h < 2; ++h)
          for (int r = 0; r < 4; ++r) sc[h][r] = vnni512::SignedByteWordOfLanes(hs[2 * h + r / 2], 2 * (r % 2) + iq);
#pragma GCC unroll 4
        for (int i = 4 * iq; i < 4 * iq + 4; ++i) {
          __m512i sum[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};  // lanes i, i + 8
#pragma GCC unroll 2
          for (int h = 0; h < 2; ++h) {
            const uint8_t* v = codes + 64 * (6 * i + 3 * h);
            const __m512i qh = _mm512_loadu_si512(v);
            const __m512i ql[2] = {_mm512_loadu_si512(v + 64), _mm512_loadu_si512(v + 128)};
#pragma GCC unroll 4
            for (int r = 0; r < 4; ++r) {  // ql[r % 2]'s low nibbles (r < 2) or high ones; qh bits 2r, 2r + 1
              const __m512i lo = _mm512_and_si512(r < 2 ? ql[r % 2] : _mm512_srli_epi32(ql[r % 2], 4), low4);
              const __m512i hi = r == 0   ? _mm512_slli_epi32(qh, 4)
                                 : r == 1 ? _mm512_slli_epi32(qh, 2)
                                 : r == 2 ? qh
                                          : _mm512_srli_epi32(qh, 2);
              const __m512i code = _mm512_ternarylogic_epi32(lo, hi, bits45, 0xf8);  // lo | (hi & 0x30)
              const __m512i dot = vnni512::DpBusdBcast(_mm512_setzero_si512(), code, xb + 128 * h + 32 * r + 4 * i);
              sum[r % 2] = avx2::DpWssd(sum[r % 2], dot, sc[h][r]);
            }
          }
          int32_t pair;  // the activation sums of 16 number 2i and 2i + 1
          std::memcpy(&pair, xs + 2 * i, 4);
          const __m512i off = _mm512_slli_epi32(
              _mm512_madd_epi16(vnni512::SignedBytePairOfLanes(hs[i / 2], 2 * (i % 2)), _mm512_set1_epi32(pair)), 5);
          acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(sum[0], off)), dd, acc[i]);
          acc[i + 8] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[1]), dd, acc[i + 8]);
        }
      }
    }
    _mm512_storeu_ps(y + g * kRows16, ReduceLanes16Rows(acc));
  }
}

// MXFP4, one token, where the CPU runs 512-bit operations whole: avx2::Mxfp4Rows512's sums for 16 rows at once.
// acc[j] holds chain j (the blocks b with b % 16 = j) of the 16 rows, each block's exact int32 sum (8 vpdpbusd
// started from the offset's share, -12 times the block's activation sum) converted once and added by one fused
// multiply-add; the chains are then added as that kernel adds its lanes (ReduceLanes16Rows). Per block of 16 rows:
// 4 loads, 4 shifts and 8 vpermb for the codes, 5 operations for the scales and a multiply by the token's block
// scale, 8 vpdpbusd, one conversion and one fused multiply-add: ~31 vector operations per 512 products, where the
// GGUF layout's kernel spends ~70. kPrefetch: as Q45KOneTokenGroups. bench_matvec on a 2-vCPU AMD EPYC of family 1Ah
// (Zen 5), medians of 3, GB/s at 1 / 2 threads, GGUF layout -> rows16: MatvecHot/MXFP4/768x2048 27.3 / 43.1 -> 60.3 /
// 74.9 (ReadBandwidth 26.8 / 51.8); from DRAM, Matvec/MXFP4/2880x2880 at 2 threads, medians of 4 interleaved at
// random in one process: 34.3 -> 56.5 (38.5 without the prefetch: Rows16Prefetch/MXFP4/2880x2880/off). The form
// that kept the GGUF kernel's quad lanes (8 conversions and multiply-adds per block) was no faster than it there.
template <bool kPrefetch>
HWY_FLATTEN void Mxfp4OneTokenGroups(const uint8_t* w, int64_t cols, const Q8Rows& x, float* y, int64_t g0,
                                     int64_t g1) {
  const int64_t nb = cols / kQK;
  const __m512i tbl = vnni512::Mxfp4Table512();
  for (int64_t g = g0; g < g1; ++g) {
    const uint8_t* gw = w + static_cast<size_t>(g * nb) * kRows16Mxfp4BlockBytes;
    __m512 acc[16];
    for (__m512& a : acc) a = _mm512_setzero_ps();
    for (int64_t c = 0; c < nb; c += 16) {
      const int64_t m = std::min<int64_t>(16, nb - c);  // blocks in this chunk: chains 0 .. m - 1 take one each
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j) {
        if (j >= m) break;
        const int64_t b = c + j;
        const uint8_t* blk = gw + static_cast<size_t>(b) * kRows16Mxfp4BlockBytes;
        if constexpr (kPrefetch) PrefetchAhead<kRows16Mxfp4BlockBytes, kRows16PrefetchAhead>(blk);
        const __m512 s = _mm512_mul_ps(vnni512::Rows16Mxfp4Scales(blk), _mm512_set1_ps(x.d[b]));
        __m512i codes[8];
        vnni512::Rows16Mxfp4Codes(blk, tbl, codes);
        const int8_t* xq = x.q + b * kQK;
        const int16_t* s16 = x.sums + b * 2;  // the offset's share: -12 times the block's activation sum
        __m512i sum = _mm512_set1_epi32(-avx2::MXFP4Tokens::kOffset * (s16[0] + s16[1]));
        for (int q = 0; q < 8; ++q) sum = vnni512::DpBusdBcast(sum, codes[q], xq + 4 * q);
        acc[j] = _mm512_fmadd_ps(s, _mm512_cvtepi32_ps(sum), acc[j]);
      }
    }
    _mm512_storeu_ps(y + g * kRows16, ReduceLanes16Rows(acc));
  }
}

// IQ4_XS, one token: acc[L] holds lane L of avx2::Iq4XsRows512's float accumulator for the 16 rows, updated by the same
// operations on the same values. In that kernel, lane 4c + p of a block's integer sum is sub-block s = 2p + c / 2's
// scale times the 16 products of its elements 16h .. 16h + 15, h = c % 2: its qs dwords 4s .. 4s + 3 (quant/repack.h),
// their low nibbles for h = 0, high ones for h = 1. Here each such sum of 16 is 4 vpdpbusd of the levels plus 128 (one
// vpermb per vector of codes) started from the offset's share (-128 times the activation sum of 16, Q8Rows::sums; exact
// in int32, |sum| <= 16 * 127 * 127), one vpmulld by the 16 rows' scale, one conversion and one fused multiply-add: per
// block of 16 rows 64 vpdpbusd, 64 vpermb, 16 vpmulld and ~140 other operations, where the GGUF layout's kernel spends
// ~50 per row. The lanes are then added in ReduceLanes512's order. kPrefetch: as Q45KOneTokenGroups.
template <bool kPrefetch>
HWY_FLATTEN void Iq4XsOneTokenGroups(const uint8_t* w, int64_t cols, const Q8Rows& x, float* y, int64_t g0,
                                     int64_t g1) {
  using L = vnni512::Iq4XsLanes;
  const int64_t nb = cols / kQK_K;
  const __m512i table = L::LevelTable();
  for (int64_t g = g0; g < g1; ++g) {
    const uint8_t* gw = w + static_cast<size_t>(g * nb) * kRows16Iq4XsBlockBytes;
    __m512 acc[16];
    for (__m512& a : acc) a = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = gw + static_cast<size_t>(b) * kRows16Iq4XsBlockBytes;
      if constexpr (kPrefetch) PrefetchAhead<kRows16Iq4XsBlockBytes, kRows16PrefetchAhead>(blk);
      const uint8_t* qs = blk + kRows16Iq4XsQsAt;
      const int8_t* xb = x.q + b * kQK_K;
      const int16_t* xs = x.sums + b * 16;
      const __m512i h0 = _mm512_loadu_si512(blk), h1 = _mm512_loadu_si512(blk + 64);
      const __m512 dd = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(h0)), _mm512_set1_ps(x.d[b]));
#pragma GCC unroll 8
      for (int s = 0; s < 8; ++s) {
        __m512i sum[2] = {_mm512_set1_epi32(-128 * xs[2 * s]), _mm512_set1_epi32(-128 * xs[2 * s + 1])};
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) {
          const __m512i q = _mm512_loadu_si512(qs + 64 * (4 * s + k));
          sum[0] = vnni512::DpBusdBcast(sum[0], _mm512_permutexvar_epi8(q, table), xb + 32 * s + 4 * k);
          sum[1] = vnni512::DpBusdBcast(sum[1], _mm512_permutexvar_epi8(_mm512_srli_epi32(q, 4), table),
                                        xb + 32 * s + 16 + 4 * k);
        }
        const __m512i scale = L::SubBlockScale(h0, h1, s);
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
          __m512& a = acc[4 * (2 * (s % 2) + h) + s / 2];
          a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_mullo_epi32(sum[h], scale)), dd, a);
        }
      }
    }
    _mm512_storeu_ps(y + g * kRows16, ReduceLanes16Rows(acc));
  }
}

// A rows16 MXFP4 matrix: several tokens (or a prompt's one) through the tiles (vnni512::Rows16Mxfp4Lanes), one token
// as the GGUF layout's kernel on this CPU sums (Mxfp4OneTokenGroups).
HWY_INLINE void Mxfp4Groups(const uint8_t* w, int64_t cols, const Q8Rows& x, int64_t n_tok, float* y,
                            int64_t y_stride, int64_t g0, int64_t g1) {
  if (x.qt != nullptr) {
    vnni512::TokenTiles<vnni512::Rows16Mxfp4Lanes>(w, 0, x, n_tok, y, y_stride, g0 * kRows16, g1 * kRows16);
    return;
  }
  assert(n_tok == 1 && !x.batched);  // matmul_groups gives several tokens (or a prompt's one) the tiles
  if (rows16_prefetch()) return Mxfp4OneTokenGroups<true>(w, cols, x, y, g0, g1);
  Mxfp4OneTokenGroups<false>(w, cols, x, y, g0, g1);
}

// A rows16 K-quant or IQ4_XS matrix: several tokens (or a prompt's one) through the tiles K, one token through
// one_token (with the software prefetch where rows16_prefetch() says so).
using OneTokenGroups = void (*)(const uint8_t*, int64_t, const Q8Rows&, float*, int64_t, int64_t);
template <class K>
HWY_INLINE void KQuantGroups(OneTokenGroups prefetching, OneTokenGroups plain, const uint8_t* w, int64_t cols,
                             const Q8Rows& x, int64_t n_tok, float* y, int64_t y_stride, int64_t g0, int64_t g1) {
  if (x.qt != nullptr) return vnni512::TokenTiles<K>(w, 0, x, n_tok, y, y_stride, g0 * kRows16, g1 * kRows16);
  assert(n_tok == 1 && !x.batched);  // matmul_groups gives several tokens (or a prompt's one) the tiles
  (rows16_prefetch() ? prefetching : plain)(w, cols, x, y, g0, g1);
}

// True (and the product done) for the types with a rows16 kernel.
inline bool MatmulRows16(GgmlType type, const uint8_t* w, int64_t cols, const Q8Rows& x, int64_t n_tok, float* y,
                         int64_t y_stride, int64_t g0, int64_t g1) {
  switch (type) {
    case GgmlType::Q8_0: Q8_0Groups(w, cols, x, n_tok, y, y_stride, g0, g1); return true;
    case GgmlType::Q4_K:
      KQuantGroups<vnni512::Rows16Q4KLanes>(Q45KOneTokenGroups<BlockQ4_K, true>, Q45KOneTokenGroups<BlockQ4_K, false>,
                                            w, cols, x, n_tok, y, y_stride, g0, g1);
      return true;
    case GgmlType::Q5_K:
      KQuantGroups<vnni512::Rows16Q5KLanes>(Q45KOneTokenGroups<BlockQ5_K, true>, Q45KOneTokenGroups<BlockQ5_K, false>,
                                            w, cols, x, n_tok, y, y_stride, g0, g1);
      return true;
    case GgmlType::Q6_K:
      KQuantGroups<vnni512::Rows16Q6KLanes>(Q6KOneTokenGroups<true>, Q6KOneTokenGroups<false>, w, cols, x, n_tok, y,
                                            y_stride, g0, g1);
      return true;
    case GgmlType::MXFP4: Mxfp4Groups(w, cols, x, n_tok, y, y_stride, g0, g1); return true;
    case GgmlType::IQ4_XS:
      KQuantGroups<vnni512::Rows16Iq4XsLanes>(Iq4XsOneTokenGroups<true>, Iq4XsOneTokenGroups<false>, w, cols, x, n_tok,
                                              y, y_stride, g0, g1);
      return true;
    default: return false;
  }
}

}  // namespace rows16
}  // namespace HWY_NAMESPACE
}  // namespace moetier::quant::kernels
HWY_AFTER_NAMESPACE();

#endif  // HWY_TARGET == HWY_AVX3_DL
#endif  // MOETIER_QUANT_KERNELS_INT8_ROWS16_INL_H_
