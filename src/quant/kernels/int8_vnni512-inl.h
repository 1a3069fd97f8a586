// AVX512-VNNI token tiles (Highway's AVX3_DL target: Ice Lake and later Xeons, Zen 4): the products of several tokens
// (prefill, a routed expert's share of a prompt) with K-quant, IQ4_XS and 32-block (Q4_0, Q5_0, MXFP4, Q8_0:
// Block32Lanes) weights, 16 weight rows in the 16 int32 lanes of a vector. The 256-bit tiles of int8_avx2-inl.h put 8
// tokens in the lanes and broadcast each row's weights, then spend three operations (pmaddubsw, an int16 add, a
// pmaddwd per sub-block) per 32 products; here a lane's four weight codes meet one token's four activation codes,
// broadcast from memory (by vpdpbusd itself, {1to16}, or by a load of their own: DpBusdSplat), one vpdpbusd per 64
// products. What it costs instead: the 16 rows' codes are transposed into quads (four codes) per lane (an 8 x 8 dword
// transpose per 32 bytes of each row), once per block for up to 16 token tiles, and each sub-block's int32 sum is
// scaled per lane by a multiply (vpmulld). By operation count, a Q4_K block of 16 rows times a full tile (8 tokens)
// is ~250 to unpack and ~820 to multiply (512 of them vpdpbusd).
// Measured on a 2-vCPU 2.1 GHz Xeon (Emerald Rapids), bench_matvec Matmul/<type>/768x2048/tok8 at 1 thread, G MAC/s:
// Q4_K 38.8 -> 100, Q6_K 35.9 -> 78.5; Qwen3-30B-A3B-shaped Q4_K_M prefill of 128 tokens at -t 2, alternating
// runs: 5.6-6.2 s -> 3.9-4.3 s (the Q4_K tiles were 71% of it, the Q6_K tiles 16%).
//
// Exactness: the integer sums are the ones of the 256-bit tiles (TokenTile: the same block sums of scale * (codes .
// activations) and min * (activation sums), exact in int32), and the float steps per block, row and token are the
// same operations in the same order (Q4KTokens::Finish), so the results are bit-identical to theirs; the kernel
// test checks it against the AVX2 target's.
// Included by int8_kernels.cpp inside its per-target namespace, after int8_avx2-inl.h; compiled for AVX3_DL only.
#if defined(MOETIER_QUANT_KERNELS_INT8_VNNI512_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MOETIER_QUANT_KERNELS_INT8_VNNI512_INL_H_
#undef MOETIER_QUANT_KERNELS_INT8_VNNI512_INL_H_
#else
#define MOETIER_QUANT_KERNELS_INT8_VNNI512_INL_H_
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "hwy/highway.h"
#include "quant/blocks.h"
#include "quant/kernels/block_bytes-inl.h"
#include "quant/kernels/int8_kernels.h"
#include "quant/repack.h"

#if HWY_TARGET == HWY_AVX3_DL
#include <immintrin.h>

HWY_BEFORE_NAMESPACE();
namespace moetier::quant::kernels {
namespace HWY_NAMESPACE {
namespace vnni512 {

// acc + the four u8 x s8 products of each lane of w with the 4 bytes at x in every lane, and acc + the two
// int16 x int16 products of each lane of a with the two int16 at x: vpdpbusd / vpdpwssd with an embedded
// broadcast. Inline assembly for the reason DpBusd (int8_avx2-inl.h) is.
HWY_INLINE __m512i DpBusdBcast(__m512i acc, __m512i w, const void* x) {
  asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*static_cast<const int32_t*>(x)));
  return acc;
}
HWY_INLINE __m512i DpWssdBcast(__m512i acc, __m512i a, const void* x) {
  asm("vpdpwssd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(a), "m"(*static_cast<const int32_t*>(x)));
  return acc;
}

// The same product with the 4 bytes at x broadcast by a load of their own (vpbroadcastd) into a register first:
// two instructions where DpBusdBcast is one, yet on Zen 5 the embedded-broadcast form issues at ~0.7 per cycle where
// the pair gives ~1.4 (a micro-benchmark of independent chains, each vpdpbusd with its own 4 bytes: 2.3 G/s embedded,
// 4.5 G/s split, 6.3 G/s from registers, on a 2-vCPU AMD EPYC of family 1Ah). Loops that are mostly vpdpbusd take
// it (the token tiles of Q4_K, Q5_K and the 32-blocks); loops with several other operations per product keep
// DpBusdBcast, which was faster there (the Q6_K tiles and the rows16 one-token kernels: docs/design.md).
HWY_INLINE __m512i DpBusdSplat(__m512i acc, __m512i w, const void* x) {
  int32_t v;
  std::memcpy(&v, x, 4);
  return avx2::DpBusd(acc, w, _mm512_set1_epi32(v));
}

// The 8 x 8 dword transposes of the two 256-bit halves of p[0..7]: afterwards dword j of half h of p[i] is what
// dword i of half h of p[j] was. The AVX2 sequence (unpack 32, unpack 64, 128-bit lane pairs) on both halves.
HWY_INLINE void Transpose8x8Halves(__m512i (&p)[8]) {
  __m512i t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm512_unpacklo_epi32(p[i], p[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(p[i], p[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  // Per half, the low 128-bit lanes of u[i] and u[i + 4] (dwords i) and their high lanes (dwords i + 4).
  const __m512i lo = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13), hi = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
  for (int i = 0; i < 4; ++i) {
    p[i] = _mm512_permutex2var_epi64(u[i], lo, u[i + 4]);
    p[i + 4] = _mm512_permutex2var_epi64(u[i], hi, u[i + 4]);
  }
}

// The 32 bytes at byte offset `at` of each of 16 rows, as quads: lane r of q[i] is row r's dword i (its bytes
// 4i .. 4i + 3). Rows j and j + 8 share a vector, whose halves the transposes turn.
HWY_INLINE void RowQuads(const uint8_t* const (&rows)[16], size_t at, __m512i (&q)[8]) {
  for (int j = 0; j < 8; ++j) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[j] + at));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[j + 8] + at));
    q[j] = _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1);
  }
  Transpose8x8Halves(q);
}

// The 16 bytes at byte offset `at` of each of 16 rows, as dwords: lane r of h[i] is row r's dword i (i < 4).
// Per 128-bit lane, the 4 x 4 dword transpose of rows 4L .. 4L + 3.
HWY_INLINE void RowHeads(const uint8_t* const (&rows)[16], size_t at, __m512i (&h)[4]) {
  __m512i z[4];  // z[g]: row 4L + g in 128-bit lane L
  for (int g = 0; g < 4; ++g) {
    const auto load = [&](int r) HWY_ATTR { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[r] + at)); };
    __m512i v = _mm512_castsi128_si512(load(g));
    v = _mm512_inserti32x4(v, load(4 + g), 1);
    v = _mm512_inserti32x4(v, load(8 + g), 2);
    z[g] = _mm512_inserti32x4(v, load(12 + g), 3);
  }
  const __m512i t0 = _mm512_unpacklo_epi32(z[0], z[1]), t1 = _mm512_unpackhi_epi32(z[0], z[1]);
  const __m512i t2 = _mm512_unpacklo_epi32(z[2], z[3]), t3 = _mm512_unpackhi_epi32(z[2], z[3]);
  h[0] = _mm512_unpacklo_epi64(t0, t2);
  h[1] = _mm512_unpackhi_epi64(t0, t2);
  h[2] = _mm512_unpacklo_epi64(t1, t3);
  h[3] = _mm512_unpackhi_epi64(t1, t3);
}

