// Per-target helpers shared by the float kernels (matmul_kernels.cpp) and the integer kernels (int8_kernels.cpp):
// reading the fp16 scale fields of a block and looking 4-bit codes up in a 16-entry table. Included once per
// Highway target, inside each kernel file's HWY_NAMESPACE (the usual "-inl.h" include-guard toggle).
#if defined(MOETIER_QUANT_KERNELS_BLOCK_BYTES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MOETIER_QUANT_KERNELS_BLOCK_BYTES_INL_H_
#undef MOETIER_QUANT_KERNELS_BLOCK_BYTES_INL_H_
#else
#define MOETIER_QUANT_KERNELS_BLOCK_BYTES_INL_H_
#endif

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "quant/fp16.h"
#include "quant/kernels/matmul_kernels.h"

HWY_BEFORE_NAMESPACE();
namespace moetier::quant::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

HWY_INLINE uint16_t Load16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);  // blocks sit at any byte offset (e.g. 17-byte MXFP4 blocks)
  return v;
}
// The binary16 at p as float: the CPU's conversion instruction where the target has one (F16C on AVX2 and up,
// NEON), else quant/fp16.h's. Both are exact (every binary16 is a float).
HWY_INLINE float Fp16At(const uint8_t* p) {
#if HWY_TARGET == HWY_SCALAR || HWY_TARGET == HWY_EMU128 || HWY_TARGET == HWY_SSE4
  return fp16_to_fp32(Load16(p));
#else
  const hn::CappedTag<float, 1> df1;
  const hn::Rebind<hwy::float16_t, decltype(df1)> dh1;
  return hn::GetLane(hn::PromoteTo(df1, hn::LoadU(dh1, reinterpret_cast<const hwy::float16_t*>(p))));
#endif
}

// 16 table levels selected by the nibbles of 16 bytes (Q4_0 order: element j < 16 is the low nibble of qs[j],
// element j + 16 the high nibble) into 32 int8 codes, with a byte shuffle (pshufb on x86). Whole 16-byte
// stores: the wider loads that follow read inside one store, so store-to-load forwarding works (byte-wise
// scalar stores made those loads stall, ~4x slower).
HWY_INLINE void LookupNibbles(const int8_t (&table)[16], const uint8_t* qs, int8_t* HWY_RESTRICT out) {
#if HWY_TARGET == HWY_SCALAR  // no 128-bit vectors
  for (int j = 0; j < 16; ++j) {
    out[j] = table[qs[j] & 0xf];
    out[j + 16] = table[qs[j] >> 4];
  }
#else
  const hn::Full128<int8_t> d8;
  const hn::Full128<uint8_t> du8;
  const auto tbl = hn::LoadU(d8, table);
  const auto v = hn::LoadU(du8, qs);
  hn::StoreU(hn::TableLookupBytes(tbl, hn::BitCast(d8, hn::And(v, hn::Set(du8, uint8_t{0xf})))), d8, out);
  hn::StoreU(hn::TableLookupBytes(tbl, hn::BitCast(d8, hn::ShiftRight<4>(v))), d8, out + 16);
#endif
}

// One token's products (decode) are bound by memory: each kernel, at each block, asks for the bytes kPrefetchAhead
// further on (each stream of TwoStreamRows reads its rows in order, so that is what it reads next), keeping more
// reads in flight than the hardware prefetcher alone does. bench_matvec Matvec/Q4_K and Q6_K at 768x2048 and
// 2048x4096, 2 threads, alternating runs: 8.7-12.8 GB/s without, 11.8-16.0 GB/s at 2048 bytes ahead (4096 was no
// better there). On a Zen 4 host, whose core reads ~25 GB/s, 4096 keeps enough in flight: medians of 3
// alternating runs, 2048 -> 4096 ahead, 1 / 2 threads, Q4_K/2048x4096 15.7 / 26.4 -> 16.6 / 29.9, Q6_K/2048x4096
// 15.1 / 26.0 -> 16.7 / 29.4, the 2048x768 shapes within noise; decode at -t 2 faster in 8 of 10 alternating pairs
// for Qwen3-30B-A3B (mean 14.3 -> 14.7 tok/s) and 4 of 4 for gpt-oss-20b. A prefetch never faults, so asking past
// the end of the matrix is harmless; the address is formed as an integer, since a pointer past the end of the
// weights would not be a valid one.
// kBytes: the block's size (one prefetch per 64-byte cache line of it); kAhead: how far on.
template <size_t kBytes, size_t kAhead = kPrefetchAhead>
HWY_INLINE void PrefetchAhead(const uint8_t* block) {
  const uintptr_t ahead = reinterpret_cast<uintptr_t>(block) + kAhead;
  for (size_t off = 0; off < kBytes; off += 64) hwy::Prefetch(reinterpret_cast<const uint8_t*>(ahead + off));
}

