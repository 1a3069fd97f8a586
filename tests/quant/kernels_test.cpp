// The SIMD matmul kernels against the scalar reference: dequantize the row with dequantize_row_ref, dot in double
// precision with the activations the kernels see. Run on every Highway target compiled in and supported here.
//  * exact (quant/kernels/matmul_kernels.h): float activations as given.
//  * match_ggml (quant/kernels/int8_kernels.h for quantized weights): the reference dots with the activations
//    rounded by round_activations_like_ggml (8-bit Q8_0/Q8_K codes times their scale; F16/BF16 for float weights).
//
// Tolerance, from the arithmetic. Float kernels decode each weight to exactly the reference's float, so the only
// error is float32 accumulation of the n = cols products in some association (lanes, two accumulator sets, lane
// reduction). For any association, |fl(sum w_i x_i) - sum w_i x_i| <= gamma_n * sum |w_i x_i| with
// gamma_n = n u / (1 - n u), u = 2^-24 (Higham, Accuracy and Stability, 3.1); we allow n = cols + 2. Integer
// kernels sum each block exactly; their error is the rounding of a few float products per block (d_w * d_x, the
// conversion of the block sum, the min term) and of the float sum over blocks, plus the reference's own float
// rounding when it dequantizes a weight (at most 2 roundings of terms no larger than the weight's scale times
// its code and min): all within the same gamma_n bound for n = cols + 2 >= 4 * (blocks + 2).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include "quant/blocks.h"
#include "quant/dequant_ref.h"
#include "quant/e8m0.h"
#include "quant/fp16.h"
#include "quant/ggml_type.h"
#include "quant/kernels/int8_arm.h"
#include "quant/kernels/int8_kernels.h"
#include "quant/kernels/matmul_kernels.h"
#include "quant/kernels/vec_kernels.h"
#include "quant/matmul.h"
#include "quant/repack.h"
#include "util/thread_pool.h"

namespace moetier::quant {
namespace {

constexpr GgmlType kTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16,   GgmlType::Q4_0,
                               GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,   GgmlType::Q8_0,
                               GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K,   GgmlType::Q5_K,
                               GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::MXFP4};

// Byte offsets of the fp16 scale fields within a block (quant/blocks.h).
std::vector<size_t> fp16_fields(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_0: case GgmlType::Q5_0: case GgmlType::Q8_0: case GgmlType::IQ4_NL: case GgmlType::IQ4_XS:
      return {0};
    case GgmlType::Q4_1: case GgmlType::Q5_1: case GgmlType::Q4_K: case GgmlType::Q5_K:
      return {0, 2};
    case GgmlType::Q2_K: return {80, 82};
    case GgmlType::Q3_K: return {108};
    case GgmlType::Q6_K: return {208};
    default: return {};
  }
}

void put16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

// A random valid matrix [rows, cols] of type t: every quant bit random, scales finite and moderate (fp16 scales
// in +-[2^-10, 2^-4], MXFP4 exponents 2^-27 .. 2^13), float elements N(0, 1) with some exact zeros.
std::vector<uint8_t> random_matrix(GgmlType t, int64_t rows, int64_t cols, std::mt19937& rng) {
  const size_t rb = row_bytes(t, cols);
  std::vector<uint8_t> m(rb * static_cast<size_t>(rows));
  std::uniform_int_distribution<int> byte(0, 255);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> mag(1.0f / 1024, 1.0f / 16);
  if (t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16) {
    for (int64_t i = 0; i < rows * cols; ++i) {
      const float v = byte(rng) < 8 ? 0.0f : normal(rng);
      uint8_t* p = m.data() + static_cast<size_t>(i / cols) * rb;
      const int64_t c = i % cols;
      if (t == GgmlType::F32) std::memcpy(p + 4 * c, &v, 4);
      if (t == GgmlType::F16) put16(p + 2 * c, fp32_to_fp16(v));
      if (t == GgmlType::BF16) put16(p + 2 * c, fp32_to_bf16(v));
    }
    return m;
  }
  for (auto& b : m) b = static_cast<uint8_t>(byte(rng));
  const auto& tr = traits(t);
  const int64_t n_blocks = rows * (cols / tr.block_size);
  for (int64_t i = 0; i < n_blocks; ++i) {
    uint8_t* blk = m.data() + static_cast<size_t>(i) * tr.type_size;
    for (size_t off : fp16_fields(t)) {
      const float s = (byte(rng) & 1 ? -1.0f : 1.0f) * mag(rng);
      put16(blk + off, fp32_to_fp16(s));
    }
    if (t == GgmlType::MXFP4) blk[0] = static_cast<uint8_t>(100 + byte(rng) % 41);
  }
  return m;
}

struct Case {
  GgmlType type;
  int64_t rows, cols, n_tok;
};

// Checks matmul() (one thread) on one case against the double-precision reference.
void check_case(const Case& c, ActivationRounding rounding, std::mt19937& rng, const char* target) {
  const std::vector<uint8_t> w = random_matrix(c.type, c.rows, c.cols, rng);
  const size_t rb = row_bytes(c.type, c.cols);
  std::vector<float> x(static_cast<size_t>(c.n_tok * c.cols));  // [n_tok, cols]
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (auto& v : x) v = normal(rng);
  std::vector<float> y(static_cast<size_t>(c.n_tok * c.rows), NAN);  // [n_tok, rows]
  MatmulScratch scratch(c.cols, c.n_tok, rounding);
  matmul(WeightView{c.type, w.data(), c.rows, c.cols, rb}, x.data(), y.data(), c.n_tok, scratch);
  if (rounding == ActivationRounding::match_ggml) {
    for (int64_t t = 0; t < c.n_tok; ++t) round_activations_like_ggml(c.type, x.data() + t * c.cols, c.cols);
  }

  std::vector<float> wrow(static_cast<size_t>(c.cols));  // [cols]
  const double u = std::ldexp(1.0, -24);
  const double n = static_cast<double>(c.cols + 2);
  const double gamma = n * u / (1.0 - n * u);
  for (int64_t r = 0; r < c.rows; ++r) {
    dequantize_row_ref(c.type, w.data() + static_cast<size_t>(r) * rb, wrow.data(), c.cols);
    for (int64_t t = 0; t < c.n_tok; ++t) {
      double ref = 0.0, abs_sum = 0.0;
      for (int64_t i = 0; i < c.cols; ++i) {
        const double p = static_cast<double>(wrow[static_cast<size_t>(i)]) * x[static_cast<size_t>(t * c.cols + i)];
        ref += p;
        abs_sum += std::fabs(p);
      }
      const double got = y[static_cast<size_t>(t * c.rows + r)];
      ASSERT_LE(std::fabs(got - ref), gamma * abs_sum)
          << type_name(c.type) << " target " << target
          << (rounding == ActivationRounding::exact ? " exact" : " match_ggml") << " rows " << c.rows << " cols " << c.cols << " n_tok "
          << c.n_tok << " at r " << r << " t " << t << ": got " << got << " want " << ref;
    }
  }
}

// The kernels to test in turn on this CPU: each Highway target compiled in and supported (the Arm dot-product
// kernels off), AVX3_DL again with the other answer of kernels::one_stream_rows (decode's rows read in one stream or
// two), then on Arm CPUs with FEAT_DotProd the sdot kernels, and with FEAT_I8MM sdot and smmla (int8_arm.h; the
// float types still take the best Highway target there).
struct Variant {
  int64_t target;  // for hwy::SetSupportedTargetsForTest; 0: the best one
  unsigned arm;    // for kernels::arm::limit_features_for_test
  std::string name;
  int one_stream = -1;  // for kernels::set_one_stream_rows_for_test; -1: the CPU's own
};
std::vector<Variant> kernel_variants() {
  std::vector<Variant> v;
  for (int64_t target : kernels::compiled_targets()) v.push_back({target, 0u, hwy::TargetName(target)});
  for (int64_t target : kernels::compiled_targets()) {
    if (target != HWY_AVX3_DL) continue;
    const bool one = !kernels::one_stream_rows();
    v.push_back({target, 0u, std::string(hwy::TargetName(target)) + (one ? ", one stream" : ", two streams"),
                 one ? 1 : 0});
  }
  const unsigned arm = kernels::arm::features();
  if (arm & kernels::arm::kArmDotProd) v.push_back({0, kernels::arm::kArmDotProd, "NEON + sdot"});
  if (arm & kernels::arm::kArmI8mm) v.push_back({0, kernels::arm::kArmAllFeatures, "NEON + sdot + smmla"});
  return v;
}
void use_variant(const Variant& v) {
  hwy::SetSupportedTargetsForTest(v.target);
  kernels::arm::limit_features_for_test(v.arm);
  kernels::set_one_stream_rows_for_test(v.one_stream);
}
void use_best_kernels() {
  hwy::SetSupportedTargetsForTest(0);
  kernels::arm::limit_features_for_test(kernels::arm::kArmAllFeatures);
  kernels::set_one_stream_rows_for_test(-1);
}

