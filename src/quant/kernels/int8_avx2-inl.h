// AVX2 fast paths of the integer kernels (int8_kernels.h) for the types that carry most of a model's bytes:
// Q4_K, Q6_K (Qwen3/Mixtral K-quant mixes), MXFP4 (gpt-oss experts), Q8_0, Q4_0, Q5_0, IQ4_NL. They multiply
// 8-bit weights with the 8-bit activation codes directly: pmaddubsw takes 32 unsigned x signed byte pairs and adds
// neighbours into 16 int16 lanes, then pmaddwd applies the sub-block scale (or 1) into 8 int32 lanes. That is
// 2 multiplies per 32 elements where the portable kernels (int16 operands) need 4, which is what bounds them.
//
// Exactness: every intermediate stays in range, so the block sums are the same integers the portable kernels
// and the scalar specification compute. pmaddubsw saturates at 2^15 - 1: its operands here are a weight code
// 0..63 (Q4_K nibble, Q6_K 6-bit code before its -32 shift, Q4_0 / MXFP4 / Q5_0 offset code) or |w| <= 128
// (signed types, sign moved onto the activation with psignb) times an activation code |x| <= 127, so a pair is
// at most 2 * 128 * 127 = 32512.
//
// AVX512-VNNI (Highway's AVX3_DL target: Ice Lake and later Xeons, Zen 4): vpdpbusd adds the four u8 x s8 products
// of each 32-bit lane straight into an int32 lane, where pmaddubsw, an int16 add and a pmaddwd took three
// operations; the sums are the same integers. The 32-block kernels of offset codes (MXFP4, Q4_0, Q5_0) take it
// (TileBlock32, Block32Rows; MXFP4's one-token rows in 512-bit vectors, Mxfp4Rows512). In the K-quant tiles here
// (8 tokens in the lanes) a lane's int32 sum must be scaled per sub-block, and there vpdpbusd + vpdpwssd measured
// no faster (Matmul/Q4_K tok8 slower, tok128 faster); on AVX3_DL the K-quant tiles put 16 weight rows in the
// lanes instead (int8_vnni512-inl.h), which this file's tiles remain the specification of. The one-token Q4_K, Q5_K
// and Q6_K rows of the AVX-512 targets (Q4KRows512, Q6KRow512) apply the sub-block scales with vpdpwssd, IQ4_XS's
// (Iq4XsRows512) with pmaddwd before its transposing sums; IQ4_XS has no token tiles here (several tokens take the
// portable kernels, or with AVX512-VNNI vnni512::Iq4XsLanes).
// Included by int8_kernels.cpp inside its per-target namespace; compiled for the AVX2 and AVX-512 targets only.
#if defined(MOETIER_QUANT_KERNELS_INT8_AVX2_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MOETIER_QUANT_KERNELS_INT8_AVX2_INL_H_
#undef MOETIER_QUANT_KERNELS_INT8_AVX2_INL_H_
#else
#define MOETIER_QUANT_KERNELS_INT8_AVX2_INL_H_
#endif

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "hwy/highway.h"
#include "quant/blocks.h"
#include "quant/e8m0.h"
#include "quant/kernels/block_bytes-inl.h"
#include "quant/kernels/int8_kernels.h"

#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
#include <immintrin.h>

#undef MOETIER_VNNI
#define MOETIER_VNNI (HWY_TARGET == HWY_AVX3_DL)

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

#if MOETIER_VNNI
// vpdpbusd (acc + the four u8 x s8 products of each 32-bit lane) and vpdpwssd (acc + the two int16 x int16
// products of each lane), EVEX-encoded. Not the intrinsics: Highway 1.0 chooses AVX3_DL on CPUs with AVX512-VNNI,
// VBMI2, BITALG, ... (Ice Lake and later, Zen 4) but compiles it with "avxvnni", so the compiler emits the VEX forms
// of AVX-VNNI (Alder Lake, Sapphire Rapids), invalid instructions on Ice Lake and Zen 4. The assembler takes the
// operands in AT&T order: source 2, source 1, destination. Source 2 may be memory (GCC folds a load there); clang
// would always put it in memory, a store and reload per call, so there it is a register.
#if defined(__clang__)
#define MOETIER_VNNI_SRC2 "v"
#else
#define MOETIER_VNNI_SRC2 "vm"
#endif
HWY_INLINE __m256i DpBusd(__m256i acc, __m256i u8, __m256i s8) {
  asm("%{evex%} vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u8), MOETIER_VNNI_SRC2(s8));
  return acc;
}
HWY_INLINE __m512i DpBusd(__m512i acc, __m512i u8, __m512i s8) {
  asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u8), MOETIER_VNNI_SRC2(s8));
  return acc;
}
HWY_INLINE __m512i DpWssd(__m512i acc, __m512i a, __m512i b) {
  asm("vpdpwssd %2, %1, %0" : "+v"(acc) : "v"(a), MOETIER_VNNI_SRC2(b));
  return acc;
}
#endif

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
// acc + the two int16 x int16 products of each 32-bit lane of a and b (a sub-block's pair sums times its scale):
// vpdpwssd with VNNI, else pmaddwd and an add (the same integers).
HWY_INLINE __m512i AddWordProducts(__m512i acc, __m512i a, __m512i b) {
#if MOETIER_VNNI
  return DpWssd(acc, a, b);
#else
  return _mm512_add_epi32(acc, _mm512_madd_epi16(a, b));
#endif
}
#endif

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

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
// One token of one Q4_K row (decode) in 512-bit vectors, the formula of Q4KTile below, two blocks A, B at a time. Each
// 32 bytes of nibbles broadcast to both halves of a vector and shifted by 0 / 4 bits per half (vpsrlvw) give sub-blocks
// 2p and 2p + 1 side by side; the 64 activation codes they meet are one load, and their products and scales take 4.5
// operations per 64 elements with VNNI, 6 without (Q4KBlockSums512), where the 256-bit kernel takes eleven. The
// per-block work around them (unpacking 6-bit scales and mins, the min term, the float scales) is what the 256-bit
// kernel spends most of its operations on; here one 256-bit unpacking, one min pmaddwd and one fp16 conversion serve
// both blocks (one block at a time measured no faster than the 256-bit kernel). bench_matvec MatvecHot/Q4_K/768x2048, 6
// alternating runs on a 2.1 GHz Xeon (AVX3_DL), medians, GB/s at 1 / 2 threads: 10.2 / 22.6 -> 13.2 / 23.7 (faster in 6
// / 5 of 6); Qwen3-30B-A3B-shaped Q4_K_M decode at -t 2, 9 alternating runs: 8.0 -> 8.9 tok/s (medians; faster in 6,
// slower in 1).

// The sum of the 16 lanes, in a fixed order: lanes l and l + 8 (l < 8), then those sums' l and l + 4, then 0 + 2
// and 1 + 3, then the last two: (((v0 + v8) + (v4 + v12)) + ((v2 + v10) + (v6 + v14))) + (((v1 + v9) + (v5 + v13))
// + ((v3 + v11) + (v7 + v15))), GCC's _mm512_reduce_add_ps written out, so that the rows16 kernels (Q45KGroup,
// Q6KOneTokenGroups) can reproduce it whatever a compiler's intrinsic does.
HWY_INLINE float ReduceLanes512(__m512 v) {
  const __m256 t3 = _mm256_add_ps(_mm512_extractf32x8_ps(v, 1), _mm512_castps512_ps256(v));
  const __m128 t6 = _mm_add_ps(_mm256_extractf128_ps(t3, 1), _mm256_castps256_ps128(t3));
  const __m128 t8 = _mm_add_ps(t6, _mm_shuffle_ps(t6, t6, _MM_SHUFFLE(1, 0, 3, 2)));
  return _mm_cvtss_f32(_mm_add_ss(t8, _mm_movehdup_ps(t8)));
}

// The scales (bytes 0-7) and mins (8-15) of block A in the low 128 bits, of block B in the high: Q4KScalesMins
// on both at once.
HWY_INLINE __m256i Q4KScalesMins2(const uint8_t* a, const uint8_t* b) {
  const auto load = [](const uint8_t* p) HWY_ATTR { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); };
  const __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(load(a)), load(b), 1);
  const __m256i low6 = _mm256_set1_epi8(0x3f), low4 = _mm256_set1_epi8(0x0f), low2 = _mm256_set1_epi8(0x03);
  const __m256i sa = _mm256_shuffle_epi32(v, _MM_SHUFFLE(2, 1, 2, 0));
  const __m256i sb = _mm256_shuffle_epi32(v, _MM_SHUFFLE(1, 1, 0, 0));
  const __m256i low = _mm256_and_si256(sa, low6);
  const __m256i nib = _mm256_and_si256(_mm256_srlv_epi32(sa, _mm256_setr_epi32(0, 0, 0, 4, 0, 0, 0, 4)), low4);
  const __m256i top = _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(sb, 6), low2), 4);
  return _mm256_blend_epi32(low, _mm256_or_si256(nib, top), 0b10101010);
}

// The four u8 x s8 products of each 32-bit lane of u8 and s8 summed into it: vpdpbusd on a zero accumulator with
// VNNI, else pmaddubsw and pmaddwd by ones (the same integers, where the pairs stay below 2^15).
HWY_INLINE __m512i QuadSums(__m512i u8, __m512i s8) {
#if MOETIER_VNNI
  return DpBusd(_mm512_setzero_si512(), u8, s8);
#else
  return _mm512_madd_epi16(_mm512_maddubs_epi16(u8, s8), _mm512_set1_epi16(1));
#endif
}

// The integer sum over one block's 8 sub-blocks of scale_s * (q_s . x_s), in 16 int32 lanes. B: BlockQ4_K or
// BlockQ5_K; blk: the block; xb: its 256 activation codes; sm: the block's 6-bit scales (bytes 0-7) and mins (8-15)
// in each 128 bits. Pair p's 32 bytes of nibbles, broadcast to both halves and shifted by 0 / 4 bits per half, are
// sub-blocks 2p and 2p + 1 side by side; their quad sums with the 64 activation codes (QuadSums) fit int16 (at most
// 4 * 31 * 127), so pairs 2c and 2c + 1 pack into one vector of words (vpackssdw, per 128 bits: four of the first's
// lanes, then four of the second's), whose scales are one pshufb of sm (pick[c]), applied and added by one vpdpwssd.
// Per 128 elements that is two vpdpbusd, one pack, one pshufb and one vpdpwssd, where a pmaddubsw, a pshufb and a
// vpdpwssd per 64 took six. bench_matvec on a 2-vCPU AMD EPYC (Zen 4), 5 alternating runs of each binary, medians,
// GB/s at 1 / 2 threads: MatvecHot/Q4_K/768x2048 21.3 / 35.2 -> 23.5 / 42.0, MatvecHot/Q5_K 18.6 / 34.3 -> 21.3 /
// 34.5; from DRAM at 2 threads Matvec/Q4_K/2048x4096 25.2 -> 29.9, 768x2048 20.8 -> 23.8, 2048x768 19.2 -> 21.4.
// Qwen3-30B-A3B-shaped Q4_K_M decode there, 6 alternating pairs: 15.1 -> 15.1 tok/s (medians; bound by the read
// there, ~31 GB/s). Q6KRow512 in the same form (half its vpermw) measured no faster. Q5_K's fifth bits: element l
// of sub-block s has bit s of qh[l]; qh's 32 bytes in both halves meet bit 2p in the low half and 2p + 1 in the high
// one (vptestmb), and the codes take 16 where it is set (a masked add).
template <class B>
HWY_INLINE __m512i Q4KBlockSums512(const uint8_t* HWY_RESTRICT blk, const int8_t* HWY_RESTRICT xb, __m512i sm,
                                   const __m512i (&pick)[2]) {
  constexpr bool kFifth = std::is_same_v<B, BlockQ5_K>;
  const uint8_t* qs = blk + offsetof(B, qs);
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  const __m512i shifts = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);  // 0 low, 4 high
  __m512i qh = _mm512_setzero_si512();
  if constexpr (kFifth) qh = _mm512_broadcast_i64x4(LoadU(blk + offsetof(BlockQ5_K, qh)));
  __m512i sumi = _mm512_setzero_si512();
  for (int c = 0; c < 2; ++c) {
    __m512i quads[2];
    for (int j = 0; j < 2; ++j) {
      const int p = 2 * c + j;
      const __m512i q = _mm512_broadcast_i64x4(LoadU(qs + 32 * p));
      __m512i w = _mm512_and_si512(_mm512_srlv_epi16(q, shifts), m4);
      if constexpr (kFifth) {
        const __m512i bit = _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(1 << (2 * p))),
                                               _mm256_set1_epi8(static_cast<char>(2 << (2 * p))), 1);
        w = _mm512_mask_add_epi8(w, _mm512_test_epi8_mask(qh, bit), w, _mm512_set1_epi8(16));
      }
      quads[j] = QuadSums(w, _mm512_loadu_si512(xb + 64 * p));
    }
    sumi = AddWordProducts(sumi, _mm512_packs_epi32(quads[0], quads[1]), _mm512_shuffle_epi8(sm, pick[c]));
  }
  return sumi;
}