// Byte j (0..3) of each lane, zero-extended, and the same byte in both int16 halves: pshufb, whose indices count
// bytes within a 128-bit lane (4k + j for its lane k; 0x80 clears).
HWY_INLINE __m512i ByteOfLanes(__m512i v, int j) {
  const __m512i base = _mm512_set4_epi32(12, 8, 4, 0);
  return _mm512_shuffle_epi8(v, _mm512_add_epi32(base, _mm512_set1_epi32(static_cast<int32_t>(0x80808000u + j))));
}
HWY_INLINE __m512i ByteTwiceOfLanes(__m512i v, int j) {
  const __m512i base = _mm512_set4_epi32(0x000c000c, 0x00080008, 0x00040004, 0);
  const uint32_t b = static_cast<uint32_t>(j);
  const __m512i idx = _mm512_add_epi32(base, _mm512_set1_epi32(static_cast<int32_t>(0x80008000u | (b << 16) | b)));
  return _mm512_shuffle_epi8(v, idx);
}

// Byte j (0..3) of each lane sign-extended, and bytes j, j + 1 (j even) sign-extended into the lane's two int16.
HWY_INLINE __m512i SignedByteOfLanes(__m512i v, int j) {
  const __m512i base = _mm512_set4_epi32(0x0c000000, 0x08000000, 0x04000000, 0);
  const uint32_t b = static_cast<uint32_t>(j);
  const __m512i idx = _mm512_add_epi32(base, _mm512_set1_epi32(static_cast<int32_t>(0x00808080u | (b << 24))));
  return _mm512_srai_epi32(_mm512_shuffle_epi8(v, idx), 24);
}
// Byte j (0..3) of each lane sign-extended into the lane's low int16, its high int16 zero: a multiplier for
// vpdpwssd that leaves the other operand's high half out of the sum.
HWY_INLINE __m512i SignedByteWordOfLanes(__m512i v, int j) {
  const __m512i base = _mm512_set4_epi32(0x00000c00, 0x00000800, 0x00000400, 0);
  const uint32_t b = static_cast<uint32_t>(j);
  const __m512i idx = _mm512_add_epi32(base, _mm512_set1_epi32(static_cast<int32_t>(0x80800080u | (b << 8))));
  return _mm512_srai_epi16(_mm512_shuffle_epi8(v, idx), 8);
}
HWY_INLINE __m512i SignedBytePairOfLanes(__m512i v, int j) {
  const __m512i base = _mm512_set4_epi32(0x0c000c00, 0x08000800, 0x04000400, 0);
  const uint32_t b = static_cast<uint32_t>(j);
  const __m512i idx =
      _mm512_add_epi32(base, _mm512_set1_epi32(static_cast<int32_t>(0x00800080u | ((b + 1) << 24) | (b << 8))));
  return _mm512_srai_epi16(_mm512_shuffle_epi8(v, idx), 8);
}

// The weight types: K::Block, one block of 16 rows (lane r: rows[r]) unpacked: codes[quad] (lane r: the row's 4
// codes of that quad, unsigned), K::kQuadsPerScale quads per int32 scale vector scale[], and the min or offset
// words off[8] (lane r: two int16 that meet the activation's two sums of 16 of a 32-block). K::Unpack(rows, at,
// block) fills it from the 16 blocks at byte offset `at`; K::Finish(block, isum, ioff, dx, acc) adds one token's
// block result to acc from isum = sum over scale groups of scale * (codes . activations) and ioff = sum over
// 32-blocks of off . (activation sums).