TEST(MatmulKernels, MatchReferenceOnEveryTarget) {
  const std::vector<Variant> variants = kernel_variants();
  ASSERT_FALSE(variants.empty());
  std::cout << "integer kernels of this CPU: " << kernels::int8_kernels_name() << "; testing";
  for (const Variant& v : variants) std::cout << " [" << v.name << "]";
  std::cout << "\n";
  std::mt19937 rng(1234);
  for (const Variant& variant : variants) {
    use_variant(variant);
    const char* name = variant.name.c_str();
    for (GgmlType t : kTypes) {
      ASSERT_TRUE(kernels::has_kernel(t)) << type_name(t);
      const int64_t bs = traits(t).block_size;
      std::vector<int64_t> col_sizes;
      for (int64_t cols : {256, 2048, 2880}) {
        if (cols % bs == 0) col_sizes.push_back(cols);
      }
      if (bs == 1) col_sizes.push_back(7), col_sizes.push_back(2881);  // float rows need not be whole vectors
      if (bs == 256) col_sizes.push_back(768);  // 3 blocks: a pair and one more (the AVX-512 Q4_K row takes pairs)
      if (bs == 32) col_sizes.push_back(96);  // 3 blocks: the AVX-512 MXFP4 row takes pairs too
      for (int64_t cols : col_sizes) {
        for (int64_t rows : {1, 7, 64}) {
          // On AVX2, several tokens take the token tiles: 3 a paired one, 8 a full one, 12 both, 24 three full
          // ones (a pass of several tiles, where the K-quants' scales are widened).
          for (int64_t n_tok : {1, 3, 8, 12, 24}) {
            for (ActivationRounding rounding : {ActivationRounding::exact, ActivationRounding::match_ggml}) {
              check_case({t, rows, cols, n_tok}, rounding, rng, name);
              if (HasFatalFailure()) {
                use_best_kernels();
                return;
              }
            }
          }
        }
      }
    }
  }
  use_best_kernels();
}

// The Arm dot-product kernels: sdot alone and sdot with smmla give every (row, token) the same block sums and the
// same float steps (int8_arm.h), so a product is the same bits with or without FEAT_I8MM and whatever number of
// tokens shares it (one at a time, as decode computes them, or in a batch of 2-9: the 2x2 smmla tiles, their
// four-token groups and partial last groups, and rows not a multiple of four).
TEST(MatmulKernels, ArmDotKernelsGiveTheSameBitsForAnyBatch) {
  const unsigned arm = kernels::arm::features();
  if (!(arm & kernels::arm::kArmDotProd)) GTEST_SKIP() << "needs an Arm CPU with FEAT_DotProd (this one: "
                                                       << kernels::int8_kernels_name() << ")";
  std::vector<unsigned> masks = {kernels::arm::kArmDotProd};
  if (arm & kernels::arm::kArmI8mm) masks.push_back(kernels::arm::kArmAllFeatures);
  std::mt19937 rng(77);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t rows = 11;
  for (GgmlType t : kTypes) {
    if (kernels::q8_format(t) == kernels::Q8Format::none) continue;
    const int64_t cols = traits(t).block_size == 256 ? 768 : 96;
    const auto wb = random_matrix(t, rows, cols, rng);
    const WeightView w{t, wb.data(), rows, cols, row_bytes(t, cols)};
    for (int64_t n_tok : {2, 3, 4, 5, 9}) {
      std::vector<float> x(static_cast<size_t>(n_tok * cols));  // [n_tok, cols]
      for (auto& v : x) v = normal(rng);
      // One token at a time with sdot alone: the decode path.
      kernels::arm::limit_features_for_test(kernels::arm::kArmDotProd);
      std::vector<float> single(static_cast<size_t>(n_tok * rows));  // [n_tok, rows]
      MatmulScratch one(cols, 1, ActivationRounding::match_ggml);
      for (int64_t tok = 0; tok < n_tok; ++tok)
        matmul(w, x.data() + tok * cols, single.data() + tok * rows, 1, one);
      for (unsigned mask : masks) {
        kernels::arm::limit_features_for_test(mask);
        MatmulScratch mm(cols, n_tok, ActivationRounding::match_ggml);
        std::vector<float> y(single.size(), NAN);
        matmul(w, x.data(), y.data(), n_tok, mm);
        EXPECT_EQ(0, std::memcmp(single.data(), y.data(), sizeof(float) * y.size()))
            << type_name(t) << " n_tok " << n_tok << (mask & kernels::arm::kArmI8mm ? " sdot + smmla" : " sdot");
      }
    }
  }
  use_best_kernels();
}

// Decode's rows read in one stream or in two (kernels::one_stream_rows) is only the order in which a thread takes
// them: each row's result is the same bits either way, on every target, with one thread and with two.
TEST(MatmulKernels, OneStreamOrTwoGiveTheSameBits) {
  std::mt19937 rng(31);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  util::ThreadPool pool(2);
  for (const Variant& variant : kernel_variants()) {
    use_variant(variant);
    for (GgmlType t : kTypes) {
      const int64_t cols = 768, rows = 37;  // three K-quant blocks (a pair and one more); rows odd
      const auto wb = random_matrix(t, rows, cols, rng);
      const WeightView w{t, wb.data(), rows, cols, row_bytes(t, cols)};
      std::vector<float> x(static_cast<size_t>(cols));  // [1, cols]
      for (auto& v : x) v = normal(rng);
      for (util::ThreadPool* threads : {static_cast<util::ThreadPool*>(nullptr), &pool}) {
        std::vector<float> y[2];  // [rows] each: two streams, one
        for (int one : {0, 1}) {
          kernels::set_one_stream_rows_for_test(one);
          MatmulScratch mm(cols, 1, ActivationRounding::match_ggml);
          if (threads != nullptr) mm.set_pool(threads);
          y[one].assign(static_cast<size_t>(rows), NAN);
          matmul(w, x.data(), y[one].data(), 1, mm);
        }
        const char* how = threads != nullptr ? ", 2 threads" : ", 1 thread";
        for (const std::vector<float>& v : y) {  // every row written (the NaN fill gone) with a finite result
          EXPECT_TRUE(std::all_of(v.begin(), v.end(), [](float f) { return std::isfinite(f); }))
              << type_name(t) << " " << variant.name << how;
        }
        EXPECT_EQ(0, std::memcmp(y[0].data(), y[1].data(), sizeof(float) * y[0].size()))
            << type_name(t) << " " << variant.name << how;
      }
    }
  }
  use_best_kernels();
}

// matmul() through a pool: every row is computed by the same kernel whichever thread takes it, so the result is
// bit-identical to one thread; also covers the row split (rows not a multiple of the threads or of 4).
TEST(MatmulKernels, ThreadsGiveIdenticalResults) {
  std::mt19937 rng(99);
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q8_0, GgmlType::F16}) {
    // one token: on AVX-512 Q4_K rows go in pairs, whose odd last blocks are taken together (768 columns: three)
    for (auto [rows, n_tok] : {std::pair<int64_t, int64_t>{130, 3}, {1001, 3}, {1001, 1}}) {
      const int64_t cols = 768;
      const std::vector<uint8_t> wb = random_matrix(t, rows, cols, rng);
      const WeightView w{t, wb.data(), rows, cols, row_bytes(t, cols)};
      std::vector<float> x(static_cast<size_t>(n_tok * cols));
      std::normal_distribution<float> normal(0.0f, 1.0f);
      for (auto& v : x) v = normal(rng);
      for (ActivationRounding rounding : {ActivationRounding::exact, ActivationRounding::match_ggml}) {
      MatmulScratch one(cols, n_tok, rounding);
      std::vector<float> y1(static_cast<size_t>(n_tok * rows));
      matmul(w, x.data(), y1.data(), n_tok, one);
      for (int threads : {2, 3}) {
        util::ThreadPool pool(threads);
        MatmulScratch many(cols, n_tok, rounding);
        many.set_pool(&pool);
        std::vector<float> yn(static_cast<size_t>(n_tok * rows), NAN);
        for (int rep = 0; rep < 3; ++rep) {
          matmul(w, x.data(), yn.data(), n_tok, many);
          ASSERT_EQ(0, std::memcmp(y1.data(), yn.data(), sizeof(float) * y1.size()))
              << type_name(t) << " rows " << rows << " threads " << threads;
        }
      }
      }
    }
  }
}

