// Integer kernels of weights repacked with 16 rows in the lanes (quant/repack.h, rows16), AVX512-VNNI (Highway's
// AVX3_DL target) only: Q8_0.
//
// Per group of 16 rows and 32-column block: the 16 rows' scales in one load (vcvtph2ps, times the token's block
// scale), then per quad of columns one vpdpbusd of the quad's 64 bytes (16 rows' 4 unsigned codes) with the token's
// 4 codes broadcast from memory, started from the offset's share (-128 times the token's quad sum, broadcast by the
// load), one conversion and one fused multiply-add: 3 vector operations per 64 products, where the GGUF-layout
// kernel (Block32Rows) spends 7 per 32 (two sign operations, pmaddubsw, pmaddwd, the conversion, the scale's
// broadcast and the multiply-add).
//
// Exactness (one token; several take the token tiles, vnni512::Rows16Q8Lanes, the bits of the GGUF layout's): the
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

#include "hwy/highway.h"
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

// True (and the product done) for the types with a rows16 kernel.
inline bool MatmulRows16(GgmlType type, const uint8_t* w, int64_t cols, const Q8Rows& x, int64_t n_tok, float* y,
                         int64_t y_stride, int64_t g0, int64_t g1) {
  if (type != GgmlType::Q8_0) return false;
  Q8_0Groups(w, cols, x, n_tok, y, y_stride, g0, g1);
  return true;
}

}  // namespace rows16
}  // namespace HWY_NAMESPACE
}  // namespace moetier::quant::kernels
HWY_AFTER_NAMESPACE();

#endif  // HWY_TARGET == HWY_AVX3_DL
#endif  // MOETIER_QUANT_KERNELS_INT8_ROWS16_INL_H_
