// The fused SIMD matmul kernels (quant/kernels/matmul_kernels.h) against the scalar reference: dequantize the row
// with dequantize_row_ref, dot in double precision. Run on every Highway target compiled in and supported here.
//
// Tolerance, from the arithmetic: the kernels decode each weight to exactly the reference's float, so the only
// error is float32 accumulation of the n = cols products in some association (lanes, two accumulator sets, lane
// reduction). For any association, |fl(sum w_i x_i) - sum w_i x_i| <= gamma_n * sum |w_i x_i| with
// gamma_n = n u / (1 - n u), u = 2^-24 (Higham, Accuracy and Stability, 3.1); we allow n = cols + 2.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include "quant/blocks.h"
#include "quant/dequant_ref.h"
#include "quant/fp16.h"
#include "quant/ggml_type.h"
#include "quant/kernels/matmul_kernels.h"
#include "quant/matmul.h"
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

// Checks kernels::matmul_rows on one case against the double-precision reference; returns false on failure.
void check_case(const Case& c, std::mt19937& rng, const char* target) {
  const std::vector<uint8_t> w = random_matrix(c.type, c.rows, c.cols, rng);
  const size_t rb = row_bytes(c.type, c.cols);
  std::vector<float> x(static_cast<size_t>(c.n_tok * c.cols));  // [n_tok, cols]
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (auto& v : x) v = normal(rng);
  std::vector<float> y(static_cast<size_t>(c.n_tok * c.rows), NAN);  // [n_tok, rows]
  kernels::matmul_rows(c.type, w.data(), rb, c.cols, x.data(), c.n_tok, y.data(), c.rows, 0, c.rows);

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
          << type_name(c.type) << " target " << target << " rows " << c.rows << " cols " << c.cols << " n_tok "
          << c.n_tok << " at r " << r << " t " << t << ": got " << got << " want " << ref;
    }
  }
}

TEST(MatmulKernels, MatchReferenceOnEveryTarget) {
  const std::vector<int64_t> targets = kernels::compiled_targets();
  ASSERT_FALSE(targets.empty());
  std::mt19937 rng(1234);
  for (int64_t target : targets) {
    hwy::SetSupportedTargetsForTest(target);
    const char* name = hwy::TargetName(target);
    for (GgmlType t : kTypes) {
      ASSERT_TRUE(kernels::has_kernel(t)) << type_name(t);
      const int64_t bs = traits(t).block_size;
      std::vector<int64_t> col_sizes;
      for (int64_t cols : {256, 2048, 2880}) {
        if (cols % bs == 0) col_sizes.push_back(cols);
      }
      if (bs == 1) col_sizes.push_back(7), col_sizes.push_back(2881);  // float rows need not be whole vectors
      for (int64_t cols : col_sizes) {
        for (int64_t rows : {1, 7, 64}) {
          for (int64_t n_tok : {1, 3, 8}) {
            check_case({t, rows, cols, n_tok}, rng, name);
            if (HasFatalFailure()) {
              hwy::SetSupportedTargetsForTest(0);
              return;
            }
          }
        }
      }
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

// matmul() through a pool: every row is computed by the same kernel whichever thread takes it, so the result is
// bit-identical to one thread; also covers the row split (rows not a multiple of the threads or of 4).
TEST(MatmulKernels, ThreadsGiveIdenticalResults) {
  std::mt19937 rng(99);
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q8_0, GgmlType::F16}) {
    for (int64_t rows : {130, 1001}) {
      const int64_t cols = 256, n_tok = 3;
      const std::vector<uint8_t> wb = random_matrix(t, rows, cols, rng);
      const WeightView w{t, wb.data(), rows, cols, row_bytes(t, cols)};
      std::vector<float> x(static_cast<size_t>(n_tok * cols));
      std::normal_distribution<float> normal(0.0f, 1.0f);
      for (auto& v : x) v = normal(rng);
      MatmulScratch one(cols, n_tok, ActivationRounding::exact);
      std::vector<float> y1(static_cast<size_t>(n_tok * rows));
      matmul(w, x.data(), y1.data(), n_tok, one);
      for (int threads : {2, 3}) {
        util::ThreadPool pool(threads);
        MatmulScratch many(cols, n_tok, ActivationRounding::exact);
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