// The one-token kernels read a thread's rows as two streams, a row of each half in turn, and take rows in groups
// (AVX-512 Q4_K two at a time, one of each stream, with the odd last blocks of the two together; MXFP4, Q4_0, Q5_0
// four at a time): a row's result must not depend on which rows share its group, or a different split of the rows
// (threads) would change the logits. The same rows as a view starting 1 or 3 rows on shift every grouping.
TEST(MatmulKernels, RowResultsDoNotDependOnTheirNeighbours) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t cols = 768, rows = 11;
  std::vector<float> x(static_cast<size_t>(cols));  // [1, cols]
  for (auto& v : x) v = normal(rng);
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q5_0,
                     GgmlType::IQ4_XS, GgmlType::MXFP4}) {
    const auto wb = random_matrix(t, rows, cols, rng);
    const size_t rb = row_bytes(t, cols);
    MatmulScratch mm(cols, 1, ActivationRounding::match_ggml);
    std::vector<float> all(static_cast<size_t>(rows));  // [1, rows]
    matmul(WeightView{t, wb.data(), rows, cols, rb}, x.data(), all.data(), 1, mm);
    for (int64_t skip : {1, 3}) {
      std::vector<float> part(static_cast<size_t>(rows - skip));
      matmul(WeightView{t, wb.data() + static_cast<size_t>(skip) * rb, rows - skip, cols, rb}, x.data(), part.data(),
             1, mm);
      EXPECT_EQ(0, std::memcmp(all.data() + skip, part.data(), sizeof(float) * part.size()))
          << type_name(t) << " rows from " << skip;
    }
  }
}

// Tokens [n_tok, cols] of x quantized as the kernels of weight type t see them (kernels::quantize_q8_row): codes
// q [n_tok, cols], block scales d [n_tok, cols / block], sums of 16 [n_tok, cols / 16].
struct QuantizedTokens {
  std::vector<int8_t> q;
  std::vector<float> d;
  std::vector<int16_t> sums;
  QuantizedTokens(GgmlType t, const float* x, int64_t n_tok, int64_t cols)
      : q(static_cast<size_t>(n_tok * cols)),
        d(static_cast<size_t>(n_tok * cols / kernels::q8_block(kernels::q8_format(t)))),
        sums(static_cast<size_t>(n_tok * cols / 16)) {
    const kernels::Q8Rows xq{kernels::q8_format(t), cols, q.data(), d.data(), sums.data()};
    for (int64_t tok = 0; tok < n_tok; ++tok) kernels::quantize_q8_row(x, tok, xq);
  }
};

// The 8-bit activation rows the integer kernels read are exactly the reference rounding: code * scale equals
// round_activations_like_ggml's value, every code is in -127..127, and the sums of 16 are the codes' sums. Also
// covers an all-zero block and a block whose largest magnitude occurs with both signs (Q8_K keeps the first).
TEST(MatmulKernels, ActivationQuantizationMatchesReferenceRounding) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t target : kernels::compiled_targets()) {
    hwy::SetSupportedTargetsForTest(target);
    for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_K}) {
      const kernels::Q8Format f = kernels::q8_format(t);
      const int64_t cols = 1024, n_tok = 3;
      std::vector<float> x(static_cast<size_t>(n_tok * cols));
      for (auto& v : x) v = normal(rng) * 3.0f;
      std::fill(x.begin(), x.begin() + 256, 0.0f);   // token 0: first block(s) all zero
      x[300] = -50.0f, x[301] = 50.0f, x[302] = 1.0f;  // token 0: a tie of magnitudes, negative first
      const QuantizedTokens a(t, x.data(), n_tok, cols);
      const std::vector<int8_t>& q = a.q;
      const std::vector<float>& d = a.d;
      const std::vector<int16_t>& sums = a.sums;
      std::vector<float> want = x;
      for (int64_t tok = 0; tok < n_tok; ++tok) round_activations_like_ggml(t, want.data() + tok * cols, cols);
      const int64_t blk = kernels::q8_block(f);
      for (int64_t tok = 0; tok < n_tok; ++tok) {
        for (int64_t i = 0; i < cols; ++i) {
          const size_t k = static_cast<size_t>(tok * cols + i);
          ASSERT_LE(std::abs(q[k]), 127) << type_name(t) << " " << hwy::TargetName(target);
          const float got = d[static_cast<size_t>(tok * (cols / blk) + i / blk)] * static_cast<float>(q[k]);
          ASSERT_EQ(got, want[k]) << type_name(t) << " " << hwy::TargetName(target) << " tok " << tok << " i " << i;
        }
        for (int64_t s16 = 0; s16 < cols / 16; ++s16) {
          int sum = 0;
          for (int64_t i = 0; i < 16; ++i) sum += q[static_cast<size_t>(tok * cols + 16 * s16 + i)];
          ASSERT_EQ(sum, sums[static_cast<size_t>(tok * (cols / 16) + s16)]);
        }
      }
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

// A NaN or infinite activation (a damaged or hostile file's weights can make one) anywhere in a block: the block's
// scale is NaN and its codes 0, on every target and in both formats, so the products with it come out NaN instead
// of finite garbage, and quantizing reads nothing past the row (the largest-magnitude scan once ran off the end of
// a block holding a NaN). The other blocks quantize as before.
TEST(MatmulKernels, NonFiniteActivationsMakeTheirBlockNaN) {
  for (int64_t target : kernels::compiled_targets()) {
    hwy::SetSupportedTargetsForTest(target);
    for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_K}) {
      const kernels::Q8Format f = kernels::q8_format(t);
      const int64_t cols = 512, blk = kernels::q8_block(f);
      for (const float bad : {NAN, INFINITY, -INFINITY}) {
        for (const int64_t at : {int64_t{0}, blk / 2 + 1, blk - 1}) {
          std::vector<float> x(static_cast<size_t>(cols), 0.25f);
          x[static_cast<size_t>(at)] = bad;
          std::vector<int8_t> q(x.size(), 99);
          std::vector<int16_t> sums(x.size() / 16);
          std::vector<float> d(x.size() / 32, -1.0f);
          const kernels::Q8Rows rows{f, cols, q.data(), d.data(), sums.data()};
          kernels::quantize_q8_row(x.data(), 0, rows);
          const std::string what = std::string(type_name(t)) + " " + hwy::TargetName(target) + " x[" +
                                   std::to_string(at) + "] = " + std::to_string(bad);
          EXPECT_TRUE(std::isnan(d[0])) << what;
          for (int64_t i = 0; i < blk; ++i) ASSERT_EQ(q[static_cast<size_t>(i)], 0) << what << ", code " << i;
          for (int64_t s16 = 0; s16 < blk / 16; ++s16) EXPECT_EQ(sums[static_cast<size_t>(s16)], 0) << what;
          EXPECT_TRUE(std::isfinite(d[1]) && d[1] != 0.0f) << what;  // the next block: all 0.25
          EXPECT_NE(q[static_cast<size_t>(blk)], 0) << what;
        }
      }
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

TEST(ThreadPool, RunsEveryIndexOncePerRun) {
  for (int n : {1, 2, 4}) {
    util::ThreadPool pool(n);
    EXPECT_EQ(pool.size(), n);
    std::vector<int> hits(static_cast<size_t>(n), 0);
    for (int rep = 0; rep < 1000; ++rep) pool.run([&](int i) { ++hits[static_cast<size_t>(i)]; });
    for (int i = 0; i < n; ++i) EXPECT_EQ(hits[static_cast<size_t>(i)], 1000) << i;
  }
}

}  // namespace
}  // namespace moetier::quant