// Q4_K and Q5_K: the formula of Q45KTokens (int8_avx2-inl.h): y += d * dx * sum_s scale_s * (q_s . x_s) - dmin *
// dx * sum_s min_s * (sum of x_s's codes), 8 sub-blocks of 32; qs[32p + i] holds sub-block 2p in its low nibbles,
// 2p + 1 in its high ones, and for Q5_K (B = BlockQ5_K) bit s of qh[i] is the fifth bit of sub-block s's element i.
template <class B>
struct Q45KLanes {
  static constexpr bool kFifth = std::is_same_v<B, BlockQ5_K>;
  static constexpr bool kGrouped = false;  // rows[r]: row r's bytes
  static constexpr size_t kBytes = sizeof(B);
  static constexpr int64_t kCols = kQK_K;  // columns per block
  static constexpr int kQuadsPerScale = 8;
  // Q4_K's high nibbles stay in place, 16 times the codes (one mask, no shift, per vector), and the low sub-blocks'
  // scales are taken 16 times to match (isum: 16 times the sum, at most 2^29; Finish divides). Q5_K's codes with
  // their fifth bit (0..31) do not fit a byte 16 times over, so both nibbles come down.
  static constexpr int kSumShift = kFifth ? 0 : 4;
  struct Block {
    __m512i codes[kQK_K / 4];
    __m512i scale[8];  // sub-block scales (Q4_K: the low nibbles' times 16)
    __m512i off[8];    // min s in both int16 halves
    __m512 d, dmin;
  };
  static HWY_INLINE void Unpack(const uint8_t* const (&rows)[16], size_t at, Block& o) {
    static_assert(offsetof(B, d) == 0 && offsetof(B, dmin) == 2 && offsetof(B, scales) == 4);
    __m512i h[4];
    RowHeads(rows, at, h);
    __m512i qh[8] = {};  // read for Q5_K only
    if constexpr (kFifth) RowQuads(rows, at + offsetof(BlockQ5_K, qh), qh);
    UnpackLanes(h, [&](int p, __m512i (&q)[8]) HWY_ATTR {
      RowQuads(rows, at + offsetof(B, qs) + 32 * static_cast<size_t>(p), q);
    }, qh, o);
  }
  // From the blocks' first 16 bytes as dwords in the lanes (h[i], lane r: row r's bytes 4i .. 4i + 3), their
  // nibbles (quads(p, q): q[i], lane r: row r's qs bytes 32p + 4i .. 32p + 4i + 3) and, for Q5_K, their fifth bits
  // (qh[i], lane r: row r's qh bytes 4i .. 4i + 3; unread for Q4_K).
  template <class Quads>
  static HWY_INLINE void UnpackLanes(const __m512i (&h)[4], const Quads& quads, const __m512i (&qh)[8], Block& o) {
    const __m512i low4 = _mm512_set1_epi8(0x0f), high4 = _mm512_set1_epi8(static_cast<char>(0xf0));
    o.d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h[0]));
    o.dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(h[0], 16)));
    __m512i sc[2], mn[2];
    ScalesMins(h, sc, mn);
    for (int s = 0; s < 8; ++s) {
      const __m512i scale = ByteOfLanes(sc[s / 4], s % 4);
      o.scale[s] = s % 2 == 0 ? _mm512_slli_epi32(scale, kSumShift) : scale;
      o.off[s] = ByteTwiceOfLanes(mn[s / 4], s % 4);
    }
    for (int p = 0; p < 4; ++p) {
      __m512i q[8];
      quads(p, q);
      for (int i = 0; i < 8; ++i) {
        if constexpr (kFifth) {
          o.codes[16 * p + i] = WithFifth(_mm512_and_si512(q[i], low4), qh[i], 2 * p);
          o.codes[16 * p + 8 + i] = WithFifth(_mm512_and_si512(_mm512_srli_epi32(q[i], 4), low4), qh[i], 2 * p + 1);
        } else {
          o.codes[16 * p + i] = _mm512_and_si512(q[i], low4);
          o.codes[16 * p + 8 + i] = _mm512_and_si512(q[i], high4);
        }
      }
    }
  }
  // Nibbles (0..15 per byte) with bit s of the same bytes of qh as their bit 4 (a 32-bit shift by at most 4 keeps
  // it within its byte).
  static HWY_INLINE __m512i WithFifth(__m512i nibbles, __m512i qh, int s) {
    const __m512i at4 = s <= 4 ? _mm512_slli_epi32(qh, 4 - s) : _mm512_srli_epi32(qh, s - 4);
    return _mm512_ternarylogic_epi32(nibbles, at4, _mm512_set1_epi8(0x10), 0xf8);  // nibbles | (at4 & 0x10)
  }
  // Per lane, from [d, dmin] and the 12 scale bytes (h as UnpackLanes takes them; kquant_scales.h,
  // unpack_scale_min_k4): sc[c] / mn[c] byte j: the 6-bit scale / min 4c + j. Scales 0-3 and mins 0-3 are the low 6
  // bits of bytes 0-3 and 4-7; scales / mins 4-7 the low / high nibbles of bytes 8-11 below the top 2 bits of bytes
  // 0-3 / 4-7.
  static HWY_INLINE void ScalesMins(const __m512i (&h)[4], __m512i (&sc)[2], __m512i (&mn)[2]) {
    const __m512i low4 = _mm512_set1_epi8(0x0f), low6 = _mm512_set1_epi8(0x3f), bits45 = _mm512_set1_epi8(0x30);
    sc[0] = _mm512_and_si512(h[1], low6);
    sc[1] = _mm512_ternarylogic_epi32(_mm512_and_si512(h[3], low4), _mm512_srli_epi32(h[1], 2), bits45,
                                      0xf8);  // a | (b & c)
    mn[0] = _mm512_and_si512(h[2], low6);
    mn[1] = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi32(h[3], 4), low4),
                                      _mm512_srli_epi32(h[2], 2), bits45, 0xf8);
  }
  static HWY_INLINE __m512 Finish(const Block& o, __m512i isum, __m512i ioff, __m512 dx, __m512 acc) {
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_srai_epi32(isum, kSumShift)), _mm512_mul_ps(o.d, dx), acc);
    return _mm512_fnmadd_ps(_mm512_cvtepi32_ps(ioff), _mm512_mul_ps(o.dmin, dx), acc);
  }
};
using Q4KLanes = Q45KLanes<BlockQ4_K>;
using Q5KLanes = Q45KLanes<BlockQ5_K>;

// Q6_K: the formula of Q6KTokens (int8_avx2-inl.h): isum = sum over sub-blocks of 16 of scale * (codes . x),
// codes 0..63 before their -32, and ioff = sum of scale * (the sub-block's activation sum); y += d * dx * (isum -
// 32 * ioff). Per half h of a block, ql[64h .. 64h + 31] holds elements 128h + l in its low nibbles and 128h + 64
// + l in its high ones, ql[64h + 32 ..] elements 128h + 32 + l and 128h + 96 + l, and qh[32h + l] their high bit
// pairs at bits 0-1, 2-3, 4-5, 6-7 (ranges 0..3 of 32 elements).
struct Q6KLanes {
  static constexpr bool kGrouped = false;  // rows[r]: row r's bytes
  static constexpr size_t kBytes = sizeof(BlockQ6_K);
  static constexpr int64_t kCols = kQK_K;  // columns per block
  static constexpr int kQuadsPerScale = 4;
  struct Block {
    __m512i codes[kQK_K / 4];
    __m512i scale[16];  // int8 scale of each sub-block of 16
    __m512i off[8];     // sub-blocks 2k, 2k + 1's scales as int16
    __m512 d;
  };
  static HWY_INLINE void Unpack(const uint8_t* const (&rows)[16], size_t at, Block& o) {
    __m512i hs[4];  // lane r: row r's int8 scales 4c .. 4c + 3 in hs[c]
    RowHeads(rows, at + offsetof(BlockQ6_K, scales), hs);
    // The fp16 d ends the block, so a 16-byte load there would read past it (and past the tensor's end).
    alignas(32) uint16_t dh[16];
    for (int r = 0; r < 16; ++r) std::memcpy(&dh[r], rows[r] + at + offsetof(BlockQ6_K, d), 2);
    UnpackLanes(
        hs, _mm256_load_si256(reinterpret_cast<const __m256i*>(dh)),
        [&](int h, __m512i (&qh)[8]) HWY_ATTR {
          RowQuads(rows, at + offsetof(BlockQ6_K, qh) + 32 * static_cast<size_t>(h), qh);
        },
        [&](int h, int part, __m512i (&ql)[8]) HWY_ATTR {
          RowQuads(rows, at + offsetof(BlockQ6_K, ql) + 64 * static_cast<size_t>(h) + 32 * static_cast<size_t>(part),
                   ql);
        },
        o);
  }
  // From the scales as dwords in the lanes (hs[c], lane r: row r's scales 4c .. 4c + 3), the 16 rows' fp16 d, and
  // the code bytes: qh_quads(h, q): q[i], lane r: row r's qh bytes 32h + 4i .. 32h + 4i + 3; ql_quads(h, part, q):
  // q[i], lane r: its ql bytes 64h + 32 part + 4i .. .
  template <class QhQuads, class QlQuads>
  static HWY_INLINE void UnpackLanes(const __m512i (&hs)[4], __m256i d, const QhQuads& qh_quads,
                                     const QlQuads& ql_quads, Block& o) {
    const __m512i low4 = _mm512_set1_epi8(0x0f), bits45 = _mm512_set1_epi8(0x30);
    for (int j = 0; j < 16; ++j) o.scale[j] = SignedByteOfLanes(hs[j / 4], j % 4);
    for (int k = 0; k < 8; ++k) o.off[k] = SignedBytePairOfLanes(hs[k / 2], 2 * (k % 2));
    o.d = _mm512_cvtph_ps(d);
    for (int h = 0; h < 2; ++h) {
      __m512i qh[8];
      qh_quads(h, qh);
      for (int part = 0; part < 2; ++part) {
        __m512i ql[8];
        ql_quads(h, part, ql);
        for (int nib = 0; nib < 2; ++nib) {
          const int range = part + 2 * nib;  // elements 128h + 32 range + l: their high bits at 2 range, 2 range + 1
          for (int i = 0; i < 8; ++i) {
            const __m512i lo = _mm512_and_si512(nib == 0 ? ql[i] : _mm512_srli_epi32(ql[i], 4), low4);
            const __m512i hi = range == 0   ? _mm512_slli_epi32(qh[i], 4)
                               : range == 1 ? _mm512_slli_epi32(qh[i], 2)
                               : range == 2 ? qh[i]
                                            : _mm512_srli_epi32(qh[i], 2);
            o.codes[32 * h + 8 * range + i] = _mm512_ternarylogic_epi32(lo, hi, bits45, 0xf8);  // lo | (hi & 0x30)
          }
        }
      }
    }
  }
  static HWY_INLINE __m512 Finish(const Block& o, __m512i isum, __m512i ioff, __m512 dx, __m512 acc) {
    const __m512i total = _mm512_sub_epi32(isum, _mm512_slli_epi32(ioff, 5));  // the codes' -32
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(total), _mm512_mul_ps(o.d, dx), acc);
  }
};