// R (1 or 2) rows (rows[r]: row r's bytes; y[r]: its result, anywhere). With two rows, their odd last blocks (a row
// of 768 columns has three: a down projection's shape) are taken together as a pair is, which is most of the
// odd block's cost saved; each row's lanes see the same operations as alone (the other row's lanes of the min
// term zeroed, as a lone block's are), so a row's result does not depend on its neighbour. Matvec/Q4_K/2048x768,
// 6 alternating runs, medians, GB/s at 1 / 2 threads: one row at a time 8.5 / 13.8 -> two 9.3 / 17.2 (faster in
// 6 of 6 at both); Qwen3-30B-A3B-shaped decode at -t 2, 6 alternating runs: 9.3 -> 9.65 tok/s (faster in 5).
// B = BlockQ5_K (Q5_K_M mixes), where Q5_K took the portable int16 kernels (DecQ45_K): bench_matvec on a 2-vCPU
// AMD EPYC (Zen 4), 3 alternating runs, GB/s at 1 / 2 threads: MatvecHot/Q5_K/768x2048 10.5 / 19.9 -> 19.2-20.7 /
// 33.3-35.6; Matvec/Q5_K/2048x4096 9.3-10.5 / 17.1-19.7 -> 15.1-17.5 / 22.4-28.1, 768x2048 9.2-10.2 / 14.2-15.5 ->
// 16.1-16.5 / 22.7-25.7, 2048x768 9.1-9.6 / 14.6-16.2 -> 13.0-13.6 / 18.3-21.4. Several tokens (a prompt, and a
// prompt's one token in a routed expert: Q8Rows::batched) take the token tiles (Q5KTokens), whose sums go in
// another order, so that a token's result does not depend on how many tokens shared its product.
template <class B, size_t R>
HWY_INLINE void Q4KRows512(const uint8_t* const (&rows)[R], const Q8Rows& x, float* const (&y)[R]) {
  static_assert(R == 1 || R == 2);
  constexpr size_t kB = sizeof(B);
  const int64_t nb = x.cols / kQK_K;
  const int8_t* xq = x.q;        // the one token's codes, sums of 16 and block scales
  const int16_t* xs = x.sums;
  const float* xd = x.d;
  // The scales and mins reach the int16 lanes by pshufb, which widens a byte with a zero (an index byte of 0x80) and
  // works within 128 bits: on a vector holding a block's 16 bytes (Q4KScalesMins2) in each 128 bits, pick[c] puts four
  // sub-blocks' scales where their packed quad sums are (below); on one holding block A's bytes in the low half and B's
  // in the high, min_pick puts each min twice, to meet the activation's sums of 16. One single-uop shuffle each, where
  // vpermw on the widened bytes took two (port 5; llvm-mca -mcpu=icelake-server). bench_matvec GB/s, medians of 8-10
  // runs interleaved in one process, two sessions, vpermw -> this: MatvecHot/Q4_K/768x2048 at 1 thread 15.0 -> 18.4,
  // 15.8 -> 16.8, 2 threads 27.2 -> 27.5, 25.5 -> 27.2; Matvec/Q4_K/2048x4096 at 2 threads 28.6 -> 27.3, 22.6 -> 25.5;
  // 2048x768 20.9 -> 22.6, 19.3 -> 20.4. Qwen3-30B-A3B-shaped decode at -t 2, 5 rounds of 2 runs each: medians 11.40 ->
  // 12.26 tok/s, faster in 4 rounds. The sums are the same integers.
  const auto word = [](int byte) { return static_cast<int16_t>(static_cast<uint16_t>(0x8000 | byte)); };
  // pick[c]: in the first two 128 bits, scale 4c in words 0-3 and 4c + 2 in words 4-7; in the last two, 4c + 1
  // and 4c + 3 (the packed quad sums of sub-blocks 4c .. 4c + 3: Q4KBlockSums512)
  __m512i pick[2];
  for (int c = 0; c < 2; ++c) {
    const __m128i lo = _mm_setr_epi16(word(4 * c), word(4 * c), word(4 * c), word(4 * c), word(4 * c + 2),
                                      word(4 * c + 2), word(4 * c + 2), word(4 * c + 2));
    const __m128i hi = _mm_setr_epi16(word(4 * c + 1), word(4 * c + 1), word(4 * c + 1), word(4 * c + 1),
                                      word(4 * c + 3), word(4 * c + 3), word(4 * c + 3), word(4 * c + 3));
    pick[c] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_setr_m128i(lo, lo)), _mm256_setr_m128i(hi, hi), 1);
  }
  // mins 0-3 (bytes 8-11) in the first 128 bits of each half, 4-7 in the second
  const __m128i mins03 = _mm_setr_epi16(word(8), word(8), word(9), word(9), word(10), word(10), word(11), word(11));
  const __m128i mins47 = _mm_setr_epi16(word(12), word(12), word(13), word(13), word(14), word(14), word(15), word(15));
  const __m512i min_pick = _mm512_broadcast_i64x4(_mm256_setr_m128i(mins03, mins47));
  struct Scales {
    __m512i a, b, ab;  // block A's 16 bytes in each 128 bits; B's; A's in the low half and B's in the high
  };
  const auto block_scales = [](const uint8_t* a, const uint8_t* b) HWY_ATTR {
    const __m512i v = _mm512_castsi256_si512(
        Q4KScalesMins2(a + offsetof(B, scales), b + offsetof(B, scales)));
    return Scales{_mm512_shuffle_i64x2(v, v, 0x00), _mm512_shuffle_i64x2(v, v, 0x55),
                  _mm512_shuffle_i64x2(v, v, 0x50)};
  };
  const __m512i lane0 = _mm512_setzero_si512(), lane1 = _mm512_set1_epi32(1), lane2 = _mm512_set1_epi32(2),
                lane3 = _mm512_set1_epi32(3);
  const __m512i lanes13 = _mm512_inserti64x4(lane1, _mm512_castsi512_si256(lane3), 1);
  // [d_A, dmin_A, d_B, dmin_B] of blocks A, B (fp16 pairs at a, b) with one conversion, times dx (per element).
  const auto scales = [](const uint8_t* a, const uint8_t* b, __m128 dx) HWY_ATTR {
    static_assert(offsetof(B, dmin) == offsetof(B, d) + 2);
    uint32_t ha, hb;
    std::memcpy(&ha, a + offsetof(B, d), 4);
    std::memcpy(&hb, b + offsetof(B, d), 4);
    const __m128 dd = _mm_cvtph_ps(_mm_insert_epi32(_mm_cvtsi32_si128(static_cast<int>(ha)), static_cast<int>(hb), 1));
    return _mm512_castps128_ps512(_mm_mul_ps(dd, dx));
  };
  __m512 acc[R];
  for (size_t r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    const __m128 dx = _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(xd + b)));  // dx_A, dx_B
    for (size_t r = 0; r < R; ++r) {
      const uint8_t* ba = rows[r] + static_cast<size_t>(b) * kB;
      const uint8_t* bb = ba + kB;
      PrefetchAhead<2 * kB>(ba);
      const Scales sm = block_scales(ba, bb);
      const __m512i sa = Q4KBlockSums512<B>(ba, xq + b * kQK_K, sm.a, pick);
      const __m512i sb = Q4KBlockSums512<B>(bb, xq + (b + 1) * kQK_K, sm.b, pick);
      const __m512i msum = _mm512_madd_epi16(_mm512_shuffle_epi8(sm.ab, min_pick), _mm512_loadu_si512(xs + b * 16));
      const __m512 s = scales(ba, bb, _mm_unpacklo_ps(dx, dx));
      acc[r] = _mm512_fmadd_ps(_mm512_permutexvar_ps(lane0, s), _mm512_cvtepi32_ps(sa), acc[r]);
      acc[r] = _mm512_fmadd_ps(_mm512_permutexvar_ps(lane2, s), _mm512_cvtepi32_ps(sb), acc[r]);
      acc[r] = _mm512_fnmadd_ps(_mm512_permutexvar_ps(lanes13, s), _mm512_cvtepi32_ps(msum), acc[r]);
    }
  }
  if (b < nb) {  // the odd last block: of each row, A (and B: the second row's)
    const uint8_t* ba = rows[0] + static_cast<size_t>(b) * kB;
    const uint8_t* bb = rows[R - 1] + static_cast<size_t>(b) * kB;
    const Scales sm = block_scales(ba, bb);
    // the block's activation sums of 16 in both halves, for A's mins and B's
    const __m512i msum =
        _mm512_madd_epi16(_mm512_shuffle_epi8(sm.ab, min_pick), _mm512_broadcast_i64x4(LoadU(xs + b * 16)));
    const __m512 s = scales(ba, bb, _mm_set1_ps(xd[b]));
    const __m512i sa = Q4KBlockSums512<B>(ba, xq + b * kQK_K, sm.a, pick);
    acc[0] = _mm512_fmadd_ps(_mm512_permutexvar_ps(lane0, s), _mm512_cvtepi32_ps(sa), acc[0]);
    acc[0] = _mm512_fnmadd_ps(_mm512_permutexvar_ps(lane1, s),
                              _mm512_cvtepi32_ps(_mm512_zextsi256_si512(_mm512_castsi512_si256(msum))), acc[0]);
    if constexpr (R == 2) {
      const __m512i sb = Q4KBlockSums512<B>(bb, xq + b * kQK_K, sm.b, pick);
      acc[1] = _mm512_fmadd_ps(_mm512_permutexvar_ps(lane2, s), _mm512_cvtepi32_ps(sb), acc[1]);
      acc[1] = _mm512_fnmadd_ps(_mm512_permutexvar_ps(lane3, s),
                                _mm512_cvtepi32_ps(_mm512_zextsi256_si512(_mm512_extracti64x4_epi64(msum, 1))),
                                acc[1]);
    }
  }
  for (size_t r = 0; r < R; ++r) *y[r] = ReduceLanes512(acc[r]);
}

