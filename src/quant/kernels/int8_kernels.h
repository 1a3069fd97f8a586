// Integer dot-product kernels: activations quantized once per token row to 8 bits, weights decoded to small integers,
// products summed exactly in int32, one float multiply per block. Portable Highway kernels widen both to int16 (pmaddwd
// on x86, smlal on Arm); on AVX2/AVX-512 CPUs the main types (Q4_K, Q6_K, Q8_0, Q4_0, Q5_0, IQ4_NL, MXFP4; Q5_K for
// several tokens; on AVX-512 also Q5_K and IQ4_XS for one token) multiply 8-bit values directly (pmaddubsw, 32
// products per instruction; int8_avx2-inl.h), and with AVX512-VNNI the K-quant token tiles take vpdpbusd, 64 per
// instruction (int8_vnni512-inl.h), as do the 32-block tiles (Q4_0, Q5_0, MXFP4, Q8_0) and IQ4_XS's. On Arm CPUs with
// FEAT_DotProd every type takes sdot, and with FEAT_I8MM products of several tokens smmla (int8_arm.h). Q8_0 and
// Q4_K-Q6_K matrices repacked with 16 rows in the lanes (quant/repack.h) take vpdpbusd with AVX512-VNNI, the same
// bits as the file layout's kernels (int8_rows16-inl.h).
// Highway, dispatched at run time to the best target the CPU has, like matmul_kernels.h.
//
// The activation formats are the ones the reference engine (../shared/oracle) pairs with each weight type, so
// these kernels compute the function it computes:
//   q8_0: blocks of 32; d = amax / 127 rounded to bfloat16; q = round-half-even(x * (1 / d)) with the rounded d,
//         within -127..127 (ik_llama.cpp's Q8_2 activations; mainline ggml's Q8_0 rounds d to fp16 instead and
//         takes the codes from the unrounded d). Paired with Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 IQ4_NL MXFP4; the m term
//         of Q4_1 and Q5_1 multiplies the block's code sum.
//   q8_k: blocks of 256; d = max / -127 in float32, max the element of largest magnitude (sign kept, first one);
//         q = min(127, round-half-even(x * (-127 / max))) (quantize_row_q8_K). Paired with Q2_K..Q6_K, IQ4_XS.
// The scalar specification is quant::matmul_reference with ActivationRounding::match_ggml (quant/matmul.h):
// dequantized weights times the dequantized 8-bit activations; tests/quant/kernels_test.cpp bounds the
// difference (float rounding of the per-block scale products and sums only).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "quant/ggml_type.h"

