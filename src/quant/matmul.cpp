#include "quant/matmul.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cassert>
#include <cmath>
#include <cstring>

#include "quant/dequant_ref.h"
#include "quant/dot.h"
#include "quant/fp16.h"
#include "quant/kernels/matmul_kernels.h"
#include "util/thread_pool.h"

namespace moetier::quant {

MatmulScratch::MatmulScratch(int64_t max_cols, int64_t max_tok, ActivationRounding rounding, int64_t max_group_rows)
    : rounding_(rounding),
      max_cols_(max_cols),
      max_tok_(max_tok),
      max_q8_rows_(std::max(max_tok, max_group_rows)),
      wrow_(static_cast<size_t>(max_cols)),
      xr_(rounding == ActivationRounding::match_ggml ? static_cast<size_t>(max_cols * max_tok) : 0),
      xq_(rounding == ActivationRounding::match_ggml ? static_cast<size_t>(max_cols * max_q8_rows_) : 0),
      xd_(rounding == ActivationRounding::match_ggml ? static_cast<size_t>(max_cols / 32 * max_q8_rows_) : 0),
      xs_(rounding == ActivationRounding::match_ggml ? static_cast<size_t>(max_cols / 16 * max_q8_rows_) : 0),
      xqt_(token_tiles() ? static_cast<size_t>(max_cols * tiled_rows()) : 0),
      xst_(token_tiles() ? static_cast<size_t>(max_cols / 16 * tiled_rows()) : 0),
      xdt_(token_tiles() ? static_cast<size_t>(max_cols / 32 * tiled_rows()) : 0),
      xc_(rounding == ActivationRounding::match_ggml &&
                  (kernels::code_offset(GgmlType::Q4_0) != 0 || kernels::code_offset(GgmlType::MXFP4) != 0)
              ? static_cast<size_t>(max_cols / 2 * std::min(max_q8_rows_, kPairSumRows))
              : 0),
      xb_(rounding == ActivationRounding::match_ggml && kernels::has_rows16_kernel(GgmlType::Q8_0)
              ? static_cast<size_t>(max_cols / 4 * std::min<int64_t>(max_q8_rows_, kMaxGroups))
              : 0) {}

// Each group pads to at most kTokenTile - 1 rows more than its tokens, and to at most kTokenTile rows per token.
int64_t MatmulScratch::tiled_rows() const {
  return std::min(max_q8_rows_ + (kernels::kTokenTile - 1) * static_cast<int64_t>(kMaxGroups),
                  kernels::kTokenTile * max_q8_rows_);
}

// The interleaved copies only where this CPU's kernels read them (AVX2 / AVX-512): elsewhere (Arm) they would be
// memory for nothing.
bool MatmulScratch::token_tiles() const {
  return rounding_ == ActivationRounding::match_ggml &&
         (kernels::uses_token_tiles(GgmlType::Q4_K) || kernels::uses_token_tiles(GgmlType::Q6_K) ||
          kernels::uses_token_tiles(GgmlType::Q4_0) || kernels::uses_token_tiles(GgmlType::MXFP4) ||
          kernels::uses_token_tiles(GgmlType::Q8_0));
}

namespace {

// The 8-bit activation blocks of 32 that the reference engine pairs with Q4_0/Q4_1/Q5_0/Q5_1/Q8_0/IQ4_NL/MXFP4
// weights (oracle/README.md): scale d = amax / 127 rounded to bfloat16, codes round-half-even(x / d) computed from
// that rounded d and kept within -127..127 (the reference saturates at -128; a code of -128 needs the rounding of d
// to shrink it by its largest relative step, 2^-8, and the kernels' sign trick needs |code| <= 127). This is the
// layout of ik_llama.cpp's Q8_2 activations, not mainline ggml's Q8_0 (d rounded to fp16, codes from the unrounded
// d): matching it brings the first logits row of the Q8_0 oracle models from rel ~3e-2 to ~1e-7.
void round_q8_0(float* x, int64_t n) {
  for (int64_t b = 0; b < n; b += 32) {
    float amax = 0.0f;
    for (int64_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b + j]));
    const float d = bf16_to_fp32(fp32_to_bf16(amax / 127.0f));
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int64_t j = 0; j < 32; ++j) x[b + j] = d * std::clamp(std::nearbyint(x[b + j] * id), -127.0f, 127.0f);
  }
}