// One token (decode) of rows r0 .. r1 - 1 by Q4KRows512, two at a time, one from each of two streams
// (TwoStreamRows): the two rows' blocks are read in turn, 288 bytes of each; or one at a time, in order, where the
// CPU reads one stream faster (one_stream_rows). Flattened: every group inlined, so the kernel's constants are set
// up once per call, not once per pair of rows (that cost 15% of the cache-resident speed: MatvecHot/Q4_K/768x2048
// at 1 thread 13.6-15.0 -> 12.0-12.3 GB/s).
template <class B>
HWY_FLATTEN void Q4KOneToken512(const uint8_t* w, size_t row_bytes, const Q8Rows& x, float* y, int64_t r0,
                                int64_t r1) {
  if (one_stream_rows()) {
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* const rw[1] = {w + static_cast<size_t>(r) * row_bytes};
      float* const ry[1] = {y + r};
      Q4KRows512<B>(rw, x, ry);
    }
    return;
  }
  TwoStreamRowPointers<2>(w, row_bytes, y, r0, r1, [&](const auto& rw, const auto& ry) HWY_ATTR {
    Q4KRows512<B>(rw, x, ry);
  });
}
#endif

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
// One token of R IQ4_XS rows (decode; rows, y as Q4KRows512) in 512-bit vectors, sub-blocks 2p and 2p + 1 of a block
// side by side, as Q4KBlockSums512 takes them. Sub-block s's 32 codes are the low then the high nibbles of
// qs[16s .. 16s + 16): the 32 bytes of a pair fill 128-bit lanes [A, A, B, B] (one shuffle of the load), shifted by
// 0 / 4 bits per lane. The levels (kIq4nlValues, -127..113) are signed, and offset to unsigned they would saturate
// pmaddubsw (2 * 240 * 127), so their magnitudes (a pshufb table) meet the activation codes negated where the
// level is (nibbles 0-7: vptestnmb and a masked subtraction): |w| (-x) = w x, pairs at most 2 * 127 * 127. The
// signed 6-bit scales (scale6 - 32, from the low nibbles of scales_l and two bits of scales_h each) are unpacked
// once per block into 8 int16 in every 128 bits, and pick[p] widens scale 2p over the low half and 2p + 1 over the
// high one, which pmaddwd applies. IQ4_XS has no mins. The block's 16 int32 lanes are then the 16 sums of 16
// elements, each times its sub-block's scale (lane 4c + p: sub-block 2p + c / 2, elements 16 (c % 2) ..): one sum per
// lane that the rows16 kernel (int8_rows16-inl.h, Iq4XsOneTokenGroups) makes with one multiply per sum, where lanes of
// 4 elements each from every part took one per part and lane; the transposing sums cost 9 operations per block and
// row. Before, IQ4_XS took the
// portable int16 kernels (DecIQ4_XS): bench_matvec on a 2-vCPU AMD EPYC (Zen 4), 3 alternating runs, GB/s at 1 / 2
// threads: MatvecHot/IQ4_XS/768x2048 10.7 / 20.0 -> 15.0-16.4 / 26.2-27.9 (with the levels by pshufb; vpermb then
// faster in 3 of 3 alternating runs, 15.1-16.1 -> 16.7-17.4 at 1 thread); Matvec/IQ4_XS/2048x4096 8.2-9.6 /
// 17.3-18.7 -> 14.3-15.9 / 26.7-28.9, 2048x768 7.6-8.9 / 13.0-13.9 -> 12.2-15.2 / 21.3-21.7. Several tokens (and
// a prompt's one) take the token tiles with AVX512-VNNI (vnni512::Iq4XsLanes), the portable kernels elsewhere; both
// sum in another order.
template <size_t R>
HWY_INLINE void Iq4XsRows512(const uint8_t* const (&rows)[R], const Q8Rows& x, float* const (&y)[R]) {
  using B = BlockIQ4_XS;
  constexpr size_t kB = sizeof(B);
  const int64_t nb = x.cols / kQK_K;
  uint8_t abs_levels[16];
  for (int i = 0; i < 16; ++i) abs_levels[i] = static_cast<uint8_t>(std::abs(kIq4nlValues[i]));
  const __m512i abs_tbl = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(abs_levels)));
  const __m512i m4 = _mm512_set1_epi8(0x0f), eight = _mm512_set1_epi8(8), zero = _mm512_setzero_si512();
  const __m512i shifts = _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4);
  __m512i pick[4];  // bytes 4p, 4p + 1 (int16 scale 2p) in the low half, 4p + 2, 4p + 3 in the high
  for (int p = 0; p < 4; ++p) {
    pick[p] = _mm512_inserti64x4(_mm512_set1_epi16(static_cast<int16_t>((4 * p + 1) << 8 | 4 * p)),
                                 _mm256_set1_epi16(static_cast<int16_t>((4 * p + 3) << 8 | (4 * p + 2))), 1);
  }
  // Scale s in int16 lane s: nibble s % 2 of scales_l[s / 2] (pshufb widens byte s / 2, vpsrlvw takes the nibble),
  // bits 2s, 2s + 1 of scales_h above it.
  const __m128i low_byte = _mm_setr_epi8(0, -128, 0, -128, 1, -128, 1, -128, 2, -128, 2, -128, 3, -128, 3, -128);
  const __m128i low_shift = _mm_setr_epi16(0, 4, 0, 4, 0, 4, 0, 4);
  const __m128i high_shift = _mm_setr_epi16(0, 2, 4, 6, 8, 10, 12, 14);
  const auto block_scales = [&](const uint8_t* blk) HWY_ATTR {
    uint32_t sl;
    uint16_t sh;
    std::memcpy(&sl, blk + offsetof(B, scales_l), 4);
    std::memcpy(&sh, blk + offsetof(B, scales_h), 2);
    const __m128i lo = _mm_and_si128(
        _mm_srlv_epi16(_mm_shuffle_epi8(_mm_cvtsi32_si128(static_cast<int>(sl)), low_byte), low_shift),
        _mm_set1_epi16(0x0f));
    const __m128i hi = _mm_and_si128(_mm_srlv_epi16(_mm_set1_epi16(static_cast<int16_t>(sh)), high_shift),
                                     _mm_set1_epi16(3));
    const __m128i sc = _mm_sub_epi16(_mm_or_si128(lo, _mm_slli_epi16(hi, 4)), _mm_set1_epi16(32));
    return _mm512_broadcast_i32x4(sc);
  };
  __m512 acc[R];
  for (size_t r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const int8_t* xb = x.q + b * kQK_K;
    for (size_t r = 0; r < R; ++r) {
      const uint8_t* blk = rows[r] + static_cast<size_t>(b) * kB;
      PrefetchAhead<kB>(blk);
      const __m512i sc = block_scales(blk);
      __m512i part[4];  // 128-bit lane c of part[p]: sub-block 2p + c / 2, elements 16 (c % 2) .. + 15, times its scale
      for (int p = 0; p < 4; ++p) {
        const __m512i v = _mm512_castsi256_si512(LoadU(blk + offsetof(B, qs) + 32 * p));
        // Bit 3 of each byte is its nibble's own after the shift, whatever the neighbouring nibble left above it.
        const __m512i nib = _mm512_srlv_epi64(_mm512_shuffle_i64x2(v, v, 0x50), shifts);
#if HWY_TARGET == HWY_AVX3_DL
        // vpermb reads 6 bits of each index, and the table is in each 16 bytes: the neighbour's bits pick the same.
        const __m512i aw = _mm512_permutexvar_epi8(nib, abs_tbl);
#else
        const __m512i aw = _mm512_shuffle_epi8(abs_tbl, _mm512_and_si512(nib, m4));
#endif
        const __m512i xv = _mm512_loadu_si512(xb + 64 * p);
        const __m512i xs = _mm512_mask_sub_epi8(xv, _mm512_testn_epi8_mask(nib, eight), zero, xv);
        const __m512i prod = _mm512_maddubs_epi16(aw, xs);
        part[p] = _mm512_madd_epi16(prod, _mm512_shuffle_epi8(sc, pick[p]));
      }
      // Lane 4c + p: the sum of 128-bit lane c of part[p] (two unpack-and-add steps, a 4 x 4 transpose of the sums).
      const __m512i s01 = _mm512_add_epi32(_mm512_unpacklo_epi32(part[0], part[1]),
                                           _mm512_unpackhi_epi32(part[0], part[1]));
      const __m512i s23 = _mm512_add_epi32(_mm512_unpacklo_epi32(part[2], part[3]),
                                           _mm512_unpackhi_epi32(part[2], part[3]));
      const __m512i sum = _mm512_add_epi32(_mm512_unpacklo_epi64(s01, s23), _mm512_unpackhi_epi64(s01, s23));
      const __m512 ddx = _mm512_set1_ps(Fp16At(blk + offsetof(B, d)) * x.d[b]);
      acc[r] = _mm512_fmadd_ps(ddx, _mm512_cvtepi32_ps(sum), acc[r]);
    }
  }
  for (size_t r = 0; r < R; ++r) *y[r] = ReduceLanes512(acc[r]);
}

// One token (decode) of rows r0 .. r1 - 1 by Iq4XsRows512, two at a time, one from each of two streams; flattened
// as Q4KOneToken512.
HWY_FLATTEN void Iq4XsOneToken512(const uint8_t* w, size_t row_bytes, const Q8Rows& x, float* y, int64_t r0,
                                  int64_t r1) {
  TwoStreamRowPointers<2>(w, row_bytes, y, r0, r1, [&](const auto& rw, const auto& ry) HWY_ATTR {
    Iq4XsRows512(rw, x, ry);
  });
}
#endif

// Q4_K: super-blocks of 256 = 8 sub-blocks of 32 with 6-bit scales and mins; sub-blocks 2p, 2p + 1 are the low
// and high nibbles of qs[32p .. 32p + 31]. y = d * dx * sum_s scale_s * (q_s . x_s) - dmin * dx * sum_s min_s *
// (sum of x_s's codes). The min term takes the activation's 16 sums of 16 as they are, each min doubled to
// meet its two: one pmaddwd per token and block, where adding the sums into 8 sums of 32 first took four
// operations (bench_matvec MatvecHot/Q4_K/768x2048, medians of 5 alternating runs, 1 / 2 threads: 19.8 / 37.3
// -> 20.5 / 38.7 GB/s).
template <size_t NT>
HWY_INLINE void Q4KTile(const uint8_t* HWY_RESTRICT row, const Q8Rows& x, int64_t t0, float* HWY_RESTRICT y,
                        int64_t y_stride) {
  const int64_t cols = x.cols, nb = cols / kQK_K, n_sums = cols / 16;
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  // bytes 8-15 of Q4KScalesMins (the mins), each twice
  const __m128i kMinsTwice = _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
  __m256 acc[NT];
  for (size_t t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = row + static_cast<size_t>(b) * sizeof(BlockQ4_K);
    if constexpr (NT == 1) PrefetchAhead<sizeof(BlockQ4_K)>(blk);
    const float d = Fp16At(blk + offsetof(BlockQ4_K, d));
    const float dmin = Fp16At(blk + offsetof(BlockQ4_K, dmin));
    const __m128i sm = Q4KScalesMins(blk + offsetof(BlockQ4_K, scales));
    const __m256i mins = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(sm, kMinsTwice));  // int16 min of each sum of 16
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
      const __m256i msum = _mm256_madd_epi16(mins, LoadU(x.sums + tok * n_sums + b * 16));
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(d * dx), _mm256_cvtepi32_ps(sumi), acc[t]);
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(-dmin * dx), _mm256_cvtepi32_ps(msum), acc[t]);
    }
  }
  for (size_t t = 0; t < NT; ++t) y[static_cast<int64_t>(t) * y_stride] = Hsum(acc[t]);
}

// Q6_K: 16 sub-blocks of 16 with int8 scales; code q = ql nibble | 2 qh bits << 4 (0..63), value q - 32.
// sum_j sc_j * ((q - 32) . x)_j = sum_j sc_j * (q . x)_j - 32 * sum_j sc_j * bsum_j.
// Q6KCodes: the block's codes, q[k] = elements 32k .. 32k + 31 as bytes 0..63.
HWY_INLINE void Q6KCodes(const uint8_t* HWY_RESTRICT blk, __m256i q[8]) {
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  const __m256i m2 = _mm256_set1_epi8(0x03);
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
}

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
// One token of one Q6_K row (decode) in 512-bit vectors, the formula of Q6KTile: per half h of the block, its 64
// bytes of ql hold elements 128h .. 128h + 63 in their low nibbles and the next 64 in their high nibbles, and the
// 32 bytes of qh, broadcast to both halves of a vector and shifted by 0 / 2 bits per half (vpsrlvw), give those
// elements' high bit pairs at bits 0-1 (after a shift left by 4: at 4-5) and 4-5. Seven operations make 128 codes
// where Q6KCodes takes twenty-two; each sub-block's scale is a vpermw, and with VNNI vpdpwssd applies it.
// bench_matvec MatvecHot/Q6_K/768x2048, 4 alternating runs on a 2.1 GHz Xeon, medians, GB/s at 1 / 2 threads:
// 12.3 / 23.1 -> 15.0 / 32.8 (faster in 4 of 4 at both).
HWY_INLINE void Q6KRow512(const uint8_t* HWY_RESTRICT row, const Q8Rows& x, int64_t tok, float* HWY_RESTRICT y) {
  const int64_t cols = x.cols, nb = cols / kQK_K, n_sums = cols / 16;
  const int8_t* xq = x.q + tok * cols;
  const int16_t* xs = x.sums + tok * n_sums;
  const float* xd = x.d + tok * nb;
  const __m512i m4 = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30);
  const __m512i shifts = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);  // 0 low, 2 high
  // vpermw indices: in the vector of elements 64k .. 64k + 63, words 8j .. 8j + 7 (16 elements) take scale 4k + j.
  __m512i idx[4];
  for (int k = 0; k < 4; ++k)
    idx[k] = _mm512_set_epi64(0x0003000300030003 + 0x0004000400040004 * k, 0x0003000300030003 + 0x0004000400040004 * k,
                              0x0002000200020002 + 0x0004000400040004 * k, 0x0002000200020002 + 0x0004000400040004 * k,
                              0x0001000100010001 + 0x0004000400040004 * k, 0x0001000100010001 + 0x0004000400040004 * k,
                              0x0004000400040004 * k, 0x0004000400040004 * k);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = row + static_cast<size_t>(b) * sizeof(BlockQ6_K);
    PrefetchAhead<sizeof(BlockQ6_K)>(blk);
    const __m256i sc16 =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + offsetof(BlockQ6_K, scales))));
    const __m512i sc = _mm512_castsi256_si512(sc16);  // only words 0-15 are indexed
    const int8_t* xb = xq + b * kQK_K;
    __m512i sumi[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};  // two chains, for latency
    for (int h = 0; h < 2; ++h) {
      const __m512i ql = _mm512_loadu_si512(blk + offsetof(BlockQ6_K, ql) + 64 * h);
      const __m512i t = _mm512_srlv_epi16(_mm512_broadcast_i64x4(LoadU(blk + offsetof(BlockQ6_K, qh) + 32 * h)),
                                          shifts);
      // (a & b) | c: 0xEA is vpternlog's truth table of it
      const __m512i q[2] = {
          _mm512_ternarylogic_epi32(ql, m4, _mm512_and_si512(_mm512_slli_epi16(t, 4), m30), 0xEA),
          _mm512_ternarylogic_epi32(_mm512_srli_epi16(ql, 4), m4, _mm512_and_si512(t, m30), 0xEA)};
      for (int k = 0; k < 2; ++k) {
        const __m512i prod = _mm512_maddubs_epi16(q[k], _mm512_loadu_si512(xb + 128 * h + 64 * k));
        const __m512i s = _mm512_permutexvar_epi16(idx[2 * h + k], sc);
        sumi[k] = AddWordProducts(sumi[k], prod, s);
      }
    }
    // the codes' offset 32: 32 * sum_j scale_j * bsum_j, off the 16 int32 lanes' sum (in their low 8)
    const __m256i corr = _mm256_slli_epi32(_mm256_madd_epi16(sc16, LoadU(xs + b * 16)), 5);
    const __m512i sum = _mm512_sub_epi32(_mm512_add_epi32(sumi[0], sumi[1]), _mm512_zextsi256_si512(corr));
    acc = _mm512_fmadd_ps(_mm512_set1_ps(Fp16At(blk + offsetof(BlockQ6_K, d)) * xd[b]), _mm512_cvtepi32_ps(sum), acc);
  }
  *y = ReduceLanes512(acc);  // in the order rows16::Q6KOneTokenGroups reproduces
}
#endif

template <size_t NT>
HWY_INLINE void Q6KTile(const uint8_t* HWY_RESTRICT row, const Q8Rows& x, int64_t t0, float* HWY_RESTRICT y,
                        int64_t y_stride) {
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  if constexpr (NT == 1) return Q6KRow512(row, x, t0, y);
#endif
  const int64_t cols = x.cols, nb = cols / kQK_K, n_sums = cols / 16;
  __m256 acc[NT];
  for (size_t t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = row + static_cast<size_t>(b) * sizeof(BlockQ6_K);
    if constexpr (NT == 1) PrefetchAhead<sizeof(BlockQ6_K)>(blk);
    const float d = Fp16At(blk + offsetof(BlockQ6_K, d));
    const auto* sc = reinterpret_cast<const int8_t*>(blk + offsetof(BlockQ6_K, scales));
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc)));
    __m256i q[8], s[8];  // q[k]: elements 32k .. 32k + 31 (0..63); s: their two sub-block scales
    Q6KCodes(blk, q);
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