namespace moetier::quant {
namespace {

// The attention kernels against double-precision sums, on every target: head dims around the vector widths
// (real ones are 64..256; odd ones cover the scalar tails), groups of 1-8 query heads (the 4-head blocks and
// their remainders), 67 cached rows from row 3 (a 64-row tile and a partial one), rows strided wider than the
// head. Bounds: gamma_m * sum |products| (m = the terms + 2, as at the top of this file). And each head's result
// is bit-identical to that head computed alone (group 1): the kernels' blocking does not touch the arithmetic.
TEST(VecKernels, AttentionMatchesReferenceOnEveryTarget) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> prob(0.0f, 1.0f);
  const double u = std::ldexp(1.0, -24);
  const auto gamma = [&](int64_t m) { return static_cast<double>(m + 2) * u / (1.0 - static_cast<double>(m + 2) * u); };
  const int64_t j0 = 3, j1 = 70;
  for (int64_t target : kernels::compiled_targets()) {
    hwy::SetSupportedTargetsForTest(target);
    for (int64_t n : {1, 7, 16, 33, 64, 128, 257}) {
      const int64_t ld_kv = 2 * n + 5, ld_s = j1 + 1;
      std::vector<uint16_t> kv16(static_cast<size_t>(j1 * ld_kv));  // [j1, ld_kv]: keys, then values reused
      std::vector<float> kv32(kv16.size());
      for (size_t e = 0; e < kv16.size(); ++e) kv16[e] = fp32_to_fp16(normal(rng)), kv32[e] = fp16_to_fp32(kv16[e]);
      for (int64_t group : {1, 3, 4, 8}) {
        std::vector<float> q(static_cast<size_t>(group * n)), p(static_cast<size_t>(group * ld_s));
        for (auto& e : q) e = normal(rng);
        for (auto& e : p) e = prob(rng);
        std::vector<float> s16(p.size(), NAN), s32(p.size(), NAN), o16(q.size(), NAN), o32(q.size(), NAN);
        kernels::attn_scores_f16(q.data(), group, n, kv16.data(), ld_kv, j0, j1, 0.125f, s16.data(), ld_s);
        kernels::attn_scores_f32(q.data(), group, n, kv32.data(), ld_kv, j0, j1, 0.125f, s32.data(), ld_s);
        kernels::attn_values_f16(p.data(), group, ld_s, kv16.data() + n, ld_kv, j0, j1, n, o16.data());
        kernels::attn_values_f32(p.data(), group, ld_s, kv32.data() + n, ld_kv, j0, j1, n, o32.data());
        const std::string where = std::string(hwy::TargetName(target)) + " n " + std::to_string(n) + " group " +
                                  std::to_string(group);
        for (int64_t g = 0; g < group; ++g) {
          for (int64_t j = j0; j < j1; ++j) {
            double ref = 0.0, abs_sum = 0.0;
            for (int64_t i = 0; i < n; ++i) {
              const double pr = static_cast<double>(q[static_cast<size_t>(g * n + i)]) *
                                kv32[static_cast<size_t>(j * ld_kv + i)];
              ref += pr, abs_sum += std::fabs(pr);
            }
            const size_t at = static_cast<size_t>(g * ld_s + j);
            const double tol = 0.125 * (gamma(n) * abs_sum + u * std::fabs(ref));  // and the scale's rounding
            EXPECT_LE(std::fabs(s16[at] - 0.125 * ref), tol) << where;
            EXPECT_LE(std::fabs(s32[at] - 0.125 * ref), tol) << where;
          }
          for (int64_t i = 0; i < n; ++i) {
            double ref = 0.0, abs_sum = 0.0;
            for (int64_t j = j0; j < j1; ++j) {
              const double pr = static_cast<double>(p[static_cast<size_t>(g * ld_s + j)]) *
                                kv32[static_cast<size_t>(j * ld_kv + n + i)];
              ref += pr, abs_sum += std::fabs(pr);
            }
            const size_t at = static_cast<size_t>(g * n + i);
            EXPECT_LE(std::fabs(o16[at] - ref), gamma(j1 - j0) * abs_sum) << where << " i " << i;
            EXPECT_LE(std::fabs(o32[at] - ref), gamma(j1 - j0) * abs_sum) << where << " i " << i;
          }
          // Head g alone.
          std::vector<float> s1(static_cast<size_t>(ld_s), NAN), o1(static_cast<size_t>(n), NAN);
          kernels::attn_scores_f16(q.data() + g * n, 1, n, kv16.data(), ld_kv, j0, j1, 0.125f, s1.data(), ld_s);
          kernels::attn_values_f16(p.data() + g * ld_s, 1, ld_s, kv16.data() + n, ld_kv, j0, j1, n, o1.data());
          const size_t row_bytes = sizeof(float) * static_cast<size_t>(j1 - j0);
          EXPECT_EQ(0, std::memcmp(s1.data() + j0, s16.data() + g * ld_s + j0, row_bytes)) << where << " head " << g;
          EXPECT_EQ(0, std::memcmp(o1.data(), o16.data() + g * n, sizeof(float) * static_cast<size_t>(n)))
              << where << " head " << g;
        }
      }
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

}  // namespace
}  // namespace moetier::quant

namespace moetier::quant {
namespace {

// Products sharing their activations in one pass give bit-identical results to separate products, with and
// without threads, also when their types differ (the one-at-a-time fallback).
TEST(MatmulKernels, SharedActivationsMatchSeparateProducts) {
  std::mt19937 rng(21);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t cols = 512, n_tok = 3;
  std::vector<float> x(static_cast<size_t>(n_tok * cols));
  for (auto& v : x) v = normal(rng);
  for (const auto& types : {std::pair{GgmlType::Q4_K, GgmlType::Q4_K}, std::pair{GgmlType::Q4_K, GgmlType::Q6_K}}) {
    const int64_t ra = 300, rb = 77;
    const auto wa = random_matrix(types.first, ra, cols, rng);
    const auto wb = random_matrix(types.second, rb, cols, rng);
    const WeightView a{types.first, wa.data(), ra, cols, row_bytes(types.first, cols)};
    const WeightView b{types.second, wb.data(), rb, cols, row_bytes(types.second, cols)};
    for (int threads : {1, 2, 3}) {
      util::ThreadPool pool(threads);
      MatmulScratch mm(cols, n_tok, ActivationRounding::match_ggml);
      mm.set_pool(&pool);
      std::vector<float> ya(static_cast<size_t>(n_tok * ra)), yb(static_cast<size_t>(n_tok * rb));
      std::vector<float> za(ya.size(), NAN), zb(yb.size(), NAN);
      matmul(a, x.data(), ya.data(), n_tok, mm);
      matmul(b, x.data(), yb.data(), n_tok, mm);
      const Product ps[] = {{a, za.data()}, {b, zb.data()}};
      matmul_shared_x(ps, x.data(), n_tok, mm);
      EXPECT_EQ(0, std::memcmp(ya.data(), za.data(), sizeof(float) * ya.size())) << threads;
      EXPECT_EQ(0, std::memcmp(yb.data(), zb.data(), sizeof(float) * yb.size())) << threads;
    }
  }
}

// Groups of products with their own activations in one pass (a MoE layer's experts) give bit-identical results
// to one call per group, with 1-3 threads (the split by cost crosses groups), when a group has no integer path
// (an F16 group beside them: each group then takes its own path), and when the groups' rows exceed the
// scratch's max_group_rows (one at a time).
TEST(MatmulKernels, GroupsMatchSeparateCalls) {
  std::mt19937 rng(22);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t cols = 512, max_tok = 5;
  const int64_t n_tok[] = {1, 5, 2, 3};
  const GgmlType types[] = {GgmlType::Q4_K, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::F16};
  const int64_t rows[] = {96, 130, 64, 40};
  std::vector<std::vector<uint8_t>> wb;
  std::vector<std::vector<float>> xs;
  std::vector<WeightView> w;
  for (size_t g = 0; g < 4; ++g) {
    wb.push_back(random_matrix(types[g], rows[g], cols, rng));
    w.push_back(WeightView{types[g], wb[g].data(), rows[g], cols, row_bytes(types[g], cols)});
    xs.emplace_back(static_cast<size_t>(n_tok[g] * cols));
    for (auto& v : xs[g]) v = normal(rng);
  }
  for (size_t n_groups : {size_t{3}, size_t{4}}) {  // integer groups only; with the F16 group
    for (int64_t max_group_rows : {int64_t{16}, int64_t{6}}) {  // all fit; more than fit
      for (int threads : {1, 2, 3}) {
        util::ThreadPool pool(threads);
        MatmulScratch mm(cols, max_tok, ActivationRounding::match_ggml, max_group_rows);
        mm.set_pool(&pool);
        std::vector<std::vector<float>> want, got;
        std::vector<Product> ps;
        std::vector<ProductGroup> gs;
        for (size_t g = 0; g < n_groups; ++g) {
          want.emplace_back(static_cast<size_t>(n_tok[g] * rows[g]));
          got.emplace_back(want.back().size(), NAN);
          matmul(w[g], xs[g].data(), want[g].data(), n_tok[g], mm);
        }
        for (size_t g = 0; g < n_groups; ++g) ps.push_back(Product{w[g], got[g].data()});
        for (size_t g = 0; g < n_groups; ++g) gs.push_back(ProductGroup{{&ps[g], 1}, xs[g].data(), n_tok[g]});
        matmul_groups(gs, mm);
        for (size_t g = 0; g < n_groups; ++g) {
          EXPECT_EQ(0, std::memcmp(want[g].data(), got[g].data(), sizeof(float) * want[g].size()))
              << "group " << g << " of " << n_groups << ", max_group_rows " << max_group_rows << ", threads "
              << threads;
        }
      }
    }
  }
}

// Groups that share their activations (the same x: a MoE layer's experts at decode) are quantized once, and each
// still gives bit-identical results to its own call: groups of the same type and x, one of another type between
// them (its own quantization), MXFP4 groups (the pair sums) and Q4_K groups of 3 tokens (the token tiles), with 1
// and 2 threads.
TEST(MatmulKernels, GroupsSharingActivationsMatchSeparateCalls) {
  std::mt19937 rng(31);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t cols = 512;
  for (int64_t n_tok : {1, 3}) {
    std::vector<float> x1(static_cast<size_t>(n_tok * cols)), x2(x1.size());  // [n_tok, cols] each
    for (auto& v : x1) v = normal(rng);
    for (auto& v : x2) v = normal(rng);
    const GgmlType types[] = {GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q4_K, GgmlType::Q4_K,
                              GgmlType::MXFP4, GgmlType::MXFP4};
    const float* xs[] = {x1.data(), x1.data(), x2.data(), x1.data(), x1.data(), x1.data()};
    const int64_t rows[] = {40, 36, 44, 52, 64, 33};
    constexpr size_t kGroups = 6;
    std::vector<std::vector<uint8_t>> wb;
    for (size_t g = 0; g < kGroups; ++g) wb.push_back(random_matrix(types[g], rows[g], cols, rng));
    for (int threads : {1, 2}) {
      util::ThreadPool pool(threads);
      MatmulScratch mm(cols, n_tok, ActivationRounding::match_ggml, n_tok * static_cast<int64_t>(kGroups));
      mm.set_pool(&pool);
      std::vector<std::vector<float>> want, got;
      std::vector<Product> ps;
      std::vector<ProductGroup> gs;
      for (size_t g = 0; g < kGroups; ++g) {
        const WeightView w{types[g], wb[g].data(), rows[g], cols, row_bytes(types[g], cols)};
        want.emplace_back(static_cast<size_t>(n_tok * rows[g]));
        got.emplace_back(want.back().size(), NAN);
        matmul(w, xs[g], want[g].data(), n_tok, mm);
        ps.push_back(Product{w, nullptr});
      }
      for (size_t g = 0; g < kGroups; ++g) ps[g].y = got[g].data();
      for (size_t g = 0; g < kGroups; ++g) gs.push_back(ProductGroup{{&ps[g], 1}, xs[g], n_tok, n_tok > 1});
      matmul_groups(gs, mm);
      for (size_t g = 0; g < kGroups; ++g) {
        EXPECT_EQ(0, std::memcmp(want[g].data(), got[g].data(), sizeof(float) * want[g].size()))
            << "group " << g << " (" << type_name(types[g]) << "), n_tok " << n_tok << ", threads " << threads;
      }
    }
  }
}

// A prompt's groups (over 64 K activation values: the activations are quantized and tiled on the pool's threads,
// tile by tile) give the bits of one call per group on one thread: token-tiled groups (Q4_K, MXFP4: 20 and 13
// tokens, partial tiles), one that shares an earlier group's activations, and IQ4_XS (token tiles with AVX512-VNNI,
// elsewhere row by row, whose units are tokens), with 2 and 3 threads.
TEST(MatmulKernels, PromptGroupsQuantizedOnThreadsMatchOneThread) {
  std::mt19937 rng(32);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t cols = 2048, max_tok = 20;
  const GgmlType types[] = {GgmlType::Q4_K, GgmlType::MXFP4, GgmlType::Q4_K, GgmlType::IQ4_XS};
  const int64_t n_tok[] = {20, 13, 20, 9};
  const int64_t rows[] = {48, 40, 36, 24};
  const size_t x_of[] = {0, 1, 0, 2};  // group 2 shares group 0's activations
  constexpr size_t kGroups = 4;
  std::vector<std::vector<float>> xs;  // [n_tok, cols] each
  for (int64_t n : {int64_t{20}, int64_t{13}, int64_t{9}}) {
    xs.emplace_back(static_cast<size_t>(n * cols));
    for (auto& v : xs.back()) v = normal(rng);
  }
  std::vector<std::vector<uint8_t>> wb;
  std::vector<WeightView> w;
  for (size_t g = 0; g < kGroups; ++g) {
    wb.push_back(random_matrix(types[g], rows[g], cols, rng));
    w.push_back(WeightView{types[g], wb[g].data(), rows[g], cols, row_bytes(types[g], cols)});
  }
  MatmulScratch one(cols, max_tok, ActivationRounding::match_ggml);
  std::vector<std::vector<float>> want;
  for (size_t g = 0; g < kGroups; ++g) {
    want.emplace_back(static_cast<size_t>(n_tok[g] * rows[g]));
    matmul(w[g], xs[x_of[g]].data(), want[g].data(), n_tok[g], one);
  }
  for (int threads : {2, 3}) {
    util::ThreadPool pool(threads);
    MatmulScratch mm(cols, max_tok, ActivationRounding::match_ggml, 20 + 13 + 20 + 9);
    mm.set_pool(&pool);
    std::vector<std::vector<float>> got;
    std::vector<Product> ps;
    std::vector<ProductGroup> gs;
    for (size_t g = 0; g < kGroups; ++g) got.emplace_back(want[g].size(), NAN);
    for (size_t g = 0; g < kGroups; ++g) ps.push_back(Product{w[g], got[g].data()});
    for (size_t g = 0; g < kGroups; ++g) gs.push_back(ProductGroup{{&ps[g], 1}, xs[x_of[g]].data(), n_tok[g], true});
    matmul_groups(gs, mm);
    for (size_t g = 0; g < kGroups; ++g) {
      EXPECT_EQ(0, std::memcmp(want[g].data(), got[g].data(), sizeof(float) * want[g].size()))
          << "group " << g << " (" << type_name(types[g]) << "), threads " << threads;
    }
  }
}

// With two or more tokens, a token's result does not depend on the other tokens of the product (how many, or
// where it sits among them): the rows of a 2-token product are bit-identical to the same tokens' rows within 131
// (on AVX2: 17 tiles of 8 tokens, the last padded, in two passes of 16 tiles), and so are the rows of a lone token
// in a batched group (a routed expert's one token of a prompt). So a prompt's logits do not depend on how it was
// batched or how its tokens were routed. Q4_K, Q5_K, Q6_K, Q4_0, Q5_0 and MXFP4 take the token-interleaved kernels
// on AVX2, Q8_0 the row-major tiles.
TEST(MatmulKernels, TokenResultsDoNotDependOnTheOtherTokens) {
  std::mt19937 rng(23);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t cols = 512, rows = 70, n_tok = 131;
  std::vector<float> x(static_cast<size_t>(n_tok * cols));  // [n_tok, cols]
  for (auto& v : x) v = normal(rng);
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q5_0,
                     GgmlType::IQ4_XS, GgmlType::MXFP4}) {
    const auto wb = random_matrix(t, rows, cols, rng);
    const WeightView w{t, wb.data(), rows, cols, row_bytes(t, cols)};
    MatmulScratch mm(cols, n_tok, ActivationRounding::match_ggml);
    std::vector<float> all(static_cast<size_t>(n_tok * rows));  // [n_tok, rows]
    matmul(w, x.data(), all.data(), n_tok, mm);
    for (int64_t a = 0; a < n_tok; ++a) {
      const int64_t b = (a * 7 + 3) % n_tok == a ? (a + 1) % n_tok : (a * 7 + 3) % n_tok;
      std::vector<float> pair_x(static_cast<size_t>(2 * cols));  // tokens b, a: a in the second lane
      std::memcpy(pair_x.data(), x.data() + b * cols, sizeof(float) * static_cast<size_t>(cols));
      std::memcpy(pair_x.data() + cols, x.data() + a * cols, sizeof(float) * static_cast<size_t>(cols));
      std::vector<float> pair_y(static_cast<size_t>(2 * rows));
      matmul(w, pair_x.data(), pair_y.data(), 2, mm);
      EXPECT_EQ(0, std::memcmp(all.data() + a * rows, pair_y.data() + rows, sizeof(float) * static_cast<size_t>(rows)))
          << type_name(t) << " token " << a;
      EXPECT_EQ(0, std::memcmp(all.data() + b * rows, pair_y.data(), sizeof(float) * static_cast<size_t>(rows)))
          << type_name(t) << " token " << b;
      // Alone, as a routed expert's one token of a prompt (ProductGroup::batched).
      std::vector<float> one_y(static_cast<size_t>(rows));
      const Product one{w, one_y.data()};
      const ProductGroup group{{&one, 1}, x.data() + a * cols, 1, true};
      matmul_groups({&group, 1}, mm);
      EXPECT_EQ(0, std::memcmp(all.data() + a * rows, one_y.data(), sizeof(float) * static_cast<size_t>(rows)))
          << type_name(t) << " token " << a << " alone in a batched group";
    }
  }
}

}  // namespace
}  // namespace moetier::quant