// One token's rows r0 .. r1 - 1 (a thread's share of a decode product) read as two streams: the first half of
// the rows and the second, side by side. group(std::integral_constant<size_t, N>{}, rows) takes the N rows
// rows[0 .. N-1] (ascending in each stream), every row once:
//   R = 1: row r0 + i of the first half, then r0 + h + i of the second (h = half the rows), alternately;
//   R >= 2: R / 2 consecutive rows of each half (rows[0 .. R/2-1] from the first, rows[R/2 ..] from the second),
//           then the halves' last rows that make no such group as pairs (N = 2), one row of each half.
// Last, an odd row count's last row alone (N = 1). A row's result never depends on the rows beside it, so the
// order changes only how the bytes are read. Two streams keep more reads in flight than one: on a 2-vCPU Xeon
// (Emerald Rapids), a 1 GiB read at 2 threads went from ~25-28 GB/s in one stream per thread to ~28-32 in two
// (medians of 9 alternating runs, a cache line from each stream in turn; four to eight streams: ~31-38, but the
// kernels did not gain from four). bench_matvec Matvec, GB/s at 1 / 2 threads, one stream -> two, medians of 6-8
// runs interleaved in one process: Q4_K 2048x768 8.0 / 13.8 -> 9.0 / 16.5, 768x2048 10.3 / 17.0 -> 12.9 / 20.0,
// 2048x4096 10.8 / 21.6 -> 13.2 / 22.8; at 2 threads Q6_K 2048x768 20.3 -> 23.3, Q8_0 2048x768 19.6 -> 23.3,
// MXFP4 2048x768 15.5 -> 17.7 and 2048x4096 14.5 -> 19.8 (F32 2048x4096 23.5 -> 22.4, within the noise). The
// Qwen3-30B-A3B-shaped decode at -t 2: faster in 7 of 10 alternating runs, medians 10.56 -> 10.75 tok/s. On Zen 4
// one stream reads faster, and the K-quant rows take one there (kernels::one_stream_rows).
template <size_t R, class Group>
HWY_INLINE void TwoStreamRows(int64_t r0, int64_t r1, const Group& group) {
  const int64_t h = (r1 - r0) / 2;
  if constexpr (R == 1) {
    for (int64_t i = 0; i < h; ++i) {
      const int64_t a[1] = {r0 + i}, b[1] = {r0 + h + i};
      group(std::integral_constant<size_t, 1>{}, a);
      group(std::integral_constant<size_t, 1>{}, b);
    }
  } else {
    static_assert(R % 2 == 0);
    constexpr int64_t kHalf = static_cast<int64_t>(R / 2);
    int64_t i = 0;
    for (; i + kHalf <= h; i += kHalf) {
      int64_t rows[R];
      for (int64_t j = 0; j < kHalf; ++j) rows[j] = r0 + i + j, rows[kHalf + j] = r0 + h + i + j;
      group(std::integral_constant<size_t, R>{}, rows);
    }
    if constexpr (R > 2) {
      for (; i < h; ++i) {
        const int64_t rows[2] = {r0 + i, r0 + h + i};
        group(std::integral_constant<size_t, 2>{}, rows);
      }
    }
  }
  if ((r1 - r0) % 2 != 0) {
    const int64_t last[1] = {r1 - 1};
    group(std::integral_constant<size_t, 1>{}, last);
  }
}