// Several tokens (prefill; compute-bound) of Q4_K, Q5_K or Q6_K, R rows (1..4) at a time, against the token-interleaved
// activations (Q8Rows::qt/st/dt): a vector holds 4 consecutive codes ("a quad") of each of 8 tokens, and one
// weight row's 4 codes are broadcast to all 8 lanes, so pmaddubsw and then pmaddwd with the sub-block scale leave
// each token's sum in its own int32 lane: no horizontal reductions, and each row's weights are unpacked once per
// block (into bytes) for all the tokens, where the row-major tiles spend a pmaddwd and an add per 32 products and
// reduce per row and token. bench_matvec Matmul/TYPE/768x2048, G MAC/s at 1 / 2 threads, row-major tiles -> these:
// Q4_K tok8 28.2 / 37.9 -> 41.9 / 66.0, tok128 28.6 / 44.9 -> 62.7 / 82.4; Q6_K tok128 27.6 / 40.2 -> 40.4 / 63.8,
// tok8 unchanged (30.9 / 44.1: one tile does not pay for unpacking the block and its 24 scale vectors).
//
// Paired tiles: a tile of 1-4 tokens (Q8Rows: each token in two lanes) takes two rows per vector, lane 2t the
// first row's sum for token t and 2t + 1 the second's: the pair's two quads broadcast with one 8-byte load. A
// routed expert's share of a prompt ends in such a tile about half the time (8 tokens on average for
// Qwen3-30B-A3B's 128-token prompt), which otherwise costs as much as a full one. So rows are unpacked in pairs,
// their codes interleaved per quad: quad j of a 32-block of the pair's row h at byte 8 j + 4 h (StorePair).
// bench_matvec Matmul/TYPE/768x2048/tok12 (a full tile and a paired one) at 1 thread, medians of 3 alternating
// runs, G MAC/s: Q4_K 65.6 -> 73.2, Q6_K 46.3 -> 51.2, MXFP4 47.4 -> 57.1; Qwen3-30B-A3B-shaped Q4_K_M, 128-token
// prompt at -t 2, medians of 5 alternating runs: 33.5 -> 36.1 tok/s.
//
// Sums: a pmaddubsw lane is two products, kQuadsPerSum quads add in int16 before the pmaddwd: Q4_K 8 quads of
// codes 0..15 (8 * 2 * 15 * 127 = 30480 < 2^15), Q6_K 2 quads of codes 0..63 (2 * 2 * 63 * 127 = 32004). The
// offsets (Q4_K's mins, Q6_K's -32) multiply the activation sums of 16 with one pmaddwd per 32-block. Per token
// and block, in the token's lane, Finish adds float(sum) * (d * dx) (and Q4_K's min term): the same operations for
// every token whatever its tile, paired or not, or the other tokens, so a token's result does not depend on the
// batch it came in. (One token goes through Q4KTile / Q6KTile, as in decode, unless it is a routed expert's share
// of a prompt: ProductGroup::batched; Q5_K's through Q4KOneToken512 on AVX-512, the portable kernels on AVX2.)
//
// Scales: Unpack keeps each as a 32-bit word (the int16 scale twice, what pmaddwd pairs with the two int16 sums of
// a lane), broadcast where used with one load; with several tiles per pass Widen stores them as vectors once, which
// the pmaddwd then takes from memory. bench_matvec Matmul/Q4_K/768x2048 at 1 thread, medians of 5 alternating runs,
// 16 stored broadcast vectors per block -> words: tok8 65.5 -> 72.4 G MAC/s, tok128 94.6 -> 95.1 (widened).

// The 32 codes a and b of one 32-block of two rows, interleaved per quad into pw[0..63]: unpacklo/hi_epi32 give
// quads j in the 8-byte slots QuadSlot(j) (0 1 4 5 | 2 3 6 7); kInOrder puts them in order with two lane permutes.
// Q4_K and Q6_K take that, for affine addresses: GCC leaves their long quad loops rolled otherwise, the sums on the
// stack (Matmul/Q4_K/768x2048/tok128 at half the speed). The nibble types' short loops unroll either way, and there
// the permutes cost (Matmul/MXFP4/768x2048/tok8 at 1 thread, 5 alternating runs: 47 -> 40 G MAC/s).
HWY_INLINE constexpr int QuadSlot(int j) { return (j & 1) | ((j & 2) << 1) | ((j & 4) >> 1); }
template <bool kInOrder>
HWY_INLINE void StorePair(void* HWY_RESTRICT pw, __m256i a, __m256i b) {
  const __m256i lo = _mm256_unpacklo_epi32(a, b), hi = _mm256_unpackhi_epi32(a, b);
  if constexpr (kInOrder) {
    _mm256_store_si256(static_cast<__m256i*>(pw), _mm256_permute2x128_si256(lo, hi, 0x20));
    _mm256_store_si256(static_cast<__m256i*>(pw) + 1, _mm256_permute2x128_si256(lo, hi, 0x31));
  } else {
    _mm256_store_si256(static_cast<__m256i*>(pw), lo);
    _mm256_store_si256(static_cast<__m256i*>(pw) + 1, hi);
  }
}
// 8 words of each of two rows (32-byte aligned), interleaved the same way into 8 pair words.
HWY_INLINE void StoreWordPairs(int64_t* HWY_RESTRICT pw, const int32_t* a, const int32_t* b) {
  StorePair<true>(pw, _mm256_load_si256(reinterpret_cast<const __m256i*>(a)),
                  _mm256_load_si256(reinterpret_cast<const __m256i*>(b)));
}

// One row's float (h) in every lane, or a pair's two in alternate lanes.
template <bool kPaired>
HWY_INLINE __m256 RowScales(const float (&s)[2], int h) {
  if constexpr (kPaired) {
    double both;
    std::memcpy(&both, s, sizeof both);
    return _mm256_castpd_ps(_mm256_set1_pd(both));
  }
  return _mm256_set1_ps(s[h]);
}

// Q4_K (B = BlockQ4_K) and Q5_K (BlockQ5_K: the same block with a fifth bit per code, so codes 0..31). A Q4_K
// 32-block's 8 quads add into int16 before their scale (16 products of at most 15 * 127 per lane: 30480); Q5_K's
// codes take 4 quads at a time (8 of at most 31 * 127: 31496, where 16 would overflow).
template <class B>
struct Q45KTokens {
  static constexpr bool kFifth = std::is_same_v<B, BlockQ5_K>;
  static constexpr size_t kBytes = sizeof(B);
  static constexpr int kQuadsPerSum = kFifth ? 4 : 8;  // one scale each
  static constexpr int kQuadsPerScale = 8;
  static constexpr int64_t kWideFromTiles = 3;  // full tiles in a pass from which Widen pays
  struct Block {  // two rows' (h = 0, 1)
    alignas(32) uint8_t w[2 * kQK_K];  // codes 0..15 (Q5_K: 0..31) as bytes, 64 per 32-block (StorePair)
    alignas(32) int32_t sc[2][8];      // [h][32-block]: its 6-bit scale in both int16 halves
    alignas(32) int32_t off[2][8];     // [h][32-block]: its min in both int16 halves (times its two sums of 16)
    alignas(32) int64_t psc[8], poff[8];  // [32-block]: both rows' words, for the paired tiles (Pair)
    __m256i scv[2][8], offv[2][8];     // [h][32-block]: the words in every lane (Widen)
    float d[2], dmin[2];
  };
  static HWY_INLINE void Unpack(const uint8_t* HWY_RESTRICT a, const uint8_t* HWY_RESTRICT b, Block& o) {
    const uint8_t* blk[2] = {a, b};
    for (int h = 0; h < 2; ++h) {
      o.d[h] = Fp16At(blk[h] + offsetof(B, d));
      o.dmin[h] = Fp16At(blk[h] + offsetof(B, dmin));
      // int16 scales 0-7 | mins 0-7, each doubled into a word: unpacklo gives scales 0-3 | mins 0-3, unpackhi
      // 4-7 | 4-7.
      const __m256i sm = _mm256_cvtepu8_epi16(Q4KScalesMins(blk[h] + offsetof(B, scales)));
      const __m256i lo = _mm256_unpacklo_epi16(sm, sm), hi = _mm256_unpackhi_epi16(sm, sm);
      _mm256_store_si256(reinterpret_cast<__m256i*>(o.sc[h]), _mm256_permute2x128_si256(lo, hi, 0x20));
      _mm256_store_si256(reinterpret_cast<__m256i*>(o.off[h]), _mm256_permute2x128_si256(lo, hi, 0x31));
    }
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (int p = 0; p < 4; ++p) {  // qs[32p + i]: column 64p + i (low nibble) and 64p + 32 + i (high)
      const __m256i qa = LoadU(a + offsetof(B, qs) + 32 * p);
      const __m256i qb = LoadU(b + offsetof(B, qs) + 32 * p);
      StorePair<true>(o.w + 128 * p, Fifth(a, 2 * p, _mm256_and_si256(qa, m4)),
                      Fifth(b, 2 * p, _mm256_and_si256(qb, m4)));
      StorePair<true>(o.w + 128 * p + 64, Fifth(a, 2 * p + 1, _mm256_and_si256(_mm256_srli_epi16(qa, 4), m4)),
                      Fifth(b, 2 * p + 1, _mm256_and_si256(_mm256_srli_epi16(qb, 4), m4)));
    }
  }
  // Sub-block s's 32 nibbles of block blk with, for Q5_K, their fifth bits: element l's is bit s of qh[l], moved to
  // bit 4 of its byte (a 16-bit shift by at most 4 keeps it within the byte).
  static HWY_INLINE __m256i Fifth(const uint8_t* HWY_RESTRICT blk, int s, __m256i nibbles) {
    if constexpr (!kFifth) return nibbles;
    const __m256i qh = LoadU(blk + offsetof(BlockQ5_K, qh));
    const __m256i at4 = s <= 4 ? _mm256_slli_epi16(qh, 4 - s) : _mm256_srli_epi16(qh, s - 4);
    return _mm256_or_si256(nibbles, _mm256_and_si256(at4, _mm256_set1_epi8(0x10)));
  }
  static HWY_INLINE void Widen(Block& o) {
    for (int h = 0; h < 2; ++h) {
      for (int k = 0; k < 8; ++k) {
        o.scv[h][k] = _mm256_set1_epi32(o.sc[h][k]);
        o.offv[h][k] = _mm256_set1_epi32(o.off[h][k]);
      }
    }
  }
  static HWY_INLINE void Pair(Block& o) {
    StoreWordPairs(o.psc, o.sc[0], o.sc[1]);
    StoreWordPairs(o.poff, o.off[0], o.off[1]);
  }
  template <bool kPaired>
  static HWY_INLINE __m256 Finish(const Block& o, int h, __m256i isum, __m256i ioff, __m256 dx, __m256 acc) {
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(RowScales<kPaired>(o.d, h), dx), acc);
    return _mm256_fnmadd_ps(_mm256_cvtepi32_ps(ioff), _mm256_mul_ps(RowScales<kPaired>(o.dmin, h), dx), acc);
  }
};
using Q4KTokens = Q45KTokens<BlockQ4_K>;
using Q5KTokens = Q45KTokens<BlockQ5_K>;

struct Q6KTokens {
  static constexpr size_t kBytes = sizeof(BlockQ6_K);
  static constexpr int kQuadsPerSum = 2;
  static constexpr int kQuadsPerScale = 4;  // sub-blocks of 16
  static constexpr int64_t kWideFromTiles = 1;
  struct Block {  // two rows' (h = 0, 1)
    alignas(32) uint8_t w[2 * kQK_K];  // codes 0..63 as bytes, 64 per 32-block (StorePair)
    alignas(32) int32_t sc[2][16];     // [h][sub-block of 16]: its int8 scale in both int16 halves
    alignas(32) int32_t off[2][8];     // [h][32-block]: its two sub-blocks' scales, the low and high int16
    alignas(32) int64_t psc[16], poff[8];  // [sub-block], [32-block]: both rows' words, for the paired tiles
    __m256i scv[2][16], offv[2][8];    // [h][..]: the words in every lane (Widen)
    float d[2];
  };
  static HWY_INLINE void Unpack(const uint8_t* HWY_RESTRICT a, const uint8_t* HWY_RESTRICT b, Block& o) {
    const uint8_t* blk[2] = {a, b};
    __m256i q[2][8];
    for (int h = 0; h < 2; ++h) {
      o.d[h] = Fp16At(blk[h] + offsetof(BlockQ6_K, d));
      const __m256i sc16 = _mm256_cvtepi8_epi16(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[h] + offsetof(BlockQ6_K, scales))));
      _mm256_store_si256(reinterpret_cast<__m256i*>(o.off[h]), sc16);  // int16 scales 0-15: the pairs as words
      // Each scale doubled into a word: unpacklo gives scales 0-3 | 8-11, unpackhi 4-7 | 12-15.
      const __m256i lo = _mm256_unpacklo_epi16(sc16, sc16), hi = _mm256_unpackhi_epi16(sc16, sc16);
      _mm256_store_si256(reinterpret_cast<__m256i*>(o.sc[h]), _mm256_permute2x128_si256(lo, hi, 0x20));
      _mm256_store_si256(reinterpret_cast<__m256i*>(o.sc[h] + 8), _mm256_permute2x128_si256(lo, hi, 0x31));
      Q6KCodes(blk[h], q[h]);
    }
    for (int k = 0; k < 8; ++k) StorePair<true>(o.w + 64 * k, q[0][k], q[1][k]);
  }
  static HWY_INLINE void Widen(Block& o) {
    for (int h = 0; h < 2; ++h) {
      for (int k = 0; k < 16; ++k) o.scv[h][k] = _mm256_set1_epi32(o.sc[h][k]);
      for (int k = 0; k < 8; ++k) o.offv[h][k] = _mm256_set1_epi32(o.off[h][k]);
    }
  }
  static HWY_INLINE void Pair(Block& o) {
    StoreWordPairs(o.psc, o.sc[0], o.sc[1]);
    StoreWordPairs(o.psc + 8, o.sc[0] + 8, o.sc[1] + 8);
    StoreWordPairs(o.poff, o.off[0], o.off[1]);
  }
  template <bool kPaired>
  static HWY_INLINE __m256 Finish(const Block& o, int h, __m256i isum, __m256i ioff, __m256 dx, __m256 acc) {
    const __m256i total = _mm256_sub_epi32(isum, _mm256_slli_epi32(ioff, 5));  // the codes' -32
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(total), _mm256_mul_ps(RowScales<kPaired>(o.d, h), dx), acc);
  }
};