namespace moetier::quant {
namespace {

// The AVX512-VNNI token tiles of Q4_K, Q5_K, Q6_K, Q4_0, Q5_0 and MXFP4 (int8_vnni512-inl.h: 16 rows in the lanes of a
// vector) compute the same block sums and the same float steps as the 256-bit tiles of AVX2 and AVX-512
// (int8_avx2-inl.h: 8 tokens in the lanes), so every target that takes token tiles gives the same bits. Covers
// partial groups of 16 rows (37 rows), paired tiles (at most 4 tokens), a tile of each size, several tiles, one
// token of a batched group, and for the 32-block types an odd number of blocks (2880 columns: gpt-oss's width).
TEST(MatmulKernels, TokenTilesAgreeBitForBitOnEveryTarget) {
  std::vector<int64_t> targets;
  for (int64_t target : kernels::compiled_targets()) {
    hwy::SetSupportedTargetsForTest(target);
    if (kernels::uses_token_tiles(GgmlType::Q4_K)) targets.push_back(target);
  }
  hwy::SetSupportedTargetsForTest(0);
  if (targets.size() < 2) GTEST_SKIP() << "fewer than two targets with token tiles on this CPU";
  std::mt19937 rng(31);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t rows = 37;
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::MXFP4}) {
    const bool blocks32 = t == GgmlType::Q4_0 || t == GgmlType::Q5_0 || t == GgmlType::MXFP4;
    for (int64_t cols : {int64_t{768}, blocks32 ? int64_t{2880} : int64_t{2048}}) {
      const auto wb = random_matrix(t, rows, cols, rng);
      const WeightView w{t, wb.data(), rows, cols, row_bytes(t, cols)};
      for (int64_t n_tok : {1, 2, 3, 4, 5, 6, 7, 8, 13, 20}) {
        std::vector<float> x(static_cast<size_t>(n_tok * cols));  // [n_tok, cols]
        for (auto& v : x) v = normal(rng);
        std::vector<std::vector<float>> y;  // per target: [n_tok, rows]
        for (int64_t target : targets) {
          hwy::SetSupportedTargetsForTest(target);
          MatmulScratch mm(cols, n_tok, ActivationRounding::match_ggml);
          y.emplace_back(static_cast<size_t>(n_tok * rows), NAN);
          const Product p{w, y.back().data()};
          const ProductGroup group{{&p, 1}, x.data(), n_tok, true};  // batched: one token takes the tiles too
          matmul_groups({&group, 1}, mm);
        }
        hwy::SetSupportedTargetsForTest(0);
        for (size_t i = 1; i < targets.size(); ++i) {
          EXPECT_EQ(0, std::memcmp(y[0].data(), y[i].data(), sizeof(float) * y[0].size()))
              << type_name(t) << " cols " << cols << " n_tok " << n_tok << ": " << hwy::TargetName(targets[i])
              << " differs from " << hwy::TargetName(targets[0]);
        }
      }
    }
  }
}


