// The GPU product kernels against the scalar reference (quant::matmul_reference), for every weight type with a
// GPU kernel, one token (decode) and several (prefill), with float activations and with activations rounded as the
// reference engine rounds them (match_ggml: both sides round x the same way before the dot products), on the first
// Vulkan device under the validation layer.
//
// Tolerance: both sides dequantize to the same floats (the GPU's dq() and dq_seg() give the reference formula's
// values) and use the same activations, so they differ only in summation order. At one token the GPU sums L <= 64
// interleaved partial dots and then a tree of depth log2 L, each partial over at most ceil(cols / 32 / L) segments
// of 32; over tiles of tokens it sums each (row, token) in one chain of cols terms. So by the standard bound on
// recursive summation (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., eq. 4.4) both results lie
// within (n + 1) u sum_c |w_rc x_tc| of the exact dot, n the longer of the two summation chains (cols for the
// reference) and u = 2^-24; twice that bounds their difference.
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "gpu/gpu_test_support.h"
#include "quant/ggml_type.h"
#include "quant/matmul.h"
#include "quant/quantize_ref.h"

namespace moetier::gpu {
namespace {

using quant::GgmlType;

struct Matrix {
  std::vector<uint8_t> bytes;
  quant::WeightView view;
};

Matrix random_matrix(GgmlType t, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  Matrix m;
  const size_t rb = quant::row_bytes(t, cols);
  m.bytes.resize(rb * static_cast<size_t>(rows));
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (auto& v : row) v = dist(rng);
    quant::quantize_row_ref(t, row.data(), m.bytes.data() + rb * static_cast<size_t>(r), cols);
  }
  m.view = {t, m.bytes.data(), rows, cols, rb, quant::Memory::host};
  return m;
}

std::vector<float> random_x(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = dist(rng);
  return x;
}

// Expects y == w x within the summation-order bound above, comparing with the scalar reference.
void expect_product(const quant::WeightView& w, const std::vector<float>& x_given, const std::vector<float>& y,
                    int64_t n_tok, const char* what,
                    quant::ActivationRounding rounding = quant::ActivationRounding::exact) {
  quant::MatmulScratch scratch(w.cols, n_tok, rounding);
  std::vector<float> ref(static_cast<size_t>(n_tok * w.rows));
  quant::matmul_reference(w, x_given.data(), ref.data(), n_tok, scratch);
  std::vector<float> x = x_given;  // the activations both sides multiply: rounded when the products round them
  if (rounding == quant::ActivationRounding::match_ggml) {
    for (int64_t t = 0; t < n_tok; ++t) quant::round_activations_like_ggml(w.type, x.data() + t * w.cols, w.cols);
  }
  std::vector<float> wrow(static_cast<size_t>(w.cols));
  const double u = std::ldexp(1.0, -24);
  const double chain = static_cast<double>(w.cols) + 1;
  int bad = 0;
  for (int64_t r = 0; r < w.rows; ++r) {
    quant::dequantize_row(w, r, wrow.data());
    for (int64_t t = 0; t < n_tok; ++t) {
      double abs_sum = 0;
      for (int64_t c = 0; c < w.cols; ++c) abs_sum += std::fabs(double{wrow[c]} * x[t * w.cols + c]);
      const double tol = 2 * chain * u * abs_sum;
      const size_t i = static_cast<size_t>(t * w.rows + r);
      if (std::fabs(double{y[i]} - ref[i]) > tol && ++bad <= 5) {
        ADD_FAILURE() << what << " " << quant::type_name(w.type) << " row " << r << " token " << t << ": gpu " << y[i]
                      << " reference " << ref[i] << " (tolerance " << tol << ")";
      }
    }
  }
  EXPECT_EQ(bad, 0) << what << " " << quant::type_name(w.type);
}

const GgmlType kTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16,   GgmlType::Q4_0,  GgmlType::Q4_1,
                           GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,   GgmlType::Q2_K,  GgmlType::Q3_K,
                           GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K,   GgmlType::IQ4_NL, GgmlType::IQ4_XS,
                           GgmlType::MXFP4};

class GpuProduct : public ::testing::TestWithParam<GgmlType> {};

TEST_P(GpuProduct, MatchesTheScalarReferenceForOneAndManyTokens) {
  const GgmlType t = GetParam();
  constexpr int64_t kRows = 70;  // rows not a multiple of anything the kernel tiles by
  // 512 columns: 16 invocations per row, 4 sets of lanes per workgroup (of 4 rows each at one token); 2560: 64
  // invocations, one set (Pipelines::rows_per_group). Several tokens: tiles of 32 rows x 32 tokens, 45 tokens
  // taking a second, partial tile.
  for (const int64_t cols : {int64_t{512}, int64_t{2560}}) {
    const Matrix m = random_matrix(t, kRows, cols, 7);
    for (const auto rounding : {quant::ActivationRounding::exact, quant::ActivationRounding::match_ggml}) {
      auto be = testing::validated_backend(cols, kRows, 45, 0, rounding);
      be->place(m.view);
      ASSERT_TRUE(be->holds(m.view));
      for (const int64_t n_tok : {1, 3, 8, 19, 45}) {
        const auto x = random_x(n_tok * cols, static_cast<uint32_t>(11 + n_tok));
        std::vector<float> y(static_cast<size_t>(n_tok * kRows), NAN);
        be->matmul(m.view, x.data(), y.data(), n_tok);
        expect_product(m.view, x, y, n_tok, n_tok == 1 ? "decode" : "prefill", rounding);
      }
      EXPECT_EQ(be->validation_errors(), 0u);
    }
  }
}

