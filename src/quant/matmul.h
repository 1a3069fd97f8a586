// Matrix products of a stored weight matrix (any type with a reference dequantizer) with float activations.
//
// matmul() runs the SIMD kernels (quant/kernels/), splitting the rows across the scratch's thread pool when one
// is attached (set_pool); without one it runs on the calling thread. matmul_reference() keeps the scalar
// reference: each weight row is dequantized once into the scratch and dotted with every token's activation row.
// Both read the weights once per batch of n_tok tokens and allocate nothing. The scratch belongs to one thread.
//
// Activation rounding. GGUF reference engines (the ggml family) convert activations to the weight type's
// "vec_dot type" before the dot product: F16 weights meet F16 activations, BF16 meet BF16, Q4_0/Q4_1/Q5_0/Q5_1/
// Q8_0/IQ4_NL/MXFP4 meet 8-bit blocks of 32 (with the oracle's engine: a bfloat16 scale, see int8_kernels.h),
// K-quants and IQ4_XS meet Q8_K blocks of 256.
//  * ActivationRounding::match_ggml (the engine's default): quantized weights run the integer kernels of
//    quant/kernels/int8_kernels.h on activations quantized once per token row exactly that way; F16/BF16 weights
//    meet activations rounded to F16/BF16. matmul_reference() specifies it by rounding a copy of x the same way
//    (quantize, then dequantize) and computing float products, which agrees with the integer kernels to float
//    rounding of the per-block scale products.
//  * ActivationRounding::exact: float activations in every product (the fused float kernels of
//    quant/kernels/matmul_kernels.h): slower (3-4x for K-quants), and not the function the reference engine
//    computes (the oracle tests measure both).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "quant/ggml_type.h"
#include "quant/kernels/int8_kernels.h"
#include "quant/repack.h"

namespace moetier::util {
class ThreadPool;
}

namespace moetier::quant {

// Where a buffer's bytes live. host: memory the CPU addresses (the file's mapping, an expert cache slot, a
// std::vector); device: a compute backend's own memory (a GPU's VRAM), readable only by that backend's products
// (compute/backend.h says which a backend reads).
enum class Memory : uint8_t { host, device };

// A row-major weight matrix as stored in a GGUF file: `rows` rows of `cols` elements (cols = GGUF ne[0]),
// each row `row_bytes` bytes of type `type`. Non-owning: `data` points into the mapping or an expert cache
// (memory host), or is a backend's device address (memory device). With layout rows16 the same bytes are in the
// repacked order of quant/repack.h (host memory; row() does not apply), read only by matmul's integer kernels.
struct WeightView {
  GgmlType type = GgmlType::F32;
  const uint8_t* data = nullptr;  // [rows, cols] of `type`
  int64_t rows = 0;
  int64_t cols = 0;
  size_t row_bytes = 0;
  Memory memory = Memory::host;
  WeightLayout layout = WeightLayout::gguf;

  bool empty() const { return data == nullptr; }
  // Row `r` as raw bytes (GGUF layout only).
  const uint8_t* row(int64_t r) const { return data + static_cast<size_t>(r) * row_bytes; }
};

enum class ActivationRounding { exact, match_ggml };

struct Product;
struct ProductGroup;

// Per-thread working memory for matmul, sized at setup for the widest matrix and the largest batch, so the
// forward pass allocates nothing.
class MatmulScratch {
 public:
  MatmulScratch() = default;
  // max_group_rows: the most activation rows one matmul_groups call quantizes, all groups together (a MoE
  // layer's n_tok * n_expert_used); matmul and matmul_shared_x need only max_tok.
  MatmulScratch(int64_t max_cols, int64_t max_tok, ActivationRounding rounding, int64_t max_group_rows = 0);
  ActivationRounding rounding() const { return rounding_; }
  int64_t max_cols() const { return max_cols_; }
  int64_t max_tok() const { return max_tok_; }
  // Threads for matmul: the pool's threads split each product's rows; null (the default) = the calling thread
  // only. Non-owning: the pool must outlive the scratch's use (the model owns both; see ModelOptions::threads).
  void set_pool(util::ThreadPool* pool) { pool_ = pool; }
  util::ThreadPool* pool() const { return pool_; }