// The token tiles of the 32-block types (TileBlock32 on AVX2, vnni512::Block32Lanes on AVX512-VNNI) compute, per row,
// token and block, one exact integer sum of weight codes times activation codes, and add it with one rounding step:
// acc = fma(float(isum), d_w * d_x, acc) over the blocks in order. Checked bit for bit against that formula written
// out in scalar code, from the activations the kernels quantized, for each type and target that takes the tiles
// (Q8_0 only on AVX512-VNNI), including the rows16 layouts of Q8_0 and MXFP4.
TEST(MatmulKernels, BlockTilesAddOneRoundedBlockSumAtATime) {
  std::mt19937 rng(37);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t rows = 37, cols = 2880, nb = cols / 32;
  // A prompt's lone token (batched), a paired tile, a full and a partial one, and a second pass past 16 tiles.
  int checked = 0;
  for (int64_t n_tok : {1, 3, 13, 131}) {
    std::vector<float> x(static_cast<size_t>(n_tok * cols));  // [n_tok, cols]
    for (auto& v : x) v = normal(rng);
    // Weight block `blk`'s scale and its 32 integer values (what the codes stand for, before the scale).
    const auto block = [](GgmlType t, const uint8_t* blk, int (&v)[32]) {
      uint16_t h;
      std::memcpy(&h, blk, 2);
      for (int j = 0; j < 32; ++j) {
        const int nib = j < 16 ? 0 : 4;
        if (t == GgmlType::Q8_0) v[j] = static_cast<int8_t>(blk[offsetof(BlockQ8_0, qs) + j]);
        if (t == GgmlType::Q4_0) v[j] = (blk[offsetof(BlockQ4_0, qs) + j % 16] >> nib & 15) - 8;
        if (t == GgmlType::Q5_0) {
          uint32_t qh;
          std::memcpy(&qh, blk + offsetof(BlockQ5_0, qh), 4);
          v[j] = ((blk[offsetof(BlockQ5_0, qs) + j % 16] >> nib & 15) | static_cast<int>(qh >> j & 1) << 4) - 16;
        }
        if (t == GgmlType::MXFP4) v[j] = kMxfp4DoubledValues[blk[offsetof(BlockMXFP4, qs) + j % 16] >> nib & 15];
      }
      return t == GgmlType::MXFP4 ? e8m0_to_fp32_half(blk[0]) : fp16_to_fp32(h);
    };
    for (int64_t target : kernels::compiled_targets()) {
      hwy::SetSupportedTargetsForTest(target);
      for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::MXFP4}) {
        if (!kernels::uses_token_tiles(t)) continue;
        const auto wb = random_matrix(t, rows, cols, rng);
        const size_t rb = row_bytes(t, cols);
        // The activations as the kernels see them: Q8_0-style blocks of 32 (codes and scales).
        const QuantizedTokens a(t, x.data(), n_tok, cols);
        const std::vector<int8_t>& q = a.q;
        const std::vector<float>& d = a.d;
        std::vector<float> want(static_cast<size_t>(n_tok * rows));  // [n_tok, rows]
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t tok = 0; tok < n_tok; ++tok) {
            float acc = 0.0f;
            for (int64_t b = 0; b < nb; ++b) {
              int v[32];
              const uint8_t* blk = wb.data() + static_cast<size_t>(r) * rb + static_cast<size_t>(b) * (rb / nb);
              const float dw = block(t, blk, v);
              int32_t isum = 0;
              for (int j = 0; j < 32; ++j) isum += v[j] * q[static_cast<size_t>(tok * cols + b * 32 + j)];
              acc = std::fma(static_cast<float>(isum), dw * d[static_cast<size_t>(tok * nb + b)], acc);
            }
            want[static_cast<size_t>(tok * rows + r)] = acc;
          }
        }
        std::vector<std::vector<uint8_t>> layouts{wb};
        if (kernels::has_rows16_kernel(t)) {  // the first 32 rows repacked
          layouts.emplace_back(rb * 32);
          repack_rows16(t, wb.data(), rb, cols, 0, 2, layouts.back().data());
        }
        for (size_t l = 0; l < layouts.size(); ++l) {
          const bool rows16 = l == 1;
          const int64_t n_rows = rows16 ? 32 : rows;
          const WeightView w{t, layouts[l].data(), n_rows, cols, rb, Memory::host,
                             rows16 ? WeightLayout::rows16 : WeightLayout::gguf};
          MatmulScratch mm(cols, n_tok, ActivationRounding::match_ggml);
          std::vector<float> y(static_cast<size_t>(n_tok * n_rows), NAN);
          const Product p{w, y.data()};
          const ProductGroup group{{&p, 1}, x.data(), n_tok, true};
          matmul_groups({&group, 1}, mm);
          for (int64_t tok = 0; tok < n_tok; ++tok) {
            EXPECT_EQ(0, std::memcmp(y.data() + tok * n_rows, want.data() + tok * rows,
                                     sizeof(float) * static_cast<size_t>(n_rows)))
                << type_name(t) << (rows16 ? " rows16" : "") << " n_tok " << n_tok << " token " << tok << " on "
                << hwy::TargetName(target);
          }
          ++checked;
        }
      }
    }
    hwy::SetSupportedTargetsForTest(0);  // compiled_targets() lists only the supported ones
  }
  if (checked == 0) GTEST_SKIP() << "no target on this CPU takes token tiles for 32-block types";
}