// IQ4_XS: y += d * dx * sum_s (scale_s * (levels_s . x_s)), 8 sub-blocks of 32 with signed 6-bit scales (scale6 - 32:
// the low nibble from scales_l, the high two bits from scales_h) and no mins; qs[16s + i] holds element i of
// sub-block s in its low nibble and i + 16 in its high one. The levels (kIq4nlValues, -127..113) plus 128 are
// vpdpbusd's unsigned operand (1..241: one vpermb from a table four times over, as MXFP4's: the neighbouring
// nibble's bits 4-5 pick the same value), and the offset's share, 128 * scale_s * (sub-block s's activation sum),
// comes off at the end: ioff sums scale_s * (its two sums of 16). Every step exact in int32 (|isum| <= 8 * 32 * 32 *
// 241 * 127 < 2^28), then one conversion and one multiply-add per row, token and block. There are no 256-bit tiles
// of IQ4_XS: elsewhere several tokens take the portable kernels, so these tiles' results are their own (the formula
// written out in scalar code: kernels_test.cpp).
struct Iq4XsLanes {
  static constexpr bool kGrouped = false;  // rows[r]: row r's bytes
  static constexpr size_t kBytes = sizeof(BlockIQ4_XS);
  static constexpr int64_t kCols = kQK_K;  // columns per block
  static constexpr int kQuadsPerScale = 8;
  struct Block {
    __m512i codes[kQK_K / 4];  // lane r: row r's 4 levels of quad q (elements 4q ..), plus 128
    __m512i scale[8];          // sub-block scales, int32
    __m512i off[8];            // sub-block scales in both int16 halves
    __m512 d;
  };
  static HWY_INLINE void Unpack(const uint8_t* const (&rows)[16], size_t at, Block& o) {
    static_assert(offsetof(BlockIQ4_XS, d) == 0 && offsetof(BlockIQ4_XS, scales_h) == 2 &&
                  offsetof(BlockIQ4_XS, scales_l) == 4 && offsetof(BlockIQ4_XS, qs) == 8);
    __m512i h[4];  // lane r: row r's d | scales_h << 16 in h[0], scales_l in h[1] (h[2], h[3]: qs, read below)
    RowHeads(rows, at, h);
    UnpackLanes(h[0], h[1], [&](int p, __m512i (&q)[8]) HWY_ATTR {
      RowQuads(rows, at + offsetof(BlockIQ4_XS, qs) + 32 * static_cast<size_t>(p), q);
    }, o);
  }
  // Sub-block s's scale (int32) in lane r from h0, h1 as UnpackLanes takes them: scale6 - 32, the low nibble from
  // scales_l, the high two bits from scales_h.
  static HWY_INLINE __m512i SubBlockScale(__m512i h0, __m512i h1, int s) {
    const __m512i low = _mm512_and_si512(_mm512_srli_epi32(h1, 4 * s), _mm512_set1_epi32(0x0f));
    const __m512i high = _mm512_and_si512(_mm512_srli_epi32(h0, 16 + 2 * s), _mm512_set1_epi32(3));
    return _mm512_sub_epi32(_mm512_or_si512(low, _mm512_slli_epi32(high, 4)), _mm512_set1_epi32(32));
  }
  // The levels plus 128 in each 16 bytes (vpermb reads 6 index bits: a neighbouring nibble's bits 4-5 pick the same).
  static HWY_INLINE __m512i LevelTable() {
    uint8_t levels[16];
    for (int i = 0; i < 16; ++i) levels[i] = static_cast<uint8_t>(kIq4nlValues[i] + 128);
    return _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(levels)));
  }
  // The block from its 16 rows' dwords: h0, h1 (lane r: row r's d | scales_h << 16, its scales_l) and, through
  // quads(p, q), lane r of q[i] row r's qs dword 8p + i.
  template <class Quads>
  static HWY_INLINE void UnpackLanes(__m512i h0, __m512i h1, const Quads& quads, Block& o) {
    o.d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h0));
    for (int s = 0; s < 8; ++s) {
      const __m512i scale = SubBlockScale(h0, h1, s);
      o.scale[s] = scale;
      o.off[s] = _mm512_or_si512(_mm512_and_si512(scale, _mm512_set1_epi32(0xffff)), _mm512_slli_epi32(scale, 16));
    }
    const __m512i table = LevelTable();
    for (int p = 0; p < 4; ++p) {  // qs bytes 32p ..: sub-blocks 2p (dwords 0-3) and 2p + 1 (dwords 4-7)
      __m512i q[8];
      quads(p, q);
      for (int i = 0; i < 8; ++i) {
        __m512i* sub = o.codes + 8 * (2 * p + i / 4);
        sub[i % 4] = _mm512_permutexvar_epi8(q[i], table);
        sub[4 + i % 4] = _mm512_permutexvar_epi8(_mm512_srli_epi32(q[i], 4), table);  // the high nibbles
      }
    }
  }
  static HWY_INLINE __m512 Finish(const Block& o, __m512i isum, __m512i ioff, __m512 dx, __m512 acc) {
    const __m512i total = _mm512_sub_epi32(isum, _mm512_slli_epi32(ioff, 7));  // the levels' +128
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(total), _mm512_mul_ps(o.d, dx), acc);
  }
};