// The vectors of R rows in one tile: R, or (R + 1) / 2 when paired (an odd R's last pair holds its last row twice).
// Vector v holds row v (pair v / 2's row v % 2) in all lanes, or, paired, pair v in alternate lanes.
template <size_t R, bool kPaired>
inline constexpr size_t kTileVectors = kPaired ? (R + 1) / 2 : R;

// Quad j of a 32-block's 64 interleaved codes w (StorePair<kInOrder>) for vector v: the row's 4 bytes in all lanes,
// or, paired, the pair's 8 bytes in alternate lanes.
template <bool kPaired, bool kInOrder>
HWY_INLINE __m256i TileQuad(const uint8_t* HWY_RESTRICT w, size_t v, int j) {
  const uint8_t* p = w + 8 * (kInOrder ? j : QuadSlot(j));
  if constexpr (kPaired) {
    int64_t q;
    std::memcpy(&q, p, 8);
    return _mm256_set1_epi64x(q);
  }
  int32_t q;
  std::memcpy(&q, p + 4 * (v % 2), 4);
  return _mm256_set1_epi32(q);
}

// Scale or offset word i of a Block for vector v: words[h][i] broadcast, or its Widened vector wide[h][i], or,
// paired, the pair's words pairs[i] in alternate lanes.
template <bool kPaired, bool kWide, size_t N>
HWY_INLINE __m256i TileWord(const int32_t (&words)[2][N], const int64_t (&pairs)[N], const __m256i (&wide)[2][N],
                            size_t v, int i) {
  if constexpr (kPaired) return _mm256_set1_epi64x(pairs[i]);
  if constexpr (kWide) return wide[v % 2][i];
  return _mm256_set1_epi32(words[v % 2][i]);
}

// One block of R rows (their pairs wb) times one tile: acc[v * acc_stride] += the block's products (kTileVectors).
template <class W, size_t R, bool kPaired, bool kWide>
HWY_INLINE void TileBlock(const typename W::Block* HWY_RESTRICT blocks, const int8_t* HWY_RESTRICT xq,
                          const int16_t* HWY_RESTRICT xs, const float* HWY_RESTRICT dx, __m256* acc,
                          size_t acc_stride) {
  constexpr size_t V = kTileVectors<R, kPaired>;
  constexpr int64_t T = kTokenTile;
  // The blocks are the same for every tile of a pass; hiding that keeps GCC from loading all their quads ahead of
  // the tiles' loop into spilled scalars (Matmul/Q6_K/768x2048/tok8 at half the speed).
  const typename W::Block* wb = blocks;
  asm("" : "+r"(wb));
  __m256i isum[V], ioff[V];
  for (size_t v = 0; v < V; ++v) isum[v] = _mm256_setzero_si256(), ioff[v] = _mm256_setzero_si256();
  for (int k = 0; k < 8; ++k) {  // 32-block k: its offset term, then its 8 quads
    const __m256i sv = LoadU(xs + k * 2 * T);
    for (size_t v = 0; v < V; ++v) {
      const typename W::Block& o = wb[kPaired ? v : v / 2];
      const __m256i mins = TileWord<kPaired, kWide>(o.off, o.poff, o.offv, v, k);
      ioff[v] = _mm256_add_epi32(ioff[v], _mm256_madd_epi16(sv, mins));
    }
    for (int j0 = 0; j0 < 8; j0 += W::kQuadsPerSum) {
      __m256i s16[V];
      for (size_t v = 0; v < V; ++v) s16[v] = _mm256_setzero_si256();
      for (int j = j0; j < j0 + W::kQuadsPerSum; ++j) {
        const __m256i xv = LoadU(xq + (8 * k + j) * 4 * T);
        for (size_t v = 0; v < V; ++v) {
          const __m256i wq = TileQuad<kPaired, true>(wb[kPaired ? v : v / 2].w + 64 * k, v, j);
          s16[v] = _mm256_add_epi16(s16[v], _mm256_maddubs_epi16(wq, xv));
          // Keeps the sums in this order: GCC otherwise reassociates them into a tree that holds all the
          // products at once and spills them to the stack.
          asm("" : "+x"(s16[v]));
        }
      }
      const int scale = (8 * k + j0) / W::kQuadsPerScale;
      for (size_t v = 0; v < V; ++v) {
        const typename W::Block& o = wb[kPaired ? v : v / 2];
        const __m256i sc = TileWord<kPaired, kWide>(o.sc, o.psc, o.scv, v, scale);
        isum[v] = _mm256_add_epi32(isum[v], _mm256_madd_epi16(s16[v], sc));
      }
    }
  }
  const __m256 dxv = _mm256_loadu_ps(dx);
  for (size_t v = 0; v < V; ++v) {
    acc[v * acc_stride] = W::template Finish<kPaired>(wb[kPaired ? v : v / 2], static_cast<int>(v % 2), isum[v],
                                                      ioff[v], dxv, acc[v * acc_stride]);
  }
}

// With ~8 tokens (a routed expert's share of a prompt) a token tile consumes ~3 GB/s of weights per thread, so
// it asks for the next tile's rows while it computes the current ones: at step b of its walk through R rows
// (read in order), the b-th `chunk` of the rows `bytes` further on, chunk = the bytes of the R rows that one step
// reads. 128-token prompt of the Qwen3-30B-A3B shape at -t 2, alternating runs, 12.9-15.3 tok/s with against
// 11.4-13.2 without. The address is formed as an integer, as in PrefetchAhead.
HWY_INLINE void PrefetchNextRows(const uint8_t* row0, size_t bytes, size_t chunk, int64_t b) {
  const uintptr_t next = reinterpret_cast<uintptr_t>(row0) + bytes + static_cast<size_t>(b) * chunk;
  for (size_t off = 0; off < chunk; off += 64) hwy::Prefetch(reinterpret_cast<const uint8_t*>(next + off));
}
// `bytes` for the one-token kernels (decode), which read fast enough that the next group of R rows is too close
// when rows are short (a 768-column MXFP4 row is 408 bytes): the first group at least kPrefetchAhead bytes on.
HWY_INLINE size_t RowsAhead(size_t group_bytes) {
  return group_bytes * ((kPrefetchAhead + group_bytes - 1) / group_bytes);
}

// The tokens in tile g of n_tok (1..kTokenTile).
HWY_INLINE int64_t TileTokens(int64_t g, int64_t n_tok) { return std::min(kTokenTile, n_tok - g * kTokenTile); }

// acc[v][g] for the pass's tiles g < ng (tile g0 + g) into y[token * y_stride + r], the padding lanes dropped:
// lane t of acc[r][g] is token t's row r, or, in a paired tile, lane 2t + h of acc[p][g] token t's row 2p + h.
template <size_t R, int64_t kTiles>
HWY_INLINE void StoreTiles(const __m256 (&acc)[R][kTiles], int64_t g0, int64_t ng, int64_t n_tok,
                           float* HWY_RESTRICT y, int64_t y_stride) {
  for (int64_t g = 0; g < ng; ++g) {
    const int64_t t0 = (g0 + g) * kTokenTile, tokens = TileTokens(g0 + g, n_tok);
    const bool paired = paired_tile(tokens);
    for (size_t r = 0; r < R; ++r) {
      alignas(32) float out[8];
      _mm256_store_ps(out, acc[paired ? r / 2 : r][g]);
      for (int64_t t = 0; t < tokens; ++t)
        y[(t0 + t) * y_stride + static_cast<int64_t>(r)] = paired ? out[2 * t + r % 2] : out[t];
    }
  }
}

// The token tiles' driver, for R rows from row0 (row_bytes apart) of nb weight blocks: the tiles in passes of up
// to 16 (R * 16 float accumulators, 128 tokens), each block of the R rows prepared once per pass (prepare(b, full,
// paired): the pass's full tiles, whether it has a paired one) and multiplied with every tile of the pass
// (multiply(std::bool_constant<paired>, tile, b, acc, acc_stride)).
template <size_t R, class Prepare, class Multiply>
HWY_INLINE void TilePasses(const uint8_t* HWY_RESTRICT row0, size_t row_bytes, int64_t nb, int64_t n_tok,
                           float* HWY_RESTRICT y, int64_t y_stride, const Prepare& prepare, const Multiply& multiply) {
  const int64_t tiles = padded_tokens(n_tok) / kTokenTile;
  const size_t block_bytes = R * (row_bytes / static_cast<size_t>(nb));  // the R rows' bytes of one block
  constexpr int64_t kTilesPerPass = 16;
  for (int64_t g0 = 0; g0 < tiles; g0 += kTilesPerPass) {
    const int64_t ng = std::min(kTilesPerPass, tiles - g0);
    const bool paired = paired_tile(TileTokens(g0 + ng - 1, n_tok));  // only the last tile can be
    __m256 acc[R][kTilesPerPass];  // [row, or pair][tile]: lanes as StoreTiles reads them
    for (int64_t g = 0; g < ng; ++g)
      for (size_t r = 0; r < R; ++r) acc[r][g] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      if (g0 == 0) PrefetchNextRows(row0, R * row_bytes, block_bytes, b);
      prepare(b, ng - paired, paired);
      for (int64_t g = 0; g < ng - paired; ++g) multiply(std::false_type{}, g0 + g, b, &acc[0][g], kTilesPerPass);
      if (paired) multiply(std::true_type{}, g0 + ng - 1, b, &acc[0][ng - 1], kTilesPerPass);
    }
    StoreTiles<R, kTilesPerPass>(acc, g0, ng, n_tok, y, y_stride);
  }
}

// The pair p of R rows from row0: rows 2p and 2p + 1, or the last row twice.
HWY_INLINE const uint8_t* PairRow(const uint8_t* row0, size_t row_bytes, size_t R, size_t p, int h) {
  return row0 + std::min(2 * p + static_cast<size_t>(h), R - 1) * row_bytes;
}

template <class W, size_t R>
HWY_INLINE void TokenTile(const uint8_t* HWY_RESTRICT row0, size_t row_bytes, const Q8Rows& x, int64_t n_tok,
                          float* HWY_RESTRICT y, int64_t y_stride) {
  constexpr int64_t T = kTokenTile;
  constexpr size_t P = (R + 1) / 2;
  const int64_t cols = x.cols, nb = cols / kQK_K, quads = cols / 4, blocks32 = cols / 32;
  typename W::Block wb[P];
  bool wide = false;  // this pass's scales Widened
  TilePasses<R>(
      row0, row_bytes, nb, n_tok, y, y_stride,
      [&](int64_t b, int64_t full, bool paired) HWY_ATTR {
        wide = full >= W::kWideFromTiles;
        const size_t at = static_cast<size_t>(b) * W::kBytes;
        for (size_t p = 0; p < P; ++p) {
          W::Unpack(PairRow(row0, row_bytes, R, p, 0) + at, PairRow(row0, row_bytes, R, p, 1) + at, wb[p]);
          if (wide) W::Widen(wb[p]);
          if (paired) W::Pair(wb[p]);
        }
      },
      [&](auto paired, int64_t tile, int64_t b, __m256* acc, size_t acc_stride) HWY_ATTR {
        const int8_t* xq = x.qt + (tile * quads + b * (kQK_K / 4)) * 4 * T;
        const int16_t* xs = x.st + (tile * blocks32 + b * 8) * 2 * T;
        const float* dx = x.dt + (tile * nb + b) * T;
        if constexpr (decltype(paired)::value) {
          TileBlock<W, R, true, false>(wb, xq, xs, dx, acc, acc_stride);
        } else if (wide) {
          TileBlock<W, R, false, true>(wb, xq, xs, dx, acc, acc_stride);
        } else {
          TileBlock<W, R, false, false>(wb, xq, xs, dx, acc, acc_stride);
        }
      });
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
  // The 16 bytes go to both 128-bit lanes with the load itself (vbroadcasti128); one variable shift leaves the
  // low nibbles in the low lane and the high ones in the high lane: two operations where shifting, masking twice
  // and inserting took four. bench_matvec MatvecHot/MXFP4/768x2048, 1 thread, alternating binaries: 5.4-5.7 ->
  // 6.9-8.6 GB/s.
  static HWY_INLINE __m256i Nibbles(const uint8_t* b) {
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + offsetof(Block, qs)));
    const __m256i v = _mm256_broadcastsi128_si256(q);
    return _mm256_and_si256(_mm256_srlv_epi32(v, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)), _mm256_set1_epi8(0x0f));
  }
  static HWY_INLINE __m256i Weights(const uint8_t* b, __m256i tbl) { return _mm256_shuffle_epi8(tbl, Nibbles(b)); }