// The AVX512-VNNI token tiles of IQ4_XS (vnni512::Iq4XsLanes) compute, per row, token and block of 256, one exact
// integer sum of the sub-blocks' scales times their levels times the activation codes, and add it with one rounding
// step: acc = fma(float(isum), d_w * d_x, acc) over the blocks in order. Checked bit for bit against that formula
// written out in scalar code, from the activations the kernels quantized (Q8_K), for every target that takes the
// tiles: a prompt's lone token, a paired tile, a full and a partial one, a second pass past 16 tiles; 37 rows (a
// partial group of 16) of 2048 columns, then 768.
TEST(MatmulKernels, Iq4XsTilesAddOneRoundedBlockSumAtATime) {
  std::mt19937 rng(39);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t rows = 37;
  int checked = 0;
  for (const int64_t cols : {2048, 768}) {
    const int64_t nb = cols / kQK_K;
    for (int64_t n_tok : {1, 3, 13, 131}) {
      std::vector<float> x(static_cast<size_t>(n_tok * cols));  // [n_tok, cols]
      for (auto& v : x) v = normal(rng);
      for (int64_t target : kernels::compiled_targets()) {
        hwy::SetSupportedTargetsForTest(target);
        if (!kernels::uses_token_tiles(GgmlType::IQ4_XS)) continue;
        const auto wb = random_matrix(GgmlType::IQ4_XS, rows, cols, rng);
        const size_t rb = row_bytes(GgmlType::IQ4_XS, cols);
        const QuantizedTokens a(GgmlType::IQ4_XS, x.data(), n_tok, cols);  // Q8_K blocks of 256
        const std::vector<int8_t>& q = a.q;
        const std::vector<float>& d = a.d;
        std::vector<float> want(static_cast<size_t>(n_tok * rows));  // [n_tok, rows]
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t tok = 0; tok < n_tok; ++tok) {
            float acc = 0.0f;
            for (int64_t b = 0; b < nb; ++b) {
              const uint8_t* blk = wb.data() + static_cast<size_t>(r) * rb + static_cast<size_t>(b) * rb / nb;
              uint16_t dh, scales_h;
              std::memcpy(&dh, blk + offsetof(BlockIQ4_XS, d), 2);
              std::memcpy(&scales_h, blk + offsetof(BlockIQ4_XS, scales_h), 2);
              int32_t isum = 0;
              for (int s = 0; s < 8; ++s) {
                const int scale = ((blk[offsetof(BlockIQ4_XS, scales_l) + s / 2] >> 4 * (s % 2) & 15) |
                                   (scales_h >> 2 * s & 3) << 4) - 32;
                int32_t dot = 0;
                for (int e = 0; e < 32; ++e) {
                  const int code = blk[offsetof(BlockIQ4_XS, qs) + 16 * s + e % 16] >> (e < 16 ? 0 : 4) & 15;
                  dot += kIq4nlValues[code] * q[static_cast<size_t>(tok * cols + b * kQK_K + 32 * s + e)];
                }
                isum += scale * dot;
              }
              acc = std::fma(static_cast<float>(isum), fp16_to_fp32(dh) * d[static_cast<size_t>(tok * nb + b)], acc);
            }
            want[static_cast<size_t>(tok * rows + r)] = acc;
          }
        }
        const WeightView w{GgmlType::IQ4_XS, wb.data(), rows, cols, rb};
        MatmulScratch mm(cols, n_tok, ActivationRounding::match_ggml);
        std::vector<float> y(static_cast<size_t>(n_tok * rows), NAN);
        const Product p{w, y.data()};
        const ProductGroup group{{&p, 1}, x.data(), n_tok, true};
        matmul_groups({&group, 1}, mm);
        EXPECT_EQ(0, std::memcmp(y.data(), want.data(), sizeof(float) * want.size()))
            << cols << " columns, n_tok " << n_tok << " on " << hwy::TargetName(target);
        ++checked;
      }
      hwy::SetSupportedTargetsForTest(0);  // compiled_targets() lists only the supported ones
    }
  }
  if (checked == 0) GTEST_SKIP() << "no target on this CPU takes token tiles for IQ4_XS (AVX512-VNNI only)";
}

// One token x times a GGUF matrix wb ([rows, cols]) and times its first 32 rows repacked (rows16): every result
// bit for bit want[r], with the file layout's rows read one at a time or two side by side and the rows16 kernels
// prefetching or not.
void expect_one_token_bits(GgmlType type, const std::vector<uint8_t>& wb, int64_t rows, int64_t cols,
                           const std::vector<float>& x, const std::vector<float>& want) {
  const size_t rb = row_bytes(type, cols);
  std::vector<uint8_t> r16(rb * 32);
  repack_rows16(type, wb.data(), rb, cols, 0, 2, r16.data());
  for (const bool rows16 : {false, true}) {
    for (const int one_stream : {0, 1}) {
      kernels::set_one_stream_rows_for_test(one_stream);
      kernels::set_rows16_prefetch_for_test(one_stream);
      const int64_t n_rows = rows16 ? 32 : rows;
      const WeightView w{type, rows16 ? r16.data() : wb.data(), n_rows, cols, rb, Memory::host,
                         rows16 ? WeightLayout::rows16 : WeightLayout::gguf};
      MatmulScratch mm(cols, 1, ActivationRounding::match_ggml);
      std::vector<float> y(static_cast<size_t>(n_rows), NAN);
      matmul(w, x.data(), y.data(), 1, mm);
      for (int64_t r = 0; r < n_rows; ++r) {
        EXPECT_EQ(0, std::memcmp(&y[static_cast<size_t>(r)], &want[static_cast<size_t>(r)], sizeof(float)))
            << type_name(type) << (rows16 ? " rows16 " : " GGUF ") << cols << " columns, row " << r << ": " << y[r]
            << " vs " << want[r] << (one_stream ? ", rows one at a time (rows16: prefetched)" : "");
      }
    }
    kernels::set_one_stream_rows_for_test(-1);
    kernels::set_rows16_prefetch_for_test(-1);
  }
}