// ggml's Q8_K activation blocks (quantize_row_q8_K): 256 elements, float32 scale max/-127 where max is the element of largest
// magnitude (sign kept), quants clamped to 127 from above.
void round_q8_k(float* x, int64_t n) {
  for (int64_t b = 0; b < n; b += 256) {
    float amax = 0.0f;
    float max = 0.0f;
    for (int64_t j = 0; j < 256; ++j) {
      const float ax = std::fabs(x[b + j]);
      if (ax > amax) {
        amax = ax;
        max = x[b + j];
      }
    }
    if (amax == 0.0f) {
      for (int64_t j = 0; j < 256; ++j) x[b + j] = 0.0f;
      continue;
    }
    const float iscale = -127.0f / max;
    const float d = 1.0f / iscale;
    for (int64_t j = 0; j < 256; ++j) {
      const float q = std::min(127.0f, std::nearbyint(iscale * x[b + j]));
      x[b + j] = d * q;
    }
  }
}

}  // namespace

void round_activations_like_ggml(GgmlType weight_type, float* x, int64_t n) {
  switch (weight_type) {
    case GgmlType::F32:
      return;
    case GgmlType::F16:
      for (int64_t i = 0; i < n; ++i) x[i] = fp16_to_fp32(fp32_to_fp16(x[i]));
      return;
    case GgmlType::BF16:
      for (int64_t i = 0; i < n; ++i) x[i] = bf16_to_fp32(fp32_to_bf16(x[i]));
      return;
    case GgmlType::Q4_0:
    case GgmlType::Q4_1:
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
    case GgmlType::Q8_0:
    case GgmlType::IQ4_NL:
    case GgmlType::MXFP4:
      round_q8_0(x, n);
      return;
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
    case GgmlType::IQ4_XS:
      round_q8_k(x, n);
      return;
    default:
      return;  // types without a dequantizer never reach a matmul (binding refuses them)
  }
}

void dequantize_row(const WeightView& w, int64_t r, float* dst) {
  assert(r >= 0 && r < w.rows && w.layout == WeightLayout::gguf);
  dequantize_row_ref(w.type, w.row(r), dst, w.cols);
}

const float* MatmulScratch::rounded_activations(GgmlType t, const float* x, int64_t n_tok, int64_t cols) {
  if (rounding_ != ActivationRounding::match_ggml || t == GgmlType::F32) return x;
  float* xr = xr_.data();
  std::memcpy(xr, x, sizeof(float) * static_cast<size_t>(n_tok * cols));
  for (int64_t tok = 0; tok < n_tok; ++tok) round_activations_like_ggml(t, xr + tok * cols, cols);
  return xr;
}

kernels::Q8Rows MatmulScratch::quantized_activations(kernels::Q8Format f, const float* x, int64_t n_tok,
                                                     int64_t cols) {
  const kernels::Q8Rows q{f, cols, xq_.data(), xd_.data(), xs_.data()};
  for (int64_t tok = 0; tok < n_tok; ++tok) kernels::quantize_q8_row(x, tok, q);
  return q;
}

void matmul_reference(const WeightView& w, const float* x, float* y, int64_t n_tok, MatmulScratch& scratch) {
  assert(w.cols <= scratch.max_cols_ && n_tok <= scratch.max_tok_ && w.layout == WeightLayout::gguf);
  const int64_t cols = w.cols;
  const float* xs = scratch.rounded_activations(w.type, x, n_tok, cols);
  float* wrow = scratch.wrow_.data();
  for (int64_t r = 0; r < w.rows; ++r) {
    if (w.type == GgmlType::F32) {
      std::memcpy(wrow, w.row(r), sizeof(float) * static_cast<size_t>(cols));
    } else {
      dequantize_row_ref(w.type, w.row(r), wrow, cols);
    }
    for (int64_t t = 0; t < n_tok; ++t) y[t * w.rows + r] = dot8(wrow, xs + t * cols, cols);
  }
}