#if HWY_TARGET == HWY_AVX3_DL
  // The same with vpermb (AVX512-VBMI), which reads only the low 5 bits of each index: tbl holds the 16 values in
  // both halves, so the nibbles need no mask (bit 4, the neighbouring nibble's bit, picks the same value).
  static HWY_INLINE __m256i WeightsVbmi(const uint8_t* b, __m256i tbl) {
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + offsetof(Block, qs)));
    const __m256i v = _mm256_broadcastsi128_si256(q);
    return _mm256_permutexvar_epi8(_mm256_srlv_epi32(v, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)), tbl);
  }
#endif
};

// Q4_0 and MXFP4 (gpt-oss's experts) with their codes made unsigned, as pmaddubsw's first operand must be, by an
// offset o: Q4_0's nibble itself (value + 8), MXFP4's doubled value + 12 (0..24). The offset's share, o times
// the activation codes' sum, is taken off in integers, so the block sums stay exact: sum (w + o) x - o sum x =
// sum w x. That spends no sign operations on the activations (Block32Tile with x.c, TileBlock32): one token's
// product, bench_matvec MatvecHot/MXFP4/768x2048 at 1 thread, six alternating runs, 8.5-10.9 -> 9.3-11.6 GB/s;
// gpt-oss-20b decode at -t 2, three alternating runs, 4.98 / 5.83 / 6.18 -> 5.19 / 6.10 / 6.87 tok/s.
// kQuadsPerSum: the quads (4 codes) whose pmaddubsw pairs can add in int16, at most (2^15 - 1) / (2 * 127 * max
// code): Q4_0 8, MXFP4 4 (4 * 2 * 24 * 127 = 24384; 8 would overflow).
template <class Block, const int8_t (&kValues)[16], bool kE8M0, int kOff, int kQuads>
struct OffsetNibbles {
  using W = NibbleWeights<Block, kValues, kE8M0>;  // the same weights with signed codes
  using BlockType = Block;
  static constexpr size_t kBytes = W::kBytes;
  static constexpr int kOffset = kOff;
  static constexpr int kQuadsPerSum = kQuads;
  static constexpr bool CodesFit() {
    for (int8_t v : kValues) {
      if (v + kOff < 0 || (v + kOff) * 2 * 127 * kQuads > 32767) return false;
    }
    return 8 % kQuads == 0;
  }
  static_assert(CodesFit(), "offset codes must be unsigned and their int16 sums must not saturate");
  static constexpr bool kIdentity = [] {  // the offset codes are the nibbles (Q4_0): no table lookup
    for (int i = 0; i < 16; ++i) {
      if (kValues[i] + kOff != i) return false;
    }
    return true;
  }();
  static constexpr bool kE8M0Scale = kE8M0;
  static HWY_INLINE __m256i Table() { return _mm256_add_epi8(W::Table(), _mm256_set1_epi8(kOff)); }
  static HWY_INLINE float Scale(const uint8_t* b) { return W::Scale(b); }
  static HWY_INLINE __m256i Weights(const uint8_t* b, __m256i tbl) {
    if constexpr (kIdentity) return W::Nibbles(b);
    return W::Weights(b, tbl);
  }
};
using Q4_0Tokens = OffsetNibbles<BlockQ4_0, kQ4_0Levels, false, 8, 8>;
using MXFP4Tokens = OffsetNibbles<BlockMXFP4, kMxfp4DoubledValues, true, 12, 4>;

// Q5_0 (llama-quantize's fallback for rows that 256-blocks do not divide: Gemma 4's 704-wide experts in a Q4_K_M
// file): Q4_0's nibbles (element j < 16 the low nibble of qs[j], j + 16 its high one, so byte j of Nibbles is
// element j) with bit j of the little-endian qh as element j's fifth bit. The code nibble | bit << 4 is the value
// + 16: already unsigned (0..31), offset 16; 4 quads per int16 sum (4 * 2 * 31 * 127 = 31496). Before, Q5_0 took
// the portable int16 kernels (DecQ5Legacy), where Gemma-4-26B-A4B-shaped Q4_K_M decode spent 10% of its time.
// bench_matvec GB/s on a 2-vCPU AMD EPYC (Zen 4, AVX3_DL), DecQ5Legacy -> these, 3 alternating runs, 1 / 2 threads:
// Matvec/Q5_0/2880x2880 9.6-9.9 / 12.3-18.3 -> 17.3-18.6 / 28.8-31.0, 768x2048 7.5-9.6 / 14.8-16.8 -> 17.2-18.4
// / 20.8-26.9, 2048x768 9.3-9.4 / 11.9-13.9 -> 14.7-17.4 / 23.3-28.1. Two blocks per 512-bit vector, as
// Mxfp4Rows512 (the fifth bits one masked add), was slower there: MatvecHot/Q5_0/768x2048 at 1 thread 19.0-19.6
// -> 18.0-18.3 GB/s in 4 of 4 alternating runs, 2880x2880 17.9-18.3 -> 17.0-17.6.
struct Q5_0Tokens {
  using Nib = NibbleWeights<BlockQ5_0, kQ4_0Levels, false>;
  using BlockType = BlockQ5_0;
  static constexpr size_t kBytes = sizeof(BlockQ5_0);
  static constexpr int kOffset = 16;
  static constexpr int kQuadsPerSum = 4;
  static_assert(kQuadsPerSum * 2 * 31 * 127 <= 32767 && 8 % kQuadsPerSum == 0);
  static HWY_INLINE __m256i Table() { return _mm256_setzero_si256(); }
  static HWY_INLINE float Scale(const uint8_t* b) { return Fp16At(b); }
  static HWY_INLINE __m256i Weights(const uint8_t* b, __m256i) {
    uint32_t qh;
    std::memcpy(&qh, b + offsetof(BlockQ5_0, qh), 4);
    const __m256i nib = Nib::Nibbles(b);
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
    // AVX512BW: qh is the byte mask itself; 16 added where its bit is set (one masked add).
    return _mm256_mask_add_epi8(nib, _cvtu32_mask32(qh), nib, _mm256_set1_epi8(16));
#else
    // Byte j takes qh's byte j / 8 (pshufb within each 128-bit lane of the broadcast word), keeps bit j % 8, and
    // becomes 16 where that bit is set.
    const __m256i spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(static_cast<int>(qh)),
        _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303));
    const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201));
    const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
    return _mm256_or_si256(nib, _mm256_and_si256(set, _mm256_set1_epi8(16)));
#endif
  }
  // The same weights as signed values (-16..15), for the row kernels without the activation pair sums (x.c).
  struct W {
    static constexpr size_t kBytes = sizeof(BlockQ5_0);
    static HWY_INLINE __m256i Table() { return _mm256_setzero_si256(); }
    static HWY_INLINE float Scale(const uint8_t* b) { return Fp16At(b); }
    static HWY_INLINE __m256i Weights(const uint8_t* b, __m256i t) {
      return _mm256_sub_epi8(Q5_0Tokens::Weights(b, t), _mm256_set1_epi8(16));
    }
  };
};

// The code offset o of type t's kernels here (Q8Rows::c), 0 for types that take none.
inline int CodeOffset(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_0: return Q4_0Tokens::kOffset;
    case GgmlType::Q5_0: return Q5_0Tokens::kOffset;
    case GgmlType::MXFP4: return MXFP4Tokens::kOffset;
    default: return 0;
  }
}

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
    for (size_t t = 0; t < NT; ++t) {
      const int64_t tok = t0 + static_cast<int64_t>(t);
      const __m256i xq = LoadU(x.q + tok * cols + b * 32);
      __m256i pairs;
      if constexpr (requires { W::kOffset; }) {  // unsigned codes: the offset's share of each pair comes off
        pairs = _mm256_sub_epi16(_mm256_maddubs_epi16(w, xq), LoadU(x.c + tok * (cols / 2) + b * 16));
      } else {  // signed codes: |w| as unsigned bytes, the sign moved onto x
        pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(xq, w));
      }
      const __m256i sumi = _mm256_madd_epi16(pairs, ones);
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

// Whether W is OffsetNibbles of a type with e8m0 scales (MXFP4).
template <class W>
inline constexpr bool kE8M0Offset = [] {
  if constexpr (requires { W::kE8M0Scale; }) return W::kE8M0Scale;
  return false;
}();

// One token (decode) of R rows of 32-blocks at a time: the token's codes, pair offsets and scale are loaded once
// for the R rows, and the R rows' multiply-add chains (one accumulator per row) overlap, where Block32Tile<W, 1>
// alternates two accumulators of one row. The group of rows at least kPrefetchAhead bytes on is prefetched as
// these are read (RowsAhead). For MXFP4 and Q4_0, whose nibble decoding makes the one-row kernel compute-bound:
// bench_matvec GB/s, medians of three alternating runs, Block32Tile<W, 1> -> these, ReadBandwidth 16.0 / 23.4 at
// 1 / 2 threads: MatvecHot/MXFP4/768x2048 11.8 / 21.2 -> 13.5 / 24.9; Matvec/MXFP4/2048x768 9.4 / 18.1 -> 12.1 /
// 20.6; Matvec/MXFP4/2048x4096 10.7 / 17.8 -> 12.6 / 21.7; Matvec/Q4_0/768x2048 10.3 / 15.7 -> 11.7 / 19.3. Q8_0
// is bound by memory either way; read in one stream its rows went 8% slower here than by Block32Tile (six runs),
// but in two streams (Block32OneToken) faster: Block32Tile -> these, GB/s at 1 / 2 threads, medians of 6 runs
// interleaved in one process, Matvec/Q8_0/2048x4096 11.8 / 20.4 -> 12.9 / 23.1, 2880x2880 12.1 / 22.4 -> 14.1 /
// 23.4 (2 threads, again: 18.5 -> 20.8), 2048x768 13.0 / 22.8 -> 12.6 / 23.1, 151936x2048 at 2 threads 22.3 ->
// 22.7.
// rows[r]: row r's bytes, in runs of R / 2 consecutive rows (one from each stream of TwoStreamRows; R = 1: the
// row), each run prefetching its own stream's next rows; y[r]: row r's result.
template <class W, size_t R>
HWY_INLINE void Block32Rows(const uint8_t* const (&rows)[R], size_t row_bytes, const Q8Rows& x,
                            float* const (&y)[R]) {
  constexpr size_t kRun = R == 1 ? 1 : R / 2;
  const int64_t nb = x.cols / 32;
  const size_t ahead = RowsAhead(kRun * row_bytes);
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i tbl = W::Table();
  // Q8_0: two accumulators per row, the even blocks' and the odd ones', added at the end, as Block32Tile<W, NT>
  // sums, so on AVX2 and AVX-512 without VNNI a row's result is the same bits here as in a product of several
  // tokens. With AVX512-VNNI several tokens take the token tiles (vnni512::Block32Lanes, one multiply-add per
  // block), so there, as for the K-quants, decode and prefill round differently. The nibble types' lone tokens take
  // the token tiles; they keep one accumulator (Matvec/MXFP4/2048x768 at 2 threads was slower with two in 3 of 3
  // alternating runs, 19.6-21.3 -> 15.8-17.5 GB/s).
  constexpr size_t kChains = std::is_same_v<W, BlockQ8_0Weights> ? 2 : 1;
  __m256 acc[kChains][R];
  for (size_t c = 0; c < kChains; ++c)
    for (size_t r = 0; r < R; ++r) acc[c][r] = _mm256_setzero_ps();
  const auto block = [&](int64_t b, __m256 (&a)[R]) HWY_ATTR {
    const __m256i xq = LoadU(x.q + b * 32);
    const float dx = x.d[b];
    __m256i xc;
    if constexpr (requires { W::kOffset; }) {
      xc = LoadU(x.c + b * 16);
      // With VNNI the offset's share as int32 quad sums, negated, where vpdpbusd starts each row's sum: one
      // operation per row and block where pmaddubsw, the subtraction and pmaddwd took three. MatvecHot/MXFP4/
      // 768x2048 at 1 thread, 15 alternating runs on a 2.1 GHz Xeon: faster in 11, medians 7.6 -> 8.2 GB/s;
      // gpt-oss-20b decode at -t 2 faster in 3 of 4 alternating runs (medians 7.2 -> 7.4 tok/s).
      if constexpr (MOETIER_VNNI) xc = _mm256_madd_epi16(xc, _mm256_set1_epi16(-1));
    }
    const __m256 dxv = _mm256_set1_ps(dx);
    for (size_t r = 0; r < R; ++r) {
      const uint8_t* blk = rows[r] + static_cast<size_t>(b) * W::kBytes;
      __m256i w;
      __m256 ddx;  // the weight block's scale times the activation block's
      // With VNNI (and so VBMI), MXFP4: the scale broadcast from its table by the load itself and multiplied in a
      // vector (the product is the same float), and the codes by vpermb: six operations on the vector ports per
      // block and row where the scalar multiply, the register broadcast and pshufb's mask made eight. llvm-mca
      // (icelake-server) on four rows' block: 12.1 -> 10.1 cycles; MatvecHot/MXFP4/768x2048 at 1 thread, 12
      // alternating runs on a noisy 2.1 GHz Xeon: faster in 8 (medians of the last 6: 11.2 -> 12.7 GB/s);
      // Matvec/MXFP4/2048x768 at 2 threads against ReadBandwidth measured beside it, 6 alternating runs: median
      // 85% -> 95%.
      if constexpr (MOETIER_VNNI && kE8M0Offset<W>) {
        ddx = _mm256_mul_ps(_mm256_broadcast_ss(&kE8M0Half[blk[0]]), dxv);
        w = W::W::WeightsVbmi(blk, tbl);
      } else {
        ddx = _mm256_set1_ps(W::Scale(blk) * dx);
        w = W::Weights(blk, tbl);
      }
      __m256i sumi;
      if constexpr (requires { W::kOffset; }) {  // as in Block32Tile
#if MOETIER_VNNI
        sumi = DpBusd(xc, w, xq);
#else
        sumi = _mm256_madd_epi16(_mm256_sub_epi16(_mm256_maddubs_epi16(w, xq), xc), ones);
#endif
      } else {
        sumi = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(xq, w)), ones);
      }
      a[r] = _mm256_fmadd_ps(ddx, _mm256_cvtepi32_ps(sumi), a[r]);
    }
  };
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    for (size_t r = 0; r < R; r += kRun) PrefetchNextRows(rows[r], ahead, 2 * kRun * W::kBytes, b / 2);
    block(b, acc[0]);
    block(b + 1, acc[kChains - 1]);
  }
  if (b < nb) {
    for (size_t r = 0; r < R; r += kRun) PrefetchNextRows(rows[r], ahead, 2 * kRun * W::kBytes, b / 2);
    block(b, acc[0]);
  }
  for (size_t r = 0; r < R; ++r) {
    if constexpr (kChains == 2) {
      *y[r] = Hsum(_mm256_add_ps(acc[0][r], acc[1][r]));
    } else {
      *y[r] = Hsum(acc[0][r]);
    }
  }
}