// 32-blocks of unsigned codes with one float scale: Q4_0 and MXFP4 (avx2::OffsetNibbles: a nibble, or its table
// value, plus the offset o) and Q5_0 (avx2::Q5_0Tokens: nibble | fifth bit << 4, o = 16), by the formula of
// TileBlock32 (int8_avx2-inl.h): y += (d * dx) * (sum over the block of code * x - o * (sum of x)), the integer
// sum exact, converted once per block, one multiply-add per block. Here with 16 rows in the lanes: per token and
// block 8 vpdpbusd (the token's quads broadcast from memory) started from -o times its code sum (computed once
// per tile and block for the 16 rows), one conversion, one multiply and one multiply-add, where TileBlock32 spends
// per row (or pair of rows) and 8 tokens 8 vpdpbusd, 8 quad shuffles and the same float steps on 8 lanes. The
// same integers and the same float operations in the same order per row, token and block, so the results are the
// bits of TileBlock32.
// Unpacking a block of 16 rows: one 4 x 4 dword transpose of their 16 code bytes (RowHeads; byte 4i + k holds
// element 4i + k in its low nibble and 16 + 4i + k in its high one, so lanes hold whole quads), then per quad a
// mask (Q4_0) or a vpermb from the type's table four times over (MXFP4: index bits 4-5, the neighbouring nibble's,
// pick the same value), and for Q5_0 the fifth bits' byte mask by vpshufbitqmb (BITALG) and a masked add of 16.
template <class O>
struct Block32Lanes {
  using Codes = O;
  using B = typename O::BlockType;
  static constexpr size_t kBytes = O::kBytes;
  static constexpr int64_t kCols = 32;
  static constexpr bool kGrouped = false;  // rows[r]: row r's bytes (Rows16Q8Lanes: one group's)
  static constexpr bool kInt8 = std::is_same_v<B, BlockQ8_0>;
  static constexpr bool kFifth = std::is_same_v<B, BlockQ5_0>;
  static constexpr bool kNibbles = [] {  // the codes are the nibbles themselves (Q4_0, Q5_0 before its fifth bit)
    if constexpr (kFifth || kInt8) {
      return true;
    } else {
      return O::kIdentity;
    }
  }();
  struct Block {
    __m512i codes[8];  // lane r: row r's 4 codes of quad i (elements 4i .. 4i + 3), offset (unsigned)
    __m512 d;          // lane r: row r's block scale
  };
  static HWY_INLINE void Unpack(const uint8_t* const (&rows)[16], size_t at, Block& o) {
    alignas(64) float d[16];
    for (int r = 0; r < 16; ++r) d[r] = O::Scale(rows[r] + at);
    o.d = _mm512_load_ps(d);
    if constexpr (kInt8) {  // the 32 signed codes of each row, transposed, plus 128 (a flipped sign bit)
      RowQuads(rows, at + offsetof(B, qs), o.codes);
      for (__m512i& c : o.codes) c = _mm512_xor_si512(c, _mm512_set1_epi8(static_cast<char>(0x80)));
      return;
    }
    __m512i h[4];
    RowHeads(rows, at + offsetof(B, qs), h);
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    for (int i = 0; i < 4; ++i) {
      const __m512i high = _mm512_srli_epi32(h[i], 4);  // a byte's high nibble, below the next byte's low one
      if constexpr (kNibbles) {
        o.codes[i] = _mm512_and_si512(h[i], low4);
        o.codes[4 + i] = _mm512_and_si512(high, low4);
      } else {
        const __m512i table = _mm512_broadcast_i64x4(O::Table());  // vpermb reads 6 index bits: 4 copies
        o.codes[i] = _mm512_permutexvar_epi8(h[i], table);
        o.codes[4 + i] = _mm512_permutexvar_epi8(high, table);
      }
    }
    if constexpr (kFifth) {
      // Lane r: row r's qh (bit j: element j's fifth bit); qword m holds rows 2m (low) and 2m + 1. Byte k of quad
      // q's lane 2m + h is element 4q + k of that row: bit 32h + 4q + k of qword m.
      alignas(64) uint32_t qh[16];
      for (int r = 0; r < 16; ++r) std::memcpy(&qh[r], rows[r] + at + offsetof(B, qh), 4);
      const __m512i bits = _mm512_load_si512(qh);
      const __m512i sixteen = _mm512_set1_epi8(16);
      for (int q = 0; q < 8; ++q) {
        const uint64_t index = 0x2322212003020100ULL + 0x0404040404040404ULL * static_cast<uint64_t>(q);
        const __m512i pick = _mm512_set1_epi64(static_cast<int64_t>(index));
        const __mmask64 set = _mm512_bitshuffle_epi64_mask(bits, pick);
        o.codes[q] = _mm512_mask_add_epi8(o.codes[q], set, o.codes[q], sixteen);
      }
    }
  }
};

// Q8_0's codes for Block32Lanes: signed, offset by 128 to be vpdpbusd's unsigned operand.
struct Q8_0Offset {
  using BlockType = BlockQ8_0;
  static constexpr size_t kBytes = sizeof(BlockQ8_0);
  static constexpr int kOffset = 128;
  static HWY_INLINE float Scale(const uint8_t* b) { return Fp16At(b + offsetof(BlockQ8_0, d)); }
};

// Q8_0 repacked with 16 rows in the lanes (quant/repack.h, rows16): a block of a group is already what
// Block32Lanes<Q8_0Offset> unpacks from the GGUF layout (16 fp16 scales, then 8 quads of the 16 rows' codes plus
// 128), so the same tiles give the same bits from two loads of scales and eight of codes, nothing to transpose.
struct Rows16Q8Lanes {
  using Codes = Q8_0Offset;
  using Block = Block32Lanes<Q8_0Offset>::Block;
  static constexpr size_t kBytes = kRows16BlockBytes;
  static constexpr int64_t kCols = 32;
  static constexpr bool kGrouped = true;  // rows[0]: the group's bytes
  static HWY_INLINE void Unpack(const uint8_t* const (&rows)[16], size_t at, Block& o) {
    const uint8_t* blk = rows[0] + at;
    o.d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)));
    for (int q = 0; q < 8; ++q) o.codes[q] = _mm512_loadu_si512(blk + 32 + 64 * q);
  }
};

// MXFP4 repacked with 16 rows in the lanes (quant/repack.h, rows16). Rows16Mxfp4Scales: a group block's 16 scales,
// e8m0_to_fp32_half of its exponent bytes built in integers (avx2::E8M0HalfScales). Rows16Mxfp4Codes: its
// 8 quads of offset codes, as Block32Lanes<MXFP4Tokens> makes them from the dwords that RowHeads transposes: the
// codes' 4 vectors are those dwords, so one vpermb per quad (and a shift per pair) is all that is left.
HWY_INLINE __m512 Rows16Mxfp4Scales(const uint8_t* blk) {
  return avx2::E8M0HalfScales(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + kRows16Mxfp4EAt)));
}
// tbl: MXFP4Tokens' table in each 16 bytes (vpermb reads 6 index bits).
HWY_INLINE void Rows16Mxfp4Codes(const uint8_t* blk, __m512i tbl, __m512i (&codes)[8]) {
  for (int i = 0; i < 4; ++i) {
    const __m512i v = _mm512_loadu_si512(blk + 64 * i);
    codes[i] = _mm512_permutexvar_epi8(v, tbl);
    codes[4 + i] = _mm512_permutexvar_epi8(_mm512_srli_epi32(v, 4), tbl);  // the high nibbles
  }
}
HWY_INLINE __m512i Mxfp4Table512() { return _mm512_broadcast_i64x4(avx2::MXFP4Tokens::Table()); }