void matmul(const WeightView& w, const float* x, float* y, int64_t n_tok, MatmulScratch& scratch) {
  const Product p{w, y};
  matmul_shared_x(std::span<const Product>(&p, 1), x, n_tok, scratch);
}

void matmul_shared_x(std::span<const Product> ps, const float* x, int64_t n_tok, MatmulScratch& scratch) {
  const ProductGroup g{ps, x, n_tok};
  matmul_groups(std::span<const ProductGroup>(&g, 1), scratch);
}

namespace {

// The activation format of a group whose products all have an integer kernel of the same format and width;
// none otherwise (or with exact rounding).
kernels::Q8Format group_format(const ProductGroup& g, ActivationRounding rounding) {
  if (rounding != ActivationRounding::match_ggml) return kernels::Q8Format::none;
  const WeightView& w0 = g.products.front().w;
  const kernels::Q8Format f = kernels::has_kernel(w0.type) ? kernels::q8_format(w0.type) : kernels::Q8Format::none;
  for (const Product& p : g.products) {
    if (p.w.type != w0.type || p.w.cols != w0.cols) return kernels::Q8Format::none;
  }
  return f;
}

// Guided self-scheduling of the work [0, total) over the pool's threads: each takes the next chunk of what is
// left (an atomic counter of the work handed out), a chunk being 1 / (2 n) of the rest but at least min_chunk,
// and calls f(c0, c1) for it, until none is left. A thread slowed down (another process on its core, a busier
// memory channel) takes fewer chunks, where a fixed split leaves the others waiting for it, and the chunks shrink
// towards the end so that the last one leaves the others little to wait for. Qwen3-30B-A3B decode, 64 tokens at
// -t 2: the calling thread's wait for the other's last rows 170-370 ms with 4 equal chunks per thread, 110-120 ms
// with 16, 50-100 ms guided (of ~4000 ms).
template <class F>
void guided_chunks(util::ThreadPool& pool, int64_t total, int64_t min_chunk, const F& f) {
  const int64_t n = pool.size();
  std::atomic<int64_t> taken{0};
  pool.run([&](int) {
    int64_t c0 = taken.load(std::memory_order_relaxed);
    while (c0 < total) {
      const int64_t c1 = std::min(total, c0 + std::max(min_chunk, (total - c0) / (2 * n)));
      if (!taken.compare_exchange_weak(c0, c1, std::memory_order_relaxed)) continue;  // c0 reloaded
      f(c0, c1);
      c0 = taken.load(std::memory_order_relaxed);
    }
  });
}

// Quantizes the activations of the groups marked fresh into their rows of xq, and fills the token tiles of those
// marked tiled. The work goes in units (a tiled group's tiles: their tokens quantized, then interleaved; another
// group's tokens), spread over the pool once there is enough of it: on one thread it was the serial part of a
// prompt's products (gpt-oss-20b at a 512-token prompt: ~12 M values a layer while the other thread waited; its
// prefill at -t 2 went from ~76 to ~77 tok/s).
template <size_t kMax>
void quantize_groups(std::span<const ProductGroup> groups, const std::array<kernels::Q8Rows, kMax>& xq,
                     const std::array<bool, kMax>& fresh, const std::array<bool, kMax>& tiled, util::ThreadPool* pool) {
  // Below ~64 K values (a few tens of microseconds) waking the workers costs more than it saves: decode's one
  // token per group stays on the calling thread.
  constexpr int64_t kMinParallelValues = int64_t{64} << 10;
  std::array<int64_t, kMax + 1> unit0{};  // group i's units: [unit0[i], unit0[i + 1])
  int64_t values = 0;
  for (size_t i = 0; i < groups.size(); ++i) {
    const int64_t n_tok = groups[i].n_tok;
    const int64_t units = !fresh[i] ? 0 : tiled[i] ? kernels::padded_tokens(n_tok) / kernels::kTokenTile : n_tok;
    unit0[i + 1] = unit0[i] + units;
    if (fresh[i]) values += n_tok * xq[i].cols;
  }
  const auto quantize = [&](int64_t u0, int64_t u1) {
    size_t i = 0;
    for (int64_t u = u0; u < u1; ++u) {
      while (unit0[i + 1] <= u) ++i;
      const ProductGroup& g = groups[i];
      const int64_t k = u - unit0[i];
      if (!tiled[i]) {
        kernels::quantize_q8_row(g.x, k, xq[i]);
        continue;
      }
      const int64_t t1 = std::min(g.n_tok, (k + 1) * kernels::kTokenTile);
      for (int64_t tok = k * kernels::kTokenTile; tok < t1; ++tok) kernels::quantize_q8_row(g.x, tok, xq[i]);
      kernels::interleave_q8_tiles(xq[i], g.n_tok, k, k + 1);
    }
  };
  const int64_t total = unit0[groups.size()];
  if (pool == nullptr || pool->size() == 1 || values < kMinParallelValues) {
    quantize(0, total);
    return;
  }
  guided_chunks(*pool, total, 1, quantize);
}

}  // namespace