namespace moetier::quant::kernels {

enum class Q8Format { none, q8_0, q8_k };

// The activation format of weights of type t; none for float weights (F32, F16, BF16) and types without kernels.
Q8Format q8_format(GgmlType t);

// Elements per activation block: 32 (q8_0) or 256 (q8_k).
inline int64_t q8_block(Q8Format f) { return f == Q8Format::q8_k ? 256 : 32; }

// Quantized activation rows: int8 codes (what x86's u8 x i8 multiply-add and Arm's dot products take; portable
// kernels widen them to int16 as they load); `sums` hold the sum of every 16 codes (ggml's Q8_K bsums), which the min terms of Q2_K/Q4_K/Q5_K
// and the m of Q4_1/Q5_1 multiply. Non-owning (MatmulScratch owns the buffers).
struct Q8Rows {
  Q8Format format = Q8Format::none;
  int64_t cols = 0;
  int8_t* q = nullptr;      // [n_tok, cols]: codes, -127..127
  float* d = nullptr;       // [n_tok, cols / q8_block(format)]: the scale of each block
  int16_t* sums = nullptr;  // [n_tok, cols / 16]: the sum of each 16 consecutive codes
  // The same rows with the tokens interleaved, for the kernels that multiply one weight row with several tokens
  // at once (int8_avx2-inl.h, TokenTile, NibbleTokenTile); null when absent (a weight type or target that does
  // not use them: uses_token_tiles). Tokens in tiles of kTokenTile lanes: lane t holds token t of the tile, but
  // in a tile of at most kPairedTile tokens (paired_tile; only the last can be) lanes 2t and 2t + 1 both hold
  // token t. Unused lanes hold zero codes and scales.
  int8_t* qt = nullptr;     // [tiles, cols / 4, kTokenTile, 4]: per column quad, each lane's 4 codes
  int16_t* st = nullptr;    // [tiles, cols / 32, kTokenTile, 2]: per lane, the two sums of 16 of a 32-block
  float* dt = nullptr;      // [tiles, cols / q8_block(format), kTokenTile]: per lane, the block scale
  // For the weights whose codes the kernels offset to unsigned values (code_offset): o times the sum of each pair
  // of codes; null when absent.
  int16_t* c = nullptr;     // [n_tok, cols / 2]
  // For Q8_0 weights in the rows16 layout (quant/repack.h), whose codes are stored plus 128: -128 times the sum of
  // each 4 consecutive codes (quad_biases); null when absent.
  int32_t* quad_bias = nullptr;  // [n_tok, cols / 4]
  // Part of a forward pass over several tokens (a prompt): a row of such a product must be the same bits as the
  // same token's row in a product of several, so the kernels whose one-token form sums in another order than their
  // several-token form (AVX-512 Q5_K and IQ4_XS) take the several-token one. False for decode's products.
  bool batched = false;
};

// Lanes of a token tile: one int32 lane per token fills an AVX2 vector. A tile of 1..kPairedTile tokens holds each
// twice, so that its vectors take two weight rows (int8_avx2-inl.h, TokenTile) and do not spend half their lanes on
// padding.
inline constexpr int64_t kTokenTile = 8;
inline constexpr int64_t kPairedTile = 4;
// Rows of qt / st / dt that n_tok tokens take: at most n_tok + kTokenTile - 1.
inline int64_t padded_tokens(int64_t n_tok) { return (n_tok + kTokenTile - 1) / kTokenTile * kTokenTile; }
// Whether the tile holding `tokens` tokens (1..kTokenTile) is paired.
inline bool paired_tile(int64_t tokens) { return tokens <= kPairedTile; }

// Whether the kernels of the best target this CPU has read the token-interleaved rows for weights of type t: Q4_K,
// Q6_K, Q4_0, Q5_0 and MXFP4 on AVX2 / AVX-512, and Q8_0 and IQ4_XS too on AVX512-VNNI (AVX3_DL). Callers fill them
// (interleave_q8_tokens) for products of several tokens, and for the products of one token that belong to a forward
// pass over several (a routed expert that got one token of a prompt), so that a token's result does not depend on how
// many tokens shared its product.
bool uses_token_tiles(GgmlType t);

// The offset o the kernels of the best target this CPU has add to the codes of weights of type t, to make them the
// unsigned operand of the 8-bit multiply (pmaddubsw): Q4_0 8, Q5_0 16, MXFP4 12 on AVX2 / AVX-512; 0 for the
// others.
// Callers give the row-by-row kernels (one token) of such types the pair sums x.c (offset_pair_sums).
int code_offset(GgmlType t);

// Fills x.c for rows 0 .. n_tok - 1 of x: o * (q[2i] + q[2i + 1]).
void offset_pair_sums(const Q8Rows& x, int64_t n_tok, int o);

// Fills x.qt, x.st and x.dt (padded_tokens(n_tok) rows) from rows 0 .. n_tok - 1 of x.
void interleave_q8_tokens(const Q8Rows& x, int64_t n_tok);
// The same for token tiles g0 .. g1 - 1 only (their kTokenTile rows each), from the rows of their tokens: tiles
// can be filled by several threads, each once its tokens are quantized.
void interleave_q8_tiles(const Q8Rows& x, int64_t n_tok, int64_t g0, int64_t g1);

// Quantizes row `tok` of x ([.., cols], cols a multiple of q8_block) into row `tok` of out. A block holding a NaN or
// infinite element gets scale NaN and codes 0, so every product with it is NaN.
void quantize_q8_row(const float* x, int64_t tok, const Q8Rows& out);

// The integer kernels this CPU runs, for logs and test output: "NEON + sdot + smmla" or "NEON + sdot" on Arm
// CPUs with the dot-product extensions (int8_arm.h), else the Highway target's name ("AVX3_DL", "AVX2", "NEON"),
// saying so where one_stream_rows() or rows16_prefetch() changes a kernel.
std::string int8_kernels_name();

// Whether the one-token (decode) products of Q4_K and Q6_K (and Q5_K's, on AVX-512) in the AVX2 and AVX-512 kernels
// (int8_avx2-inl.h) read a thread's rows in order, one row after the other (one stream), instead of a row of each half
// of its share in turn (TwoStreamRows, block_bytes-inl.h). True on AMD family 19h (measured on Zen 4; Zen 3 is the same
// family), false elsewhere. On Zen 4 a thread reads fastest in one stream (bench_matvec ReadBandwidth/1GiB/2/<streams>
// on a 2-vCPU EPYC: 31.2 / 26.4 / 19.3 GB/s in 1 / 2 / 8 streams per thread), where on Xeons two streams read faster
// than one (block_bytes-inl.h). There, 3 alternating runs of each binary, medians, GB/s at 2 threads, two streams ->
// one: Matvec/Q4_K/2048x4096 31.3 -> 34.0, 768x2048 25.7 -> 28.9, Q6_K/2048x4096 28.1 -> 30.9, 768x2048 27.5 -> 29.1,
// Q5_K/2048x4096 27.9 -> 35.4 but 2048x768 26.0 -> 24.8; Qwen3-30B-A3B-shaped Q4_K_M decode at -t 2 (48 tokens), 10
// alternating pairs: 15.97 -> 16.62 tok/s (medians; faster in 8). The float types (F16 26.4 -> 25.1 at 2048x4096), the
// 32-blocks (four rows at a time: two close streams, far slower) and the portable kernels keep two. A row's result does
// not depend on the order, so both give the same bits. From CPUID, read once.
bool one_stream_rows();
// Tests: one_stream_rows() answers `one` (0 or 1), or the CPU's own answer again (-1).
void set_one_stream_rows_for_test(int one);

// Whether the one-token kernels of rows16 K-quant, MXFP4 and IQ4_XS weights (int8_rows16-inl.h), which read a thread's
// groups in one stream, ask for the bytes 8 KiB ahead as they go: on AMD CPUs of family 1Ah (Zen 5) and later, where
// they read from DRAM faster with it. Not on Zen 4 (family 19h), where the hardware prefetcher alone read faster, nor
// on Intel CPUs, where a first form of the kernels read slower with it (int8_rows16-inl.h, docs/design.md). A result
// does not depend on it. From CPUID, read once.
bool rows16_prefetch();
// Tests: rows16_prefetch() answers `prefetch` (0 or 1), or the CPU's own answer again (-1).
void set_rows16_prefetch_for_test(int prefetch);

// Whether the best target this CPU has reads weights of type t in the rows16 layout (quant/repack.h, kernels in
// int8_rows16-inl.h): Q8_0, Q4_K, Q5_K, Q6_K, MXFP4 and IQ4_XS with AVX512-VNNI (Highway's AVX3_DL). Where false,
// nothing should be repacked.
bool has_rows16_kernel(GgmlType t);

// quant::repack_rows16 (quant/repack.h: its contract, and the scalar specification of the bytes), the same bytes:
// with AVX-512 gathers and full-line stores where the CPU has the rows16 kernels (repack_rows16-inl.h), else the
// specification itself. Thread-safe for disjoint group ranges.
void repack_rows16(GgmlType type, const uint8_t* src, size_t row_bytes, int64_t cols, int64_t g0, int64_t g1,
                   uint8_t* dst);

// Fills x.quad_bias for rows 0 .. n_tok - 1 of x: -128 * (q[4i] + q[4i + 1] + q[4i + 2] + q[4i + 3]).
void quad_biases(const Q8Rows& x, int64_t n_tok);

// The product of matmul_rows_q8 for a matrix in the rows16 layout, groups [g0, g1) of 16 rows: y[t * y_stride + r]
// for rows r in [16 g0, 16 g1), the same bits as matmul_rows_q8 on the matrix's GGUF bytes. x needs the token
// tiles (qt, st, dt: several tokens, or a prompt's one) or, for one token, quad_bias (Q8_0) or sums (the others).
// Requires has_rows16_kernel(type). Thread-safe (no shared state).
void matmul_rows16_q8(GgmlType type, const uint8_t* w, int64_t cols, const Q8Rows& x, int64_t n_tok, float* y,
                      int64_t y_stride, int64_t g0, int64_t g1);

// For r in [r0, r1) and t < n_tok: y[t * y_stride + r] = sum over blocks of (weight block . activation block).
// w: rows of `row_bytes` bytes of type `type` (a type with q8_format(type) != none); x: n_tok quantized rows of
// w's cols elements in q8_format(type). Thread-safe (no shared state).
void matmul_rows_q8(GgmlType type, const uint8_t* w, size_t row_bytes, const Q8Rows& x, int64_t n_tok, float* y,
                    int64_t y_stride, int64_t r0, int64_t r1);

}  // namespace moetier::quant::kernels