#if HWY_TARGET == HWY_AVX3_DL
// e8m0_to_fp32_half (quant/e8m0.h) of 16 exponent bytes (the low 16 bytes of e8), built in integers: (e - 1) << 23,
// or (1 << 21) << e for the subnormals of e < 2. The same floats as the table kE8M0Half, with no gather: for the 16
// blocks of a chunk of a row (Mxfp4Rows512) and for a rows16 block's 16 rows (vnni512::Rows16Mxfp4Scales).
HWY_INLINE __m512 E8M0HalfScales(__m128i e8) {
  const __m512i e = _mm512_cvtepu8_epi32(e8);
  const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
  const __mmask16 subnormal = _mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(2));
  return _mm512_castsi512_ps(_mm512_mask_sllv_epi32(normal, subnormal, _mm512_set1_epi32(1 << 21), e));
}

// One token of R MXFP4 rows (offset codes, MXFP4Tokens) in 512-bit vectors, in chunks of 16 blocks of each row.
// The sum of a row: per block b one exact int32 sum i_b of its 32 products, converted once and added by one fused
// multiply-add into chain b % 16, acc_{b % 16} = fma(d_b * dx_b, i_b, acc_{b % 16}) in block order, then the 16
// chains added in halves as _mm512_reduce_add_ps adds its lanes (j and j + 8, then j + 4, j + 2, j + 1). The rows16
// kernel (Mxfp4OneTokenGroups) keeps the 16 chains of 16 rows in 16 registers and so sums the same way at one
// conversion and one multiply-add per block of 16 rows, where summing quad lanes (this kernel's former order, and
// Block32Rows') took 8 of each. Both forms of the codes (offset, or signed where the caller gave no pair sums) come
// here, so the result does not depend on which the caller chose.
// Per pair of blocks A, B (b, b + 1) of a row: A's 16 code bytes broadcast to the low half of a vector and B's to
// the high half by the loads themselves, shifted by 0 / 4 bits per 128-bit lane (vpsrlvq), give A's 32 codes and
// B's side by side, which one vpermb (bits 4-5 of its index, the neighbouring nibble's, pick the same value: the
// table is in each 16 bytes) turns into offset codes, and one vpdpbusd with the pair's 64 activation codes makes 16
// quad sums, 8 per block. The 8 pairs' quad sums of a chunk are added into its 16 block sums by a tree of 21 shuffles
// and adds and one vpermd, less the offset's share (12 times each block's activation sum, from Q8Rows::sums: once
// per chunk for all R rows); the chunk's 16 scales come from its exponent bytes by 4 loads and 2 vpermt2b
// (E8M0HalfScales). About 4.5 vector operations per block and row, where the former order took 6 (per block two
// scale loads, a multiply, a conversion and a multiply-add, and per pair the quad offsets' load and vpmaddwd).
// bench_matvec MatvecHot/MXFP4/768x2048 on a 2-vCPU AMD EPYC of family 1Ah (Zen 5), 3 alternating runs, former order
// -> this, GB/s at 1 / 2 threads: 26.5-27.0 / 38.7-39.1 -> 27.2-27.3 / 43.4-44.5.
// Zen 4 (512-bit operations run as two 256-bit halves) takes it too, though Block32Rows' 256-bit quad lanes read a
// cache-resident matrix faster there: the rows16 kernel that sums in this order is what Zen 4 runs fastest of all,
// and a matrix must give the same bits in either layout (a streamed expert's file bytes, a resident one's copy).
// bench_matvec on a 2-vCPU AMD EPYC of family 19h, 2 alternating runs, medians of 3, GB/s at 1 / 2 threads,
// Block32Rows -> this -> rows16: MatvecHot/MXFP4/768x2048 15.2-18.7 / 30.4-33.0 -> 14.6-15.6 / 24.2-26.5 ->
// 35.4-44.0 / 47.6-74.1; from DRAM (Matvec/MXFP4/2880x2880 at 2 threads) 21.7-22.5 -> 20.5-21.5 -> 27.8-31.3.
// rows, y as Block32Rows.
template <size_t R>
HWY_INLINE void Mxfp4Rows512(const uint8_t* const (&rows)[R], size_t row_bytes, const Q8Rows& x,
                             float* const (&y)[R]) {
  using W = MXFP4Tokens;
  constexpr size_t kB = W::kBytes;
  constexpr size_t kRun = R == 1 ? 1 : R / 2;
  const int64_t nb = x.cols / 32;
  const size_t ahead = RowsAhead(kRun * row_bytes);
  const __m512i tbl = _mm512_broadcast_i32x4(_mm256_castsi256_si128(W::Table()));
  const __m512i shifts = _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4);
  const __m512i offset = _mm512_set1_epi16(W::kOffset);
  // The exponent bytes of a chunk's 16 blocks, kB apart: from its first 256 bytes (blocks 0-7 in bytes 0-119,
  // 8-15 in 136-255), two vpermt2b of two loads each.
  alignas(64) static constexpr uint8_t kExpLo[64] = {0, 17, 34, 51, 68, 85, 102, 119};
  alignas(64) static constexpr uint8_t kExpHi[64] = {0, 0, 0, 0, 0, 0, 0, 0, 8, 25, 42, 59, 76, 93, 110, 127};
  const __m512i exp_lo = _mm512_load_si512(kExpLo), exp_hi = _mm512_load_si512(kExpHi);
  const auto codes = [](const uint8_t* p) HWY_ATTR { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); };
  __m512 acc[R];
  for (size_t r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t c = 0; c < nb; c += 16) {
    const int64_t m = std::min<int64_t>(16, nb - c);  // blocks in this chunk
    const __mmask16 present = static_cast<__mmask16>((1u << m) - 1);
    // The codes' offset times each block's activation sum (its two sums of 16), taken off its sum once per row.
    const __m512i off = _mm512_madd_epi16(
        _mm512_maskz_loadu_epi16(static_cast<__mmask32>((uint64_t{1} << (2 * m)) - 1), x.sums + 2 * c), offset);
    // Quad sums of pair p of each row (p < 8), added up the tree as they come: level 1 after odd p, level 2
    // after p = 3 and 7, level 3 after 7.
    __m512i q1[R], q2[R], q3[R], sums[R];
#pragma GCC unroll 8
    for (int p = 0; p < 8; ++p) {
      const int64_t b = c + 2 * p;
      __m512i pq[R];
      if (2 * p < m) {
        const bool both = 2 * p + 1 < m;  // else b alone: the high half's activation codes zero, B's bytes not read
        const __mmask16 hi = both ? 0xff00 : 0;
        for (size_t r = 0; r < R; r += kRun) PrefetchNextRows(rows[r], ahead, 2 * kRun * kB, b / 2);
        const __m512i xq = _mm512_maskz_loadu_epi8(both ? ~__mmask64{0} : 0xffffffffu, x.q + b * 32);
        for (size_t r = 0; r < R; ++r) {
          const uint8_t* blk = rows[r] + static_cast<size_t>(b) * kB;
          const uint8_t* next = both ? blk + kB : blk;
          const __m512i q = _mm512_mask_broadcast_i32x4(_mm512_broadcast_i32x4(codes(blk + offsetof(BlockMXFP4, qs))),
                                                        hi, codes(next + offsetof(BlockMXFP4, qs)));
          pq[r] = DpBusd(_mm512_setzero_si512(), _mm512_permutexvar_epi8(_mm512_srlv_epi64(q, shifts), tbl), xq);
        }
      } else {
        for (size_t r = 0; r < R; ++r) pq[r] = _mm512_setzero_si512();
      }
      for (size_t r = 0; r < R; ++r) {
        if (p % 2 == 0) {
          q1[r] = pq[r];
          continue;
        }
        // Level 1: per 128-bit lane [a0 + a2, b0 + b2, a1 + a3, b1 + b3] of the pairs a = p - 1, b = p.
        const __m512i l1 = _mm512_add_epi32(_mm512_unpacklo_epi32(q1[r], pq[r]), _mm512_unpackhi_epi32(q1[r], pq[r]));
        if (p % 4 == 1) {
          q2[r] = l1;
          continue;
        }
        // Level 2: element k of 128-bit lane L, the sum of pair p - 3 + k's lane L.
        const __m512i l2 = _mm512_add_epi32(_mm512_unpacklo_epi64(q2[r], l1), _mm512_unpackhi_epi64(q2[r], l1));
        if (p == 3) {
          q3[r] = l2;
          continue;
        }
        // Level 3: lanes L0 + L1 (the pairs' first blocks) and L2 + L3 (their second) of pairs 0-3, then of 4-7:
        // element 4k + j holds block 2j (k = 0), 2j + 1 (1), 8 + 2j (2), 9 + 2j (3); vpermd puts them in order.
        const __m512i l3 = _mm512_add_epi32(_mm512_shuffle_i32x4(q3[r], l2, _MM_SHUFFLE(2, 0, 2, 0)),
                                            _mm512_shuffle_i32x4(q3[r], l2, _MM_SHUFFLE(3, 1, 3, 1)));
        sums[r] = _mm512_sub_epi32(
            _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15), l3), off);
      }
    }
    const __m512 dx = _mm512_maskz_loadu_ps(present, x.d + c);
    const size_t chunk_bytes = static_cast<size_t>(m) * kB;
    const auto part = [&](size_t i) HWY_ATTR {  // bytes [64 i, 64 i + 64) of the chunk that are in it
      return chunk_bytes <= 64 * i ? __mmask64{0}
             : chunk_bytes >= 64 * i + 64 ? ~__mmask64{0}
                                          : (__mmask64{1} << (chunk_bytes - 64 * i)) - 1;
    };
    const __mmask64 m0 = part(0), m1 = part(1), m2 = part(2), m3 = part(3);
    for (size_t r = 0; r < R; ++r) {
      const uint8_t* at = rows[r] + static_cast<size_t>(c) * kB;
      const __m512i lo = _mm512_permutex2var_epi8(_mm512_maskz_loadu_epi8(m0, at), exp_lo,
                                                  _mm512_maskz_loadu_epi8(m1, at + 64));
      const __m512i hi = _mm512_permutex2var_epi8(_mm512_maskz_loadu_epi8(m2, at + 128), exp_hi,
                                                  _mm512_maskz_loadu_epi8(m3, at + 192));
      const __m128i e = _mm512_castsi512_si128(_mm512_mask_blend_epi8(0xff00, lo, hi));
      acc[r] = _mm512_mask3_fmadd_ps(_mm512_mul_ps(E8M0HalfScales(e), dx), _mm512_cvtepi32_ps(sums[r]), acc[r],
                                     present);
    }
  }
  for (size_t r = 0; r < R; ++r) *y[r] = _mm512_reduce_add_ps(acc[r]);
}
#endif

// Rows r0 .. r1 - 1 of one token by Block32Rows (MXFP4 with VNNI and VBMI: Mxfp4Rows512), four at a time: two
// consecutive rows of each of two streams (TwoStreamRows); flattened as Q4KOneToken512.
template <class W>
HWY_FLATTEN void Block32OneToken(const uint8_t* w, size_t row_bytes, const Q8Rows& x, float* y, int64_t r0,
                                 int64_t r1) {
  // MXFP4 (offset codes, or signed ones where the caller gave no pair sums: Mxfp4Rows512 needs none)
  [[maybe_unused]] constexpr bool kMxfp4 = std::is_same_v<W, MXFP4Tokens> || std::is_same_v<W, MXFP4Tokens::W>;
  TwoStreamRowPointers<4>(w, row_bytes, y, r0, r1, [&](const auto& rw, const auto& ry) HWY_ATTR {
#if HWY_TARGET == HWY_AVX3_DL
    if constexpr (kMxfp4) return Mxfp4Rows512(rw, row_bytes, x, ry);
#endif
    Block32Rows<W>(rw, row_bytes, x, ry);
  });
}