// The token tiles' form: a block of a group is what Block32Lanes<MXFP4Tokens> unpacks from 16 rows of the GGUF
// layout, from 4 loads of codes and one of exponents, nothing to transpose, and the same tiles give the same bits.
struct Rows16Mxfp4Lanes {
  using Codes = avx2::MXFP4Tokens;
  using Block = Block32Lanes<avx2::MXFP4Tokens>::Block;
  static constexpr size_t kBytes = kRows16Mxfp4BlockBytes;
  static constexpr int64_t kCols = 32;
  static constexpr bool kGrouped = true;  // rows[0]: the group's bytes
  static HWY_INLINE void Unpack(const uint8_t* const (&rows)[16], size_t at, Block& o) {
    const uint8_t* blk = rows[0] + at;
    o.d = Rows16Mxfp4Scales(blk);
    Rows16Mxfp4Codes(blk, Mxfp4Table512(), o.codes);
  }
};

// Q4_K and Q5_K repacked with 16 rows in the lanes (quant/repack.h, rows16): a block of a group holds the dwords
// that Q45KLanes transposes from the GGUF layout (RowHeads, RowQuads; the nibbles' in another order), so the same
// unpacking and tiles give the same bits from 36 loads (Q5_K: 44), nothing to transpose.
template <class B>
struct Rows16Q45KLanes : Q45KLanes<B> {
  using Base = Q45KLanes<B>;
  static constexpr size_t kBytes = Base::kFifth ? kRows16Q5KBlockBytes : kRows16Q4KBlockBytes;
  static constexpr size_t kNibblesAt = Base::kFifth ? kRows16Q5KNibblesAt : 256;
  static constexpr bool kGrouped = true;  // rows[0]: the group's bytes
  static HWY_INLINE void Unpack(const uint8_t* const (&rows)[16], size_t at, typename Base::Block& o) {
    const uint8_t* blk = rows[0] + at;
    __m512i h[4], qh[8] = {};  // qh: read for Q5_K only
    for (int i = 0; i < 4; ++i) h[i] = _mm512_loadu_si512(blk + 64 * i);
    if constexpr (Base::kFifth) {
      for (int i = 0; i < 8; ++i) qh[i] = _mm512_loadu_si512(blk + kRows16Q5KQhAt + 64 * i);
    }
    Base::UnpackLanes(h, [&](int p, __m512i (&q)[8]) HWY_ATTR {
      for (int i = 0; i < 8; ++i) q[i] = _mm512_loadu_si512(blk + kNibblesAt + 64 * q4k_rows16_vector(p, i));
    }, qh, o);
  }
};
using Rows16Q4KLanes = Rows16Q45KLanes<BlockQ4_K>;
using Rows16Q5KLanes = Rows16Q45KLanes<BlockQ5_K>;

// Q6_K repacked with 16 rows in the lanes (quant/repack.h, rows16): a block of a group holds the dwords that
// Q6KLanes transposes from the GGUF layout (RowHeads, RowQuads) and the 16 rows' d side by side, so the same
// unpacking and tiles give the same bits from 53 loads, nothing to transpose.
struct Rows16Q6KLanes : Q6KLanes {
  static constexpr size_t kBytes = kRows16Q6KBlockBytes;
  static constexpr bool kGrouped = true;  // rows[0]: the group's bytes
  static HWY_INLINE void Unpack(const uint8_t* const (&rows)[16], size_t at, Block& o) {
    const uint8_t* blk = rows[0] + at;
    const uint8_t* codes = blk + kRows16Q6KCodesAt;
    __m512i hs[4];
    for (int c = 0; c < 4; ++c) hs[c] = _mm512_loadu_si512(blk + 64 * c);
    UnpackLanes(
        hs, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + kRows16Q6KDAt)),
        [&](int h, __m512i (&qh)[8]) HWY_ATTR {
          for (int i = 0; i < 8; ++i) qh[i] = _mm512_loadu_si512(codes + 64 * (6 * i + 3 * h));
        },
        [&](int h, int part, __m512i (&ql)[8]) HWY_ATTR {
          for (int i = 0; i < 8; ++i) ql[i] = _mm512_loadu_si512(codes + 64 * (6 * i + 3 * h + 1 + part));
        },
        o);
  }
};

// IQ4_XS repacked with 16 rows in the lanes (quant/repack.h, rows16): a block of a group holds the dwords that
// Iq4XsLanes transposes from the GGUF layout (RowHeads, RowQuads), in the same order, so the same unpacking and tiles
// give the same bits from 34 loads, nothing to transpose.
struct Rows16Iq4XsLanes : Iq4XsLanes {
  static constexpr size_t kBytes = kRows16Iq4XsBlockBytes;
  static constexpr bool kGrouped = true;  // rows[0]: the group's bytes
  static HWY_INLINE void Unpack(const uint8_t* const (&rows)[16], size_t at, Block& o) {
    const uint8_t* blk = rows[0] + at;
    UnpackLanes(_mm512_loadu_si512(blk), _mm512_loadu_si512(blk + 64), [&](int p, __m512i (&q)[8]) HWY_ATTR {
      for (int i = 0; i < 8; ++i) q[i] = _mm512_loadu_si512(blk + kRows16Iq4XsQsAt + 64 * (8 * p + i));
    }, o);
  }
};

// Where token tile g of x starts at block b: its codes, sums and scales.
// kCols: the weight block's columns, which are the activation block's (Q8_K's 256 for K-quants, Q8_0's 32).
struct TileAt {
  const int8_t* xq;
  const int16_t* xs;
  const float* dt;
  TileAt(const Q8Rows& x, int64_t kCols, int64_t g, int64_t b) {
    const int64_t nb = x.cols / kCols, quads = x.cols / 4, blocks32 = x.cols / 32;
    xq = x.qt + (g * quads + b * (kCols / 4)) * 4 * kTokenTile;
    xs = x.st + (g * blocks32 + b * (kCols / 32)) * 2 * kTokenTile;
    dt = x.dt + (g * nb + b) * kTokenTile;
  }
};

// One unpacked block times the NT tokens of a token tile (lane(t) = t, or 2t in a paired tile: int8_kernels.h):
// acc[t] lane r += row r's block product with token t. xq, xs, dt: the tile's interleaved codes, sums of 16 and
// block scales at this block (Q8Rows::qt, st, dt).
template <class K, int NT, bool kPaired>
HWY_INLINE void MultiplyBlock(const typename K::Block& o, const int8_t* HWY_RESTRICT xq, const int16_t* HWY_RESTRICT xs,
                              const float* HWY_RESTRICT dt, __m512 (&acc)[NT]) {
  constexpr int64_t T = kTokenTile;
  constexpr int kQ = K::kQuadsPerScale;
  constexpr int kChains = NT <= 4 ? 2 : 1;  // independent vpdpbusd chains per token (latency 5, two per cycle)
  const auto lane = [](int t) { return kPaired ? 2 * t : t; };
  __m512i isum[NT];
  for (int t = 0; t < NT; ++t) isum[t] = _mm512_setzero_si512();
  for (int s = 0; s < kQK_K / 4 / kQ; ++s) {
    __m512i tmp[NT][kChains];
    for (int t = 0; t < NT; ++t)
      for (int c = 0; c < kChains; ++c) tmp[t][c] = _mm512_setzero_si512();
    for (int i = 0; i < kQ; ++i) {
      const __m512i w = o.codes[kQ * s + i];
      const int8_t* xi = xq + (kQ * s + i) * 4 * T;
      for (int t = 0; t < NT; ++t) {
        __m512i& a = tmp[t][i % kChains];
        a = kQ == 8 ? DpBusdSplat(a, w, xi + 4 * lane(t)) : DpBusdBcast(a, w, xi + 4 * lane(t));
      }
    }
    for (int t = 0; t < NT; ++t) {
      __m512i v = tmp[t][0];
      if constexpr (kChains == 2) v = _mm512_add_epi32(v, tmp[t][1]);
      isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(v, o.scale[s]));
    }
  }
  for (int t = 0; t < NT; ++t) {
    __m512i ioff = _mm512_setzero_si512();
    for (int k = 0; k < 8; ++k) ioff = DpWssdBcast(ioff, o.off[k], xs + (k * T + lane(t)) * 2);
    acc[t] = K::Finish(o, isum[t], ioff, _mm512_set1_ps(dt[lane(t)]), acc[t]);
  }
}