// Float rows need not be whole 32-element segments: the last, partial one takes matmul.comp's element-wise path,
// in both forms (one token: x in registers; a tile of tokens).
TEST(GpuProductFloatRows, RowsOfAnyLength) {
  constexpr int64_t kRows = 37, kCols = 100;  // 3 whole segments and 4 elements
  for (const GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16}) {
    const Matrix m = random_matrix(t, kRows, kCols, 23);
    auto be = testing::validated_backend(kCols, kRows, 9, 0);
    be->place(m.view);
    for (const int64_t n_tok : {1, 9}) {
      const auto x = random_x(n_tok * kCols, static_cast<uint32_t>(5 + n_tok));
      std::vector<float> y(static_cast<size_t>(n_tok * kRows), NAN);
      be->matmul(m.view, x.data(), y.data(), n_tok);
      expect_product(m.view, x, y, n_tok, n_tok == 1 ? "decode" : "prefill");
    }
    EXPECT_EQ(be->validation_errors(), 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, GpuProduct, ::testing::ValuesIn(kTypes),
                         [](const auto& info) { return std::string(quant::type_name(info.param)); });

// A matrix larger than one buffer is split at whole rows; a product over rows that straddle the split (an expert's
// slice of a [n_expert, rows, cols] tensor) runs as one dispatch per buffer.
TEST(GpuProductSplit, MatricesOverSeveralBuffersAndSlicesAcrossThem) {
  constexpr int64_t kRows = 96, kCols = 256;
  const Matrix m = random_matrix(GgmlType::Q4_K, kRows, kCols, 3);
  auto be = testing::validated_backend(kCols, kRows, 4, /*max_buffer_bytes=*/10 * m.view.row_bytes);
  be->place(m.view);
  const auto x = random_x(4 * kCols, 5);
  std::vector<float> y(static_cast<size_t>(4 * kRows));
  be->matmul(m.view, x.data(), y.data(), 4);
  expect_product(m.view, x, y, 4, "whole");
  quant::WeightView slice = m.view;
  slice.data = m.view.row(25);
  slice.rows = 32;  // rows 25..56: buffers 2..5
  ASSERT_TRUE(be->holds(slice));
  std::vector<float> ys(static_cast<size_t>(4 * 32));
  be->matmul(slice, x.data(), ys.data(), 4);
  expect_product(slice, x, ys, 4, "slice");
  quant::WeightView outside = m.view;
  outside.data = m.view.row(90);
  outside.rows = 10;  // runs past the placed matrix
  EXPECT_FALSE(be->holds(outside));
  EXPECT_EQ(be->validation_errors(), 0u);
}

// matmul_shared_x and matmul_groups (a MoE layer's experts: different activations per group) give what separate
// products give.
TEST(GpuProductGroups, SharedActivationsAndGroupsMatchTheReference) {
  constexpr int64_t kCols = 256, kRows = 48;
  const Matrix a = random_matrix(GgmlType::Q8_0, kRows, kCols, 1);
  const Matrix b = random_matrix(GgmlType::Q6_K, kRows / 2, kCols, 2);
  auto be = testing::validated_backend(kCols, kRows, 8);
  be->place(a.view);
  be->place(b.view);
  const auto x1 = random_x(3 * kCols, 9), x2 = random_x(5 * kCols, 10);
  std::vector<float> ya(3 * kRows, NAN), yb(3 * kRows / 2, NAN), yc(5 * kRows, NAN);
  const quant::Product shared[] = {{a.view, ya.data()}, {b.view, yb.data()}};
  be->matmul_shared_x(shared, x1.data(), 3);
  expect_product(a.view, x1, ya, 3, "shared a");
  expect_product(b.view, x1, yb, 3, "shared b");
  std::fill(yb.begin(), yb.end(), NAN);  // group 0 must write it again
  const quant::Product first[] = {{b.view, yb.data()}}, second[] = {{a.view, yc.data()}};
  const quant::ProductGroup groups[] = {{first, x1.data(), 3, true}, {second, x2.data(), 5, true}};
  be->matmul_groups(groups);
  expect_product(b.view, x1, yb, 3, "group 0");
  expect_product(a.view, x2, yc, 5, "group 1");
  EXPECT_EQ(be->validation_errors(), 0u);
}

// The output head over a long prompt: more results than the output buffers hold run in token slices.
TEST(GpuProductSlices, OutputsLargerThanTheIoBuffersRunInTokenSlices) {
  constexpr int64_t kCols = 64, kRows = 1000, kTok = 12;  // y buffers: max(max_tok * max_cols, max_rows) floats
  const Matrix m = random_matrix(GgmlType::F16, kRows, kCols, 4);
  auto be = testing::validated_backend(kCols, kRows, kTok);
  be->place(m.view);
  const auto x = random_x(kTok * kCols, 6);
  std::vector<float> y(static_cast<size_t>(kTok * kRows), NAN);
  be->matmul(m.view, x.data(), y.data(), kTok);
  expect_product(m.view, x, y, kTok, "sliced");
  EXPECT_EQ(be->validation_errors(), 0u);
}

}  // namespace
}  // namespace moetier::gpu