// One 32-block of R rows (their pairs' interleaved offset codes w[p] (StorePair<false>) and scales dw[p]) times one
// tile, paired or not as TileBlock; the offset's share is o times each token's code sum (its two sums of 16, one
// pmaddwd), taken off the block's sum.
template <class O, size_t R, bool kPaired>
HWY_INLINE void TileBlock32(const uint8_t (*HWY_RESTRICT w)[64], const float (*HWY_RESTRICT dw)[2],
                            const int8_t* HWY_RESTRICT xq, const int16_t* HWY_RESTRICT xs,
                            const float* HWY_RESTRICT dx, __m256* acc, size_t acc_stride) {
  constexpr size_t V = kTileVectors<R, kPaired>;
  const __m256i off = _mm256_madd_epi16(LoadU(xs), _mm256_set1_epi16(O::kOffset));  // o * the lane's code sum
  __m256i isum[V];
  for (size_t v = 0; v < V; ++v) isum[v] = _mm256_setzero_si256();
#if MOETIER_VNNI
  // All 8 quads straight into the int32 sums (the block has one scale). Matmul/MXFP4/768x2048 at 1 thread, 5
  // alternating runs on a 2.1 GHz Xeon, medians, G MAC/s: tok8 41.7 -> 45.7, tok128 58.0 -> 85.6.
  for (int j = 0; j < 8; ++j) {
    const __m256i xv = LoadU(xq + j * 4 * kTokenTile);
    for (size_t v = 0; v < V; ++v) {
      const __m256i wq = TileQuad<kPaired, false>(w[kPaired ? v : v / 2], v, j);
      isum[v] = DpBusd(isum[v], wq, xv);
      asm("" : "+x"(isum[v]));
    }
  }
#else
  for (int j0 = 0; j0 < 8; j0 += O::kQuadsPerSum) {
    __m256i s16[V];
    for (size_t v = 0; v < V; ++v) s16[v] = _mm256_setzero_si256();
    for (int j = j0; j < j0 + O::kQuadsPerSum; ++j) {
      const __m256i xv = LoadU(xq + j * 4 * kTokenTile);
      for (size_t v = 0; v < V; ++v) {
        const __m256i wq = TileQuad<kPaired, false>(w[kPaired ? v : v / 2], v, j);
        s16[v] = _mm256_add_epi16(s16[v], _mm256_maddubs_epi16(wq, xv));
        asm("" : "+x"(s16[v]));  // as in TileBlock: the sums in order, not a tree spilled to the stack
      }
    }
    const __m256i ones = _mm256_set1_epi16(1);
    for (size_t v = 0; v < V; ++v) isum[v] = _mm256_add_epi32(isum[v], _mm256_madd_epi16(s16[v], ones));
  }
#endif
  const __m256 dxv = _mm256_loadu_ps(dx);
  for (size_t v = 0; v < V; ++v) {
    const __m256 d = RowScales<kPaired>(dw[kPaired ? v : v / 2], static_cast<int>(v % 2));
    acc[v * acc_stride] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(isum[v], off)), _mm256_mul_ps(d, dxv),
                                          acc[v * acc_stride]);
  }
}

// Several tokens of Q4_0, Q5_0 or MXFP4 through the token-interleaved tiles, as TokenTile does for Q4_K and Q6_K, but
// per 32-block, whose scale is a float (fp16 d, E8M0 exponent): each block's integer sums end in the float lanes.
// The offset codes (OffsetNibbles) need no sign operations. bench_matvec Matmul/MXFP4/768x2048, G MAC/s at 1 / 2
// threads, alternating binaries, row by row -> these: tok8 24.2-25.1 / 30.0-44.3 -> 31.9-41.9 / 54.7-57.4,
// tok128 23.1-26.1 / 40.1-42.8 -> 39.1-48.3 / 55.7-73.1.
template <class O, size_t R>
HWY_INLINE void NibbleTokenTile(const uint8_t* HWY_RESTRICT row0, size_t row_bytes, const Q8Rows& x, int64_t n_tok,
                                float* HWY_RESTRICT y, int64_t y_stride) {
  constexpr int64_t T = kTokenTile;
  constexpr size_t P = (R + 1) / 2;
  const int64_t nb = x.cols / 32, quads = x.cols / 4;
  const __m256i tbl = O::Table();
  alignas(32) uint8_t w[P][64];  // [pair]: the block's offset codes, interleaved per quad (StorePair<false>)
  alignas(8) float dw[P][2];     // [pair][row]: the block's scale
  TilePasses<R>(
      row0, row_bytes, nb, n_tok, y, y_stride,
      [&](int64_t b, int64_t, bool) HWY_ATTR {
        const size_t at = static_cast<size_t>(b) * O::kBytes;
        for (size_t p = 0; p < P; ++p) {
          const uint8_t* a = PairRow(row0, row_bytes, R, p, 0) + at;
          const uint8_t* c = PairRow(row0, row_bytes, R, p, 1) + at;
          dw[p][0] = O::Scale(a), dw[p][1] = O::Scale(c);
          StorePair<false>(w[p], O::Weights(a, tbl), O::Weights(c, tbl));
        }
      },
      [&](auto paired, int64_t tile, int64_t b, __m256* acc, size_t acc_stride) HWY_ATTR {
        const int64_t blk = tile * nb + b;
        TileBlock32<O, R, decltype(paired)::value>(w, dw, x.qt + (tile * quads + b * 8) * 4 * T, x.st + blk * 2 * T,
                                                   x.dt + blk * T, acc, acc_stride);
      });
}

// Rows r0 .. r1 - 1 by the token tiles, four at a time (each row's result is the same whichever tile it is in).
template <class W, size_t R>
HWY_INLINE void AnyTokenTile(const uint8_t* row, size_t row_bytes, const Q8Rows& x, int64_t n_tok, float* y,
                             int64_t y_stride) {
  if constexpr (requires { W::kOffset; }) {
    NibbleTokenTile<W, R>(row, row_bytes, x, n_tok, y, y_stride);
  } else {
    TokenTile<W, R>(row, row_bytes, x, n_tok, y, y_stride);
  }
}
template <class W>
void TokenTileRows(const uint8_t* w, size_t row_bytes, const Q8Rows& x, int64_t n_tok, float* y, int64_t y_stride,
                   int64_t r0, int64_t r1) {
  int64_t r = r0;
  for (; r + 4 <= r1; r += 4)
    AnyTokenTile<W, 4>(w + static_cast<size_t>(r) * row_bytes, row_bytes, x, n_tok, y + r, y_stride);
  for (; r < r1; ++r) AnyTokenTile<W, 1>(w + static_cast<size_t>(r) * row_bytes, row_bytes, x, n_tok, y + r, y_stride);
}

// Rows r0 .. r1 - 1 by RowsByTokenTiles (block_bytes-inl.h) with Tile<NT>::Run; one token's rows in one stream
// where one_stream_rows() says so and the tile is a K-quant's (Tile<1>::kOneStream: measured there; the others keep
// two).
template <template <size_t> class Tile>
void Rows(const uint8_t* w, size_t row_bytes, const Q8Rows& x, int64_t n_tok, float* y, int64_t y_stride,
          int64_t r0, int64_t r1) {
  const auto tile = [&](auto nt, const uint8_t* row, int64_t r, int64_t t) HWY_ATTR {
    Tile<decltype(nt)::value>::Run(row, x, t, y + t * y_stride + r, y_stride);
  };
  constexpr bool kKQuant = requires { Tile<1>::kOneStream; };
  RowsByTokenTiles(w, row_bytes, n_tok, r0, r1, kKQuant && one_stream_rows(), tile);
}

template <size_t NT>
struct Q4K {
  static constexpr bool kOneStream = true;  // one token's rows may be read in one stream (Rows)
  static HWY_INLINE void Run(const uint8_t* r, const Q8Rows& x, int64_t t0, float* y, int64_t ys) {
    Q4KTile<NT>(r, x, t0, y, ys);
  }
};
template <size_t NT>
struct Q6K {
  static constexpr bool kOneStream = true;  // one token's rows may be read in one stream (Rows)
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

// Q4_K and Q6_K: several tokens through the token-interleaved tiles when the caller filled them (matmul_groups
// does wherever uses_token_tiles says so), otherwise (and for one token: decode, bound by memory) row by row.
template <class Tokens, template <size_t> class Tile>
void TiledRows(const uint8_t* w, size_t row_bytes, const Q8Rows& x, int64_t n_tok, float* y, int64_t y_stride,
               int64_t r0, int64_t r1) {
  if (x.qt != nullptr) return TokenTileRows<Tokens>(w, row_bytes, x, n_tok, y, y_stride, r0, r1);
  Rows<Tile>(w, row_bytes, x, n_tok, y, y_stride, r0, r1);
}

// Q4_0, Q5_0 and MXFP4: the token tiles as TiledRows; row by row with the offset codes where the caller gave their
// pair sums (x.c: matmul_groups does wherever kernels::code_offset is not 0), else with the signed codes.
template <class O>
void OffsetRows(const uint8_t* w, size_t row_bytes, const Q8Rows& x, int64_t n_tok, float* y, int64_t y_stride,
                int64_t r0, int64_t r1) {
  if (x.qt != nullptr) return TokenTileRows<O>(w, row_bytes, x, n_tok, y, y_stride, r0, r1);
  if (x.c != nullptr) {
    if (n_tok == 1) return Block32OneToken<O>(w, row_bytes, x, y, r0, r1);
    return Rows<Block32<O>::template Tile>(w, row_bytes, x, n_tok, y, y_stride, r0, r1);
  }
  if (n_tok == 1) return Block32OneToken<typename O::W>(w, row_bytes, x, y, r0, r1);
  Rows<Block32<typename O::W>::template Tile>(w, row_bytes, x, n_tok, y, y_stride, r0, r1);
}

// True (and the product done) for the types with a fast path here.
inline bool MatmulRows(GgmlType type, const uint8_t* w, size_t row_bytes, const Q8Rows& x, int64_t n_tok, float* y,
                       int64_t y_stride, int64_t r0, int64_t r1) {
  switch (type) {
    case GgmlType::Q4_K:
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
      if (n_tok == 1 && x.qt == nullptr) {  // decode; a lone token of a batched group takes the tiles (TiledRows)
        Q4KOneToken512<BlockQ4_K>(w, row_bytes, x, y, r0, r1);
        return true;
      }
#endif
      TiledRows<Q4KTokens, Q4K>(w, row_bytes, x, n_tok, y, y_stride, r0, r1);
      return true;
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
    case GgmlType::Q5_K:
      if (n_tok == 1 && !x.batched) {  // decode
        Q4KOneToken512<BlockQ5_K>(w, row_bytes, x, y, r0, r1);
        return true;
      }
      if (x.qt == nullptr) return false;  // several tokens without the tiles: the portable kernels
      TokenTileRows<Q5KTokens>(w, row_bytes, x, n_tok, y, y_stride, r0, r1);
      return true;
#else
    case GgmlType::Q5_K:
      if (x.qt == nullptr) return false;  // one token, or several without the tiles: the portable kernels
      TokenTileRows<Q5KTokens>(w, row_bytes, x, n_tok, y, y_stride, r0, r1);
      return true;
#endif
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
    case GgmlType::IQ4_XS:
      // several tokens, or a prompt's one: the portable kernels (with AVX512-VNNI the token tiles, which
      // vnni512::MatmulRows takes first)
      if (n_tok != 1 || x.batched) return false;
      Iq4XsOneToken512(w, row_bytes, x, y, r0, r1);
      return true;
#endif
    case GgmlType::Q6_K: TiledRows<Q6KTokens, Q6K>(w, row_bytes, x, n_tok, y, y_stride, r0, r1); return true;
    case GgmlType::Q8_0:
      if (n_tok == 1) {
        Block32OneToken<BlockQ8_0Weights>(w, row_bytes, x, y, r0, r1);
      } else {
        Rows<Block32<BlockQ8_0Weights>::Tile>(w, row_bytes, x, n_tok, y, y_stride, r0, r1);
      }
      return true;
    case GgmlType::Q4_0:
      OffsetRows<Q4_0Tokens>(w, row_bytes, x, n_tok, y, y_stride, r0, r1);
      return true;
    case GgmlType::IQ4_NL:
      Rows<Block32<NibbleWeights<BlockIQ4_NL, kIq4nlValues, false>>::Tile>(w, row_bytes, x, n_tok, y, y_stride, r0,
                                                                             r1);
      return true;
    case GgmlType::Q5_0:
      OffsetRows<Q5_0Tokens>(w, row_bytes, x, n_tok, y, y_stride, r0, r1);
      return true;
    case GgmlType::MXFP4:
      OffsetRows<MXFP4Tokens>(w, row_bytes, x, n_tok, y, y_stride, r0, r1);
      return true;
    default:
      return false;
  }
}

}  // namespace avx2
}  // namespace HWY_NAMESPACE
}  // namespace moetier::quant::kernels
HWY_AFTER_NAMESPACE();

#endif  // HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
#endif  // MOETIER_QUANT_KERNELS_INT8_AVX2_INL_H_