// One unpacked 32-block (Block32Lanes) times the NT tokens of a token tile, as MultiplyBlock. corr: the tile's
// -o * (its tokens' sums of the block's activations), lane(t) for token t (Block32Offsets), which starts each
// token's sum as a broadcast load. A vpdpwssd of the sums per token (and the zeroed register it adds to) took 2 of
// the ~13 operations per token and block on the vector ports 0 and 5, which bound the loop (llvm-mca,
// icelake-server); the tokens' chains interleave quad by quad, so a full tile's eight are in flight together.
// Measured alone, both changes were within noise (Matmul/MXFP4/768x2048/tok128, 1 thread, 151 G MAC/s); the
// loop of full tiles in TokenTiles is what moved it.
template <class K, int NT, bool kPaired>
HWY_INLINE void MultiplyBlock32(const typename K::Block& o, const int8_t* HWY_RESTRICT xq,
                                const int32_t* HWY_RESTRICT corr, const float* HWY_RESTRICT dt, __m512 (&acc)[NT]) {
  constexpr int64_t T = kTokenTile;
  const auto lane = [](int t) { return kPaired ? 2 * t : t; };
  __m512i sum[NT];
  for (int t = 0; t < NT; ++t) sum[t] = _mm512_set1_epi32(corr[lane(t)]);
  for (int i = 0; i < 8; ++i)
    for (int t = 0; t < NT; ++t) sum[t] = DpBusdSplat(sum[t], o.codes[i], xq + (i * T + lane(t)) * 4);
  for (int t = 0; t < NT; ++t)
    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[t]), _mm512_mul_ps(o.d, _mm512_set1_ps(dt[lane(t)])), acc[t]);
}

// The block's product with a tile, by the weight block's size.
template <class K, int NT, bool kPaired>
HWY_INLINE void Multiply(const typename K::Block& o, const int8_t* HWY_RESTRICT xq, const int16_t* HWY_RESTRICT xs,
                         const int32_t* HWY_RESTRICT corr, const float* HWY_RESTRICT dt, __m512 (&acc)[NT]) {
  if constexpr (K::kCols == 32) {
    MultiplyBlock32<K, NT, kPaired>(o, xq, corr, dt, acc);
  } else {
    MultiplyBlock<K, NT, kPaired>(o, xq, xs, dt, acc);
  }
}

// For tiles g0 .. g0 + ng - 1 of x at 32-block b: corr[g][lane] = -o * (the lane's two sums of 16), o the codes'
// offset (exact: |sum| <= 32 * 128, o <= 128). One vpmaddwd per tile, shared by the block's 16 rows.
template <class K>
HWY_INLINE void Block32Offsets(const Q8Rows& x, int64_t g0, int64_t ng, int64_t b, int32_t (*corr)[kTokenTile]) {
  static_assert(kTokenTile == 8);
  const __m256i neg_offset = _mm256_set1_epi16(static_cast<int16_t>(-K::Codes::kOffset));
  for (int64_t g = 0; g < ng; ++g) {
    const int16_t* xs = TileAt(x, K::kCols, g0 + g, b).xs;
    const __m256i sums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xs));
    _mm256_store_si256(reinterpret_cast<__m256i*>(corr[g]), _mm256_madd_epi16(sums, neg_offset));
  }
}

// f<NT, kPaired>() for a token tile of `tokens` (1..kTokenTile) tokens: the tile sizes as constants.
template <class F>
HWY_INLINE void WithTileSize(int64_t tokens, const F& f) {
  static_assert(kTokenTile == 8 && kPairedTile == 4);  // paired_tile: at most 4 tokens
  switch (tokens) {
    case 1: f.template operator()<1, true>(); break;
    case 2: f.template operator()<2, true>(); break;
    case 3: f.template operator()<3, true>(); break;
    case 4: f.template operator()<4, true>(); break;
    case 5: f.template operator()<5, false>(); break;
    case 6: f.template operator()<6, false>(); break;
    case 7: f.template operator()<7, false>(); break;
    default: f.template operator()<8, false>(); break;
  }
}

// At block b of 16 rows: the cache lines of their block b + kAhead (past a row's end: the next rows' first). At
// ~100 G MAC/s per thread an 8-token tile consumes ~7 GB/s of weights per thread, 16 streams the hardware prefetcher
// alone does not keep ahead of. Qwen3-30B-A3B-shaped prefill of 128 tokens at -t 2, 4 alternating runs each:
// without 4.06-4.29 s, 2 blocks ahead 3.36-3.89 s (faster in 4 of 4); 2 -> 4 blocks: faster in 4 of 4, by ~3%.
// Blocks smaller than a cache line (Q4_0's 18 bytes, MXFP4's 17) ask for the line ~256 bytes on at every block, so
// every line of a row is asked for (a prefetch takes a load port, which the tiles leave idle). Asking once per 64
// bytes of a row skips lines where the row does not start on one. gpt-oss-20b prefill of 512 tokens, 3
// alternating runs: 63-67 tok/s either way, but perf's samples on the first load of a block went from half of
// the MXFP4 tiles' to 3%.
// Into the L2 (prefetcht1), not the L1: 4 K-quant blocks of 16 rows are 9 KB (Q4_K) to 13 KB (Q6_K), beside an
// 8-token tile's activations (16 KB at 2048 columns) and the unpacked block (5 KB), past Zen 4's 32 KB L1. Asked
// into the L1 they gave nothing over no prefetch at all (MoeMatmul/Q4_K.rows16/64x2x768x2048/tok8, 1 thread, 2-vCPU
// Zen 4: 66 G MAC/s into the L1, 68 without, 117 into the L2); the L2 holds them and the L1 misses they leave are
// short. At 2 threads: Q4_K 138 -> 216, Q6_K 105 -> 209 G MAC/s; MXFP4 (16 rows' block: 272 bytes) within noise;
// Qwen3-30B-A3B prefill of 128 tokens 47.5-49.2 -> 65.9-69.1 tok/s in 2 alternating pairs, and 40.1 -> 54.0 (medians
// of 3 rounds interleaved with the reference engine). 8 to 32 blocks ahead were no better than 4 for Q4_K and worse
// for Q6_K. Every type's tiles take this path on every AVX512-VNNI CPU; measured on Zen 4 only (K-quants, MXFP4).
template <class K>
HWY_INLINE void PrefetchRows(const uint8_t* const (&rows)[16], int64_t b) {
  constexpr size_t kAhead = K::kBytes < 64 ? 256 / K::kBytes : 4;
  for (int i = 0; i < (K::kGrouped ? 1 : 16); ++i) {
    const uintptr_t next = reinterpret_cast<uintptr_t>(rows[i]) + (static_cast<size_t>(b) + kAhead) * K::kBytes;
    for (size_t off = 0; off < K::kBytes; off += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(next + off), _MM_HINT_T1);
    }
  }
}