// One token of MXFP4 on AVX512-VNNI where 512-bit operations run whole (Mxfp4Rows512, and the rows16 layout's
// Mxfp4OneTokenGroups): per row, each block's exact integer sum converted once and added with one rounding step
// into chain b % 16, acc[b % 16] = fma(float(isum), d_w * d_x, acc[b % 16]) over the blocks in order, then the 16
// chains added in halves (j and j + 8, then j + 4, j + 2, j + 1). Checked bit for bit against that formula written out
// in scalar code, from the activations the kernels quantized: the GGUF layout (two streams of rows, and one) and the
// rows16 one (with its software prefetch, and without), at gpt-oss's 2880 columns (5 chunks of 16 blocks and 10
// more), 17 blocks (a lone block in the last chunk) and 3.
TEST(MatmulKernels, OneTokenMxfp4AddsBlockSumsInSixteenChains) {
  if (!kernels::has_rows16_kernel(GgmlType::MXFP4)) {
    GTEST_SKIP() << "MXFP4's one-token kernels sum this way only with AVX512-VNNI where 512-bit operations run whole ("
                 << kernels::int8_kernels_name() << ")";
  }
  std::mt19937 rng(38);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t rows = 37;
  for (const int64_t cols : {2880, 544, 96}) {
    const int64_t nb = cols / 32;
    std::vector<float> x(static_cast<size_t>(cols));  // [1, cols]
    for (auto& v : x) v = normal(rng);
    const auto wb = random_matrix(GgmlType::MXFP4, rows, cols, rng);
    const size_t rb = row_bytes(GgmlType::MXFP4, cols);
    const QuantizedTokens a(GgmlType::MXFP4, x.data(), 1, cols);
    const std::vector<int8_t>& q = a.q;
    const std::vector<float>& d = a.d;
    std::vector<float> want(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      float acc[16] = {};
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* blk = wb.data() + static_cast<size_t>(r) * rb + static_cast<size_t>(b) * sizeof(BlockMXFP4);
        int32_t isum = 0;
        for (int j = 0; j < 32; ++j) {
          const int code = blk[offsetof(BlockMXFP4, qs) + j % 16] >> (j < 16 ? 0 : 4) & 15;
          isum += kMxfp4DoubledValues[code] * q[static_cast<size_t>(b * 32 + j)];
        }
        float& a = acc[b % 16];
        a = std::fma(static_cast<float>(isum), e8m0_to_fp32_half(blk[offsetof(BlockMXFP4, e)]) * d[b], a);
      }
      for (int half = 8; half >= 1; half /= 2) {
        for (int j = 0; j < half; ++j) acc[j] = acc[j] + acc[j + half];
      }
      want[static_cast<size_t>(r)] = acc[0];
    }
    expect_one_token_bits(GgmlType::MXFP4, wb, rows, cols, x, want);
  }
}

// One token of IQ4_XS on AVX512-VNNI (Iq4XsRows512, and the rows16 layout's Iq4XsOneTokenGroups): per row and block,
// 16 exact integer sums, sub-block s's scale times the products of its elements 16h .. 16h + 15 in lane
// 4 (2 (s % 2) + h) + s / 2, each converted once and added with one rounding step, acc[L] = fma(float(isum),
// d_w * d_x, acc[L]) over the blocks in order, then the 16 lanes added in halves (j and j + 8, then j + 4, j + 2,
// j + 1). Checked bit for bit against that formula written out in
// scalar code, from the activations the kernels quantized: the GGUF layout and the rows16 one, as
// expect_one_token_bits takes them, at 1, 3 and 8 blocks a row.
TEST(MatmulKernels, OneTokenIq4XsSumsSubBlockHalvesInLanes) {
  if (!kernels::has_rows16_kernel(GgmlType::IQ4_XS)) {
    GTEST_SKIP() << "IQ4_XS's one-token kernels are checked against this order with AVX512-VNNI only ("
                 << kernels::int8_kernels_name() << ")";
  }
  std::mt19937 rng(39);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t rows = 37;
  for (const int64_t cols : {2048, 768, 256}) {
    const int64_t nb = cols / 256;
    std::vector<float> x(static_cast<size_t>(cols));  // [1, cols]
    for (auto& v : x) v = normal(rng);
    const auto wb = random_matrix(GgmlType::IQ4_XS, rows, cols, rng);
    const size_t rb = row_bytes(GgmlType::IQ4_XS, cols);
    const QuantizedTokens a(GgmlType::IQ4_XS, x.data(), 1, cols);  // Q8_K blocks of 256
    std::vector<float> want(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      float acc[16] = {};
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* blk = wb.data() + static_cast<size_t>(r) * rb + static_cast<size_t>(b) * sizeof(BlockIQ4_XS);
        uint16_t dh, scales_h;
        std::memcpy(&dh, blk + offsetof(BlockIQ4_XS, d), 2);
        std::memcpy(&scales_h, blk + offsetof(BlockIQ4_XS, scales_h), 2);
        const float dd = fp16_to_fp32(dh) * a.d[static_cast<size_t>(b)];
        for (int s = 0; s < 8; ++s) {
          const int scale = ((blk[offsetof(BlockIQ4_XS, scales_l) + s / 2] >> 4 * (s % 2) & 15) |
                             (scales_h >> 2 * s & 3) << 4) - 32;
          for (int h = 0; h < 2; ++h) {
            int32_t isum = 0;
            for (int i = 0; i < 16; ++i) {
              const int code = blk[offsetof(BlockIQ4_XS, qs) + 16 * s + i] >> 4 * h & 15;
              isum += kIq4nlValues[code] * a.q[static_cast<size_t>(b * 256 + 32 * s + 16 * h + i)];
            }
            float& l = acc[4 * (2 * (s % 2) + h) + s / 2];
            l = std::fma(static_cast<float>(scale * isum), dd, l);
          }
        }
      }
      for (int half = 8; half >= 1; half /= 2) {
        for (int j = 0; j < half; ++j) acc[j] = acc[j] + acc[j + half];
      }
      want[static_cast<size_t>(r)] = acc[0];
    }
    expect_one_token_bits(GgmlType::IQ4_XS, wb, rows, cols, x, want);
  }
}

// The attention softmax against double precision on every target: rows around the vector widths (the partial
// tail), with and without a sink logit, scores spread over +-30 so that exponents far below the maximum occur.
// Bound per element: e^(x - m) is within 1 ULP of the exact value of the rounded difference, which is within
// u * |x - m| of x - m (a relative error of that much in the exponential); the sum of n + 1 terms adds gamma(n + 1),
// the reciprocal and the product 2 u. The row is not vector-aligned, and the elements around it stay as they were.
TEST(VecKernels, SoftmaxMatchesReferenceOnEveryTarget) {
  std::mt19937 rng(12);
  std::uniform_real_distribution<float> score(-30.0f, 30.0f);
  const double u = std::ldexp(1.0, -24);
  const auto gamma = [&](int64_t m) { return static_cast<double>(m) * u / (1.0 - static_cast<double>(m) * u); };
  for (int64_t target : kernels::compiled_targets()) {
    hwy::SetSupportedTargetsForTest(target);
    for (int64_t n : {1, 5, 15, 16, 17, 31, 33, 100, 513}) {
      for (bool with_sink : {false, true}) {
        // The row starts one float into the buffer (rows of the scores buffer start anywhere).
        std::vector<float> s(static_cast<size_t>(n) + 17);
        for (auto& e : s) e = score(rng);
        const std::vector<float> in = s;
        const float sink = with_sink ? score(rng) : -std::numeric_limits<float>::infinity();
        kernels::attn_softmax(s.data() + 1, n, sink);
        double m = sink, sum = 0.0;
        for (int64_t j = 1; j <= n; ++j) m = std::max(m, static_cast<double>(in[static_cast<size_t>(j)]));
        for (int64_t j = 1; j <= n; ++j) sum += std::exp(in[static_cast<size_t>(j)] - m);
        if (with_sink) sum += std::exp(sink - m);
        const std::string where = std::string(hwy::TargetName(target)) + " n " + std::to_string(n) +
                                  (with_sink ? " sink" : "");
        for (int64_t j = 1; j <= n; ++j) {
          const double x = in[static_cast<size_t>(j)], ref = std::exp(x - m) / sum;
          const double rel = (std::fabs(x - m) + 2.0) * u + gamma(n + 1) + 2.0 * u;
          EXPECT_LE(std::fabs(s[static_cast<size_t>(j)] - ref), rel * ref + 1e-44) << where << " j " << j;
        }
        EXPECT_EQ(s[0], in[0]) << where << " before the row";
        for (size_t j = static_cast<size_t>(n) + 1; j < s.size(); ++j) EXPECT_EQ(s[j], in[j]) << where << " past " << j;
      }
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

}  // namespace
}  // namespace moetier::quant