void matmul_groups(std::span<const ProductGroup> groups, MatmulScratch& scratch) {
  if (groups.empty()) return;
  // Below ~64 KiB of weights (norm-sized products, tiny test models) waking the workers costs more than the
  // product itself (~10 us), so those run on the calling thread; and no thread takes less than that at once.
  constexpr size_t kMinParallelBytes = size_t{64} << 10;
  // A group without the integer kernels: the float-activation kernels or the reference, product by product if
  // the products differ in type or width.
  const auto float_group = [&scratch](const ProductGroup& g) {
    const std::span<const Product> ps = g.products;
    const WeightView& w0 = ps.front().w;
    for (const Product& p : ps) {
      assert(p.w.cols <= scratch.max_cols_);
      if (p.w.type != w0.type || p.w.cols != w0.cols) {  // not one activation format: one product at a time
        for (const Product& q : ps) {
          const ProductGroup one{std::span<const Product>(&q, 1), g.x, g.n_tok};
          matmul_groups(std::span<const ProductGroup>(&one, 1), scratch);
        }
        return;
      }
    }
    // Repacked weights are made only for the integer kernels (match_ggml rounding, a type with a rows16 kernel),
    // which a group of one type and width takes.
    assert(std::all_of(ps.begin(), ps.end(), [](const Product& p) { return p.w.layout == WeightLayout::gguf; }));
    if (!kernels::has_kernel(w0.type)) {
      for (const Product& p : ps) matmul_reference(p.w, g.x, p.y, g.n_tok, scratch);
      return;
    }
    const int64_t n_tok = g.n_tok;
    const float* xs = scratch.rounded_activations(w0.type, g.x, n_tok, w0.cols);
    int64_t total = 0;
    size_t bytes = 0;
    for (const Product& p : ps) total += p.w.rows, bytes += static_cast<size_t>(p.w.rows) * p.w.row_bytes;
    // Rows [r0, r1) of the products' rows taken one after the other.
    const auto rows = [&](int64_t r0, int64_t r1) {
      int64_t base = 0;
      for (const Product& p : ps) {
        const int64_t a = std::max<int64_t>(r0 - base, 0), b = std::min<int64_t>(r1 - base, p.w.rows);
        base += p.w.rows;
        if (a < b) kernels::matmul_rows(p.w.type, p.w.data, p.w.row_bytes, p.w.cols, xs, n_tok, p.y, p.w.rows, a, b);
      }
    };
    util::ThreadPool* pool = scratch.pool_;
    const int64_t n_threads = pool != nullptr ? pool->size() : 1;
    if (n_threads == 1 || total < 2 * n_threads || bytes < kMinParallelBytes) {
      rows(0, total);
      return;
    }
    // Chunks of whole 4-row tiles.
    const auto tile_up = [&](int64_t r) { return std::min(total, (r + 3) / 4 * 4); };
    const int64_t min_rows =
        std::max<int64_t>(1, static_cast<int64_t>(kMinParallelBytes) * total / static_cast<int64_t>(bytes));
    guided_chunks(*pool, total, min_rows, [&](int64_t c0, int64_t c1) {
      if (tile_up(c0) < tile_up(c1)) rows(tile_up(c0), tile_up(c1));
    });
  };

  // The integer path takes every group at once. Otherwise (rare: F16/BF16/F32 weights or --exact-activations; a
  // set larger than the scratch was sized for) each group goes alone, by the path it takes on its own, so a
  // group's result never depends on the groups beside it.
  int64_t q8_rows = 0;
  bool together = groups.size() > 1;
  for (const ProductGroup& g : groups) {
    assert(!g.products.empty() && g.n_tok >= 1 && g.n_tok <= scratch.max_tok_);
    if (group_format(g, scratch.rounding_) == kernels::Q8Format::none) together = false;
    q8_rows += g.n_tok;
  }
  if (q8_rows > scratch.max_q8_rows_) together = false;
  if (!together && groups.size() > 1) {
    for (const ProductGroup& h : groups) matmul_groups(std::span<const ProductGroup>(&h, 1), scratch);
    return;
  }
  if (group_format(groups.front(), scratch.rounding_) == kernels::Q8Format::none) {
    float_group(groups.front());
    return;
  }

  // Each group's x quantized once into consecutive rows of the scratch (quantize_groups).
  constexpr size_t kMaxGroups = MatmulScratch::kMaxGroups;
  if (groups.size() > kMaxGroups) {
    matmul_groups(groups.first(kMaxGroups), scratch);
    matmul_groups(groups.subspan(kMaxGroups), scratch);
    return;
  }
  std::array<kernels::Q8Rows, kMaxGroups> xq;
  int8_t* q = scratch.xq_.data();
  float* d = scratch.xd_.data();
  int16_t* sums = scratch.xs_.data();
  int8_t* qt = scratch.xqt_.data();
  int16_t* st = scratch.xst_.data();
  float* dt = scratch.xdt_.data();
  int16_t* pair_sums = scratch.xc_.data();
  int32_t* quad_bias = scratch.xb_.data();
  const auto repacked = [](const ProductGroup& g) {
    return std::any_of(g.products.begin(), g.products.end(),
                       [](const Product& p) { return p.w.layout == WeightLayout::rows16; });
  };
  std::array<bool, kMaxGroups> fresh{}, tiled{};  // quantized here (not sharing an earlier group's rows); in tiles
  std::array<size_t, kMaxGroups> source{};         // the earlier group whose rows a group shares
  for (size_t i = 0; i < groups.size(); ++i) {
    const ProductGroup& g = groups[i];
    const int64_t cols = g.products.front().w.cols;
    assert(cols <= scratch.max_cols_);
    // A group with the same activations as an earlier one, for weights of the same type (so the same tiles or pair
    // sums), reads that one's rows: at decode a MoE layer's experts all take the token's x, quantized once
    // instead of once per expert. Of the repacked layouts only Q8_0's reads more than the rows (their quad
    // biases), so a repacked Q4_K, Q5_K or Q6_K group shares a file-layout one's rows (the shared expert and the routed
    // ones).
    const auto same = [&](const ProductGroup& h) {
      const GgmlType type = g.products.front().w.type;
      return h.x == g.x && h.n_tok == g.n_tok && h.batched == g.batched && h.products.front().w.cols == cols &&
             h.products.front().w.type == type && (type != GgmlType::Q8_0 || repacked(h) == repacked(g));
    };
    if (const auto it = std::find_if(groups.begin(), groups.begin() + static_cast<std::ptrdiff_t>(i), same);
        it != groups.begin() + static_cast<std::ptrdiff_t>(i)) {
      source[i] = static_cast<size_t>(it - groups.begin());
      continue;
    }
    xq[i] = kernels::Q8Rows{group_format(g, scratch.rounding_), cols, q, d, sums};
    xq[i].batched = g.n_tok > 1 || g.batched;
    fresh[i] = true;
    q += g.n_tok * cols;
    d += g.n_tok * (cols / 32);
    sums += g.n_tok * (cols / 16);
    tiled[i] =
        (g.n_tok > 1 || g.batched) && !scratch.xqt_.empty() && kernels::uses_token_tiles(g.products.front().w.type);
    if (tiled[i]) {
      // Padded, the groups fit in tiled_rows.
      const int64_t padded = kernels::padded_tokens(g.n_tok);
      assert(qt + padded * cols <= scratch.xqt_.data() + scratch.xqt_.size());
      xq[i].qt = qt, xq[i].st = st, xq[i].dt = dt;
      qt += padded * cols;
      st += padded * (cols / 16);
      dt += padded * (cols / kernels::q8_block(xq[i].format));
    }
  }
  quantize_groups(groups, xq, fresh, tiled, scratch.pool_);
  for (size_t i = 0; i < groups.size(); ++i) {
    const ProductGroup& g = groups[i];
    const int64_t cols = g.products.front().w.cols;
    if (!fresh[i] || tiled[i]) continue;
    if (repacked(g) && g.products.front().w.type == GgmlType::Q8_0) {
      // one token (decode): the rows16 Q8_0 kernel's quad biases; several take the tiles
      assert(g.n_tok == 1 && quad_bias + cols / 4 <= scratch.xb_.data() + scratch.xb_.size());
      xq[i].quad_bias = quad_bias;
      kernels::quad_biases(xq[i], g.n_tok);
      quad_bias += cols / 4;
    }
    if (const int o = kernels::code_offset(g.products.front().w.type);
        o != 0 && g.n_tok * (cols / 2) <= scratch.xc_.data() + scratch.xc_.size() - pair_sums) {
      // Where they fit (one token per group: a layer's experts at decode); without them the kernels spend sign
      // operations instead, with the same integer sums.
      xq[i].c = pair_sums;
      kernels::offset_pair_sums(xq[i], g.n_tok, o);
      pair_sums += g.n_tok * (cols / 2);
    }
  }
  for (size_t i = 0; i < groups.size(); ++i) {
    if (!fresh[i]) xq[i] = xq[source[i]];
  }

  // The products' rows taken one after the other, each costing row_bytes * (1 + n_tok): its bytes are read and
  // unpacked once, then dotted with each token. A chunk [c0, c1) of the cost takes the rows whose cost starts in
  // it (guided_chunks).
  int64_t cost = 0;
  size_t bytes = 0;
  for (const ProductGroup& g : groups) {
    for (const Product& p : g.products) {
      cost += p.w.rows * static_cast<int64_t>(p.w.row_bytes) * (1 + g.n_tok);
      bytes += static_cast<size_t>(p.w.rows) * p.w.row_bytes;
    }
  }
  const auto run = [&](int64_t c0, int64_t c1) {
    int64_t base = 0;
    for (size_t i = 0; i < groups.size(); ++i) {
      const ProductGroup& g = groups[i];
      for (const Product& p : g.products) {
        const int64_t rc = static_cast<int64_t>(p.w.row_bytes) * (1 + g.n_tok);
        const bool rows16 = p.w.layout == WeightLayout::rows16;
        // The first row whose cost starts at or after c, rounded up to a multiple of 4 rows from the product's
        // first, so the kernels' four-row tiles (int8_avx2-inl.h, TokenTileRows) stay whole (16: the rows16
        // layout's groups).
        const int64_t tile = rows16 ? kRows16 : 4;
        const auto first_row = [&](int64_t c) {
          if (c <= base) return int64_t{0};
          return std::min(p.w.rows, ((c - base + rc - 1) / rc + tile - 1) / tile * tile);
        };
        const int64_t a = first_row(c0), b = first_row(c1);
        base += p.w.rows * rc;
        if (a >= b) continue;
        if (rows16) {
          kernels::matmul_rows16_q8(p.w.type, p.w.data, p.w.cols, xq[i], g.n_tok, p.y, p.w.rows, a / kRows16,
                                    b / kRows16);
        } else {
          kernels::matmul_rows_q8(p.w.type, p.w.data, p.w.row_bytes, xq[i], g.n_tok, p.y, p.w.rows, a, b);
        }
      }
    }
  };
  util::ThreadPool* pool = scratch.pool_;
  const int64_t n_threads = pool != nullptr ? pool->size() : 1;
  if (n_threads == 1 || bytes < kMinParallelBytes) {
    run(0, cost);
    return;
  }
  const int64_t min_cost = cost / static_cast<int64_t>(bytes) * static_cast<int64_t>(kMinParallelBytes);
  guided_chunks(*pool, cost, std::max<int64_t>(1, min_cost), run);
}

}  // namespace moetier::quant