 private:
  friend void matmul_shared_x(std::span<const Product>, const float*, int64_t, MatmulScratch&);
  friend void matmul_groups(std::span<const ProductGroup>, MatmulScratch&);
  friend void matmul_reference(const WeightView&, const float*, float*, int64_t, MatmulScratch&);
  const float* rounded_activations(GgmlType t, const float* x, int64_t n_tok, int64_t cols);
  kernels::Q8Rows quantized_activations(kernels::Q8Format f, const float* x, int64_t n_tok, int64_t cols);
  bool token_tiles() const;
  int64_t tiled_rows() const;  // rows of xqt_ / xst_ / xdt_
  // The most groups one matmul_groups pass quantizes (a layer's chosen experts); more are taken in several passes.
  static constexpr size_t kMaxGroups = 64;
  util::ThreadPool* pool_ = nullptr;
  ActivationRounding rounding_ = ActivationRounding::exact;
  int64_t max_cols_ = 0;
  int64_t max_tok_ = 0;
  int64_t max_q8_rows_ = 0;  // rows of xq_ / xd_ / xs_: max(max_tok, max_group_rows)
  std::vector<float> wrow_;  // [max_cols]: one dequantized weight row
  std::vector<float> xr_;    // [max_tok, max_cols]: activations rounded to the weight's vec_dot type
  std::vector<int8_t> xq_;   // [max_q8_rows, max_cols]: 8-bit activation codes (match_ggml)
  std::vector<float> xd_;    // [max_q8_rows, max_cols / 32]: their block scales
  std::vector<int16_t> xs_;  // [max_q8_rows, max_cols / 16]: their sums of 16
  // The same, token-interleaved for the multi-token kernels (kernels::Q8Rows::qt): a group of n tokens padded to
  // at most min(n + kTokenTile - 1, kTokenTile n) rows (kernels::padded_tokens), hence tiled_rows() =
  // min(max_q8_rows + (kTokenTile - 1) * kMaxGroups, kTokenTile * max_q8_rows) rows; empty where the kernels do not
  // read them (token_tiles).
  std::vector<int8_t> xqt_;   // [tiled_rows, max_cols]
  std::vector<int16_t> xst_;  // [tiled_rows, max_cols / 16]
  std::vector<float> xdt_;    // [tiled_rows, max_cols / 32]
  // The pair sums the row-by-row kernels of offset codes read (kernels::Q8Rows::c), where this CPU's have them:
  // those kernels take one token (several go through the token tiles), so rows for a layer's chosen experts.
  static constexpr int64_t kPairSumRows = 64;
  std::vector<int16_t> xc_;   // [min(max_q8_rows, kPairSumRows), max_cols / 2]
  // The quad sums the one-token kernels of rows16 Q8_0 weights read (kernels::Q8Rows::quad_bias), where this CPU has
  // them: a row per group of one token (several take the token tiles).
  std::vector<int32_t> xb_;   // [min(max_q8_rows, kMaxGroups), max_cols / 4]
};

// y[t, r] = sum_c w[r, c] * x[t, c] for t < n_tok, r < w.rows.
// x: [n_tok, w.cols] row-major; y: [n_tok, w.rows] row-major (must not alias x).
// Asserts (internal invariant) that w.cols and n_tok fit the scratch.
void matmul(const WeightView& w, const float* x, float* y, int64_t n_tok, MatmulScratch& scratch);

// One product of a batch sharing its activations: y = w x, as in matmul().
struct Product {
  WeightView w;
  float* y = nullptr;  // [n_tok, w.rows]
};

// Several products of the same activations x ([n_tok, cols]; e.g. an expert's gate and up projections): x is
// quantized once and the rows of all the products are split across the threads in one pass, one wake-up of the
// pool instead of one per product. Results are bit-identical to separate matmul() calls. Products whose weights
// differ in type or cols are computed one at a time.
void matmul_shared_x(std::span<const Product> products, const float* x, int64_t n_tok, MatmulScratch& scratch);

// Products with different activations in one pass (a MoE layer: each chosen expert's gate and up on its own
// tokens, then every expert's down): each group's x is quantized once, then the rows of all the products are
// split across the threads by their cost (a row's bytes, read once, times 1 + its group's tokens), so the pool
// wakes once for the whole set instead of once per expert. Results are bit-identical to matmul_shared_x on each
// group (a `batched` group of one token: to its token's row in any product of several tokens). Groups must fit
// the scratch's max_group_rows (asserted). Where the integer kernels do not apply (exact rounding, F16/BF16/F32
// weights, a group mixing types or widths) the groups run one after the other.
struct ProductGroup {
  std::span<const Product> products;  // all of the same type and cols
  const float* x = nullptr;           // [n_tok, cols]
  int64_t n_tok = 0;
  // Part of a forward pass over several tokens (a routed expert's share of a prompt): even one token goes through
  // the multi-token kernels, so that a token's result does not depend on how many tokens its expert got.
  bool batched = false;
};
void matmul_groups(std::span<const ProductGroup> groups, MatmulScratch& scratch);

// The same product by the scalar reference path (dequantize row, dot), on the calling thread: the spec the
// kernels are tested against, and the baseline of bench_matvec.
void matmul_reference(const WeightView& w, const float* x, float* y, int64_t n_tok, MatmulScratch& scratch);

// Dequantize row `r` of w into dst[w.cols] (embedding lookup).
void dequantize_row(const WeightView& w, int64_t r, float* dst);

// Round x[n] in place as the reference engine does before a dot product with weights of type `weight_type` (see
// above; the specification of the integer kernels).
// n must be a multiple of the activation block (32 or 256) for quantized weight types.
void round_activations_like_ggml(GgmlType weight_type, float* x, int64_t n);

}  // namespace moetier::quant