// Rows r0 .. r1 - 1 of K's weights times the n_tok tokens of x's token tiles, 16 rows at a time (a last group of
// fewer repeats its last row in the spare lanes, whose results are not stored). Each block of a group is unpacked
// once for up to 16 tiles (128 tokens), whose sums stay in memory between blocks. Grouped layouts (K::kGrouped:
// rows16) take whole groups (r0, r1 multiples of 16), each nb * K::kBytes bytes, and no row_bytes.
template <class K>
void TokenTiles(const uint8_t* w, size_t row_bytes, const Q8Rows& x, int64_t n_tok, float* y, int64_t y_stride,
                int64_t r0, int64_t r1) {
  const int64_t tiles = padded_tokens(n_tok) / kTokenTile, nb = x.cols / K::kCols;
  // From one tile of x to the next (TileAt): its codes, sums of 16 and block scales.
  const int64_t tile_q = x.cols * kTokenTile, tile_s = x.cols / 32 * 2 * kTokenTile, tile_d = nb * kTokenTile;
  constexpr int64_t kTilesPerPass = 16;
  alignas(64) typename K::Block blk;
  for (int64_t r = r0; r < r1; r += 16) {
    const int64_t n = std::min<int64_t>(16, r1 - r);
    const uint8_t* rows[16];
    for (int64_t i = 0; i < 16; ++i) {
      rows[i] = K::kGrouped ? w + static_cast<size_t>(r / 16 * nb) * K::kBytes
                            : w + static_cast<size_t>(r + std::min(i, n - 1)) * row_bytes;
    }
    const __mmask16 keep = static_cast<__mmask16>((1u << n) - 1);
    for (int64_t g0 = 0; g0 < tiles; g0 += kTilesPerPass) {
      const int64_t ng = std::min(kTilesPerPass, tiles - g0);
      alignas(64) __m512 acc[kTilesPerPass][kTokenTile];  // [tile][token]
      for (int64_t g = 0; g < ng; ++g)
        for (int64_t t = 0; t < kTokenTile; ++t) acc[g][t] = _mm512_setzero_ps();
      for (int64_t b = 0; b < nb; ++b) {
        PrefetchRows<K>(rows, b);
        K::Unpack(rows, static_cast<size_t>(b) * K::kBytes, blk);
        alignas(32) int32_t corr[kTilesPerPass][kTokenTile];
        if constexpr (K::kCols == 32) Block32Offsets<K>(x, g0, ng, b, corr);
        // 32-blocks: the full tiles in a loop of their own with constant strides between them, then a last
        // partial one. A tile's ~100 operations leave little room for the address arithmetic and the switch of a
        // tile size taken per tile, whose scalar operations share the vector ports 0 and 5: Matmul/MXFP4/768x2048/
        // tok128 at 1 thread, 151 -> 159 G MAC/s. The K-quants (~700 operations a tile) keep the switch and
        // TileAt per tile: the strided form took Q4_K from 157 to 145.
        const TileAt at(x, K::kCols, g0, b);
        const int64_t full = K::kCols == 32 ? std::min(ng, n_tok / kTokenTile - g0) : 0;
        for (int64_t g = 0; g < full; ++g) {
          __m512 a[kTokenTile];
          for (int t = 0; t < kTokenTile; ++t) a[t] = acc[g][t];
          Multiply<K, kTokenTile, false>(blk, at.xq + g * tile_q, at.xs + g * tile_s, corr[g], at.dt + g * tile_d, a);
          for (int t = 0; t < kTokenTile; ++t) acc[g][t] = a[t];
        }
        for (int64_t g = full; g < ng; ++g) {
          WithTileSize(std::min(kTokenTile, n_tok - (g0 + g) * kTokenTile), [&]<int NT, bool kPaired>() HWY_ATTR {
            __m512 a[NT];
            for (int t = 0; t < NT; ++t) a[t] = acc[g][t];
            const TileAt ag(x, K::kCols, g0 + g, b);
            Multiply<K, NT, kPaired>(blk, ag.xq, ag.xs, corr[g], ag.dt, a);
            for (int t = 0; t < NT; ++t) acc[g][t] = a[t];
          });
        }
      }
      for (int64_t g = 0; g < ng; ++g) {
        const int64_t t0 = (g0 + g) * kTokenTile;
        for (int64_t t = 0; t < std::min(kTokenTile, n_tok - t0); ++t)
          _mm512_mask_storeu_ps(y + (t0 + t) * y_stride + r, keep, acc[g][t]);
      }
    }
  }
}

// True (and the product done) for the types with a kernel here, when the caller filled the token tiles.
inline bool MatmulRows(GgmlType type, const uint8_t* w, size_t row_bytes, const Q8Rows& x, int64_t n_tok, float* y,
                       int64_t y_stride, int64_t r0, int64_t r1) {
  if (x.qt == nullptr) return false;
  switch (type) {
    case GgmlType::Q4_K: TokenTiles<Q4KLanes>(w, row_bytes, x, n_tok, y, y_stride, r0, r1); return true;
    case GgmlType::Q5_K: TokenTiles<Q5KLanes>(w, row_bytes, x, n_tok, y, y_stride, r0, r1); return true;
    case GgmlType::Q6_K: TokenTiles<Q6KLanes>(w, row_bytes, x, n_tok, y, y_stride, r0, r1); return true;
    case GgmlType::IQ4_XS: TokenTiles<Iq4XsLanes>(w, row_bytes, x, n_tok, y, y_stride, r0, r1); return true;
    case GgmlType::Q4_0:
      TokenTiles<Block32Lanes<avx2::Q4_0Tokens>>(w, row_bytes, x, n_tok, y, y_stride, r0, r1);
      return true;
    case GgmlType::Q5_0:
      TokenTiles<Block32Lanes<avx2::Q5_0Tokens>>(w, row_bytes, x, n_tok, y, y_stride, r0, r1);
      return true;
    case GgmlType::MXFP4:
      TokenTiles<Block32Lanes<avx2::MXFP4Tokens>>(w, row_bytes, x, n_tok, y, y_stride, r0, r1);
      return true;
    case GgmlType::Q8_0:
      TokenTiles<Block32Lanes<Q8_0Offset>>(w, row_bytes, x, n_tok, y, y_stride, r0, r1);
      return true;
    default: return false;
  }
}

}  // namespace vnni512
}  // namespace HWY_NAMESPACE
}  // namespace moetier::quant::kernels
HWY_AFTER_NAMESPACE();

#endif  // HWY_TARGET == HWY_AVX3_DL
#endif  // MOETIER_QUANT_KERNELS_INT8_VNNI512_INL_H_