// TwoStreamRows over the rows of w (row_bytes apart) with their results in y: kernel(rows, ys) for each group of
// N rows, rows[j] the bytes of a row and ys[j] where its result goes (the multi-row one-token kernels' driver).
template <size_t R, class Kernel>
HWY_INLINE void TwoStreamRowPointers(const uint8_t* w, size_t row_bytes, float* y, int64_t r0, int64_t r1,
                                     const Kernel& kernel) {
  TwoStreamRows<R>(r0, r1, [&](auto n, const auto& rows) HWY_ATTR {
    constexpr size_t N = decltype(n)::value;
    const uint8_t* rw[N];
    float* ry[N];
    for (size_t j = 0; j < N; ++j) rw[j] = w + static_cast<size_t>(rows[j]) * row_bytes, ry[j] = y + rows[j];
    kernel(rw, ry);
  });
}

// Rows r0 .. r1 - 1 of w, tokens four at a time: tile(std::integral_constant<size_t, NT>{}, row, r, t) computes
// tokens t .. t + NT - 1 of row r (NT = 4, then the 1-3 left over), so each row's blocks are decoded once per
// four tokens; four tokens' accumulators and the operands fit AVX2's 16 vector registers. One token (decode)
// takes the rows in two streams (TwoStreamRows), or with one_stream in order, one after the other (where
// kernels::one_stream_rows() says so). The kernels' common driver (float and integer, portable and AVX2).
// Several tokens take the rows in blocks of ~kRowBlockBytes of weights, and within a block the token tiles outer:
// a tile's activations stay in L1 over the block's rows, the block's weights in L2 over the tiles. Rows outer
// read every token's activations again for each row: Qwen3-30B-A3B's F32 router at a 512-token prompt read 4 MiB
// of x from L3 per row, 128 rows a layer (4% of the prompt's time). The same tiles, so the same results.
template <class Tile>
HWY_INLINE void RowsByTokenTiles(const uint8_t* w, size_t row_bytes, int64_t n_tok, int64_t r0, int64_t r1,
                                 bool one_stream, const Tile& tile) {
  if (n_tok == 1 && one_stream) {
    for (int64_t r = r0; r < r1; ++r) {
      tile(std::integral_constant<size_t, 1>{}, w + static_cast<size_t>(r) * row_bytes, r, 0);
    }
    return;
  }
  if (n_tok == 1) {
    TwoStreamRows<1>(r0, r1, [&](auto, const int64_t(&rows)[1]) HWY_ATTR {
      tile(std::integral_constant<size_t, 1>{}, w + static_cast<size_t>(rows[0]) * row_bytes, rows[0], 0);
    });
    return;
  }
  constexpr size_t kRowBlockBytes = size_t{256} << 10;
  const int64_t block = std::max<int64_t>(1, static_cast<int64_t>(kRowBlockBytes / row_bytes));
  for (int64_t b0 = r0; b0 < r1; b0 += block) {
    const int64_t b1 = std::min(r1, b0 + block);
    const auto rows = [&](auto nt, int64_t t) HWY_ATTR {
      for (int64_t r = b0; r < b1; ++r) tile(nt, w + static_cast<size_t>(r) * row_bytes, r, t);
    };
    int64_t t = 0;
    for (; t + 4 <= n_tok; t += 4) rows(std::integral_constant<size_t, 4>{}, t);
    switch (n_tok - t) {
      case 3: rows(std::integral_constant<size_t, 3>{}, t); break;
      case 2: rows(std::integral_constant<size_t, 2>{}, t); break;
      case 1: rows(std::integral_constant<size_t, 1>{}, t); break;
      default: break;
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace moetier::quant::kernels
HWY_AFTER_NAMESPACE();

#endif  // MOETIER_QUANT_KERNELS_BLOCK_BYTES_INL_H_
