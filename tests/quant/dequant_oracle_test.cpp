// Reference dequantization against ../shared/oracle/dequant: for every tensor of every oracle model, the first row
// (up to 1024 values) value by value and the whole-tensor sum and sum of squares, dequantized by an independent
// engine (oracle/README.md).
//
// Tolerance: 1e-6 relative, as the README states. A reference value that is exactly 0 has no relative scale; there
// we require |ours| <= 1e-30 (a floor far below any nonzero value these formats can produce from an fp16 scale,
// the smallest being 2^-24 * 2^-10 ~ 6e-11). sum and sumsq are float64 accumulations over up to millions of terms
// in an order we do not know, so besides 1e-6 relative to the reference we allow 1e-12 of the sum of |x| (a sum
// that cancels to nearly 0 has no meaningful relative error; 1e-12 is ~4500 float64 ulps of the terms' scale).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gguf/gguf.h"
#include "quant/dequant_ref.h"
#include "quant/ggml_type.h"
#include "test_support.h"

namespace moetier::quant {
namespace {

struct TypeStats {
  int64_t values = 0;     // first_row values compared
  int64_t bit_exact = 0;  // of which identical as float32 (zeros of either sign count as equal)
  int64_t tensors = 0;
  double worst_value_rel = 0;
  double worst_sum_rel = 0;
  double worst_sumsq_rel = 0;
};

double rel_err(double ours, double ref) { return ref == 0 ? std::fabs(ours) : std::fabs(ours - ref) / std::fabs(ref); }

void check_file(const std::filesystem::path& json_path, std::map<std::string, TypeStats>& stats) {
  SCOPED_TRACE(json_path.filename().string());
  std::ifstream in(json_path);
  ASSERT_TRUE(in) << "cannot read " << json_path;
  const nlohmann::json j = nlohmann::json::parse(in);
  // The model beside its dequant/ folder, in the same oracle root.
  const auto model_path = json_path.parent_path().parent_path() / "models" / j.at("file").get<std::string>();
  const gguf::GgufModel model = gguf::GgufModel::open(model_path);

  ASSERT_FALSE(j.at("tensors").empty());
  for (const auto& jt : j.at("tensors")) {
    const auto name = jt.at("name").get<std::string>();
    SCOPED_TRACE(name);
    const gguf::TensorInfo* t = model.find(name);
    ASSERT_NE(t, nullptr) << "tensor missing from " << model_path;
    const auto type_str = jt.at("type").get<std::string>();
    EXPECT_EQ(parse_type(type_str), t->type) << "oracle type " << type_str << ", file type " << type_name(t->type);
    const auto ne = jt.at("ne").get<std::vector<int64_t>>();
    for (size_t d = 0; d < ne.size(); ++d) EXPECT_EQ(t->ne[d], ne[d]) << "ne[" << d << "]";

    // Dequantize every row; accumulate in float64 like the oracle.
    const int64_t cols = t->ne[0];
    const int64_t rows = t->n_elements() / cols;
    const uint64_t rb = t->row_bytes();
    ASSERT_EQ(rb * static_cast<uint64_t>(rows), t->n_bytes);
    ASSERT_NE(t->data, nullptr);
    std::vector<float> row(static_cast<size_t>(cols)), first_row;
    double sum = 0, sumsq = 0, sum_abs = 0;
    for (int64_t r = 0; r < rows; ++r) {
      dequantize_row_ref(t->type, t->data + static_cast<uint64_t>(r) * rb, row.data(), cols);
      if (r == 0) first_row = row;
      for (float v : row) {
        const double x = v;
        sum += x;
        sumsq += x * x;
        sum_abs += std::fabs(x);
      }
    }

    TypeStats& s = stats[std::string(type_name(t->type))];
    ++s.tensors;
    const auto ref_row = jt.at("first_row").get<std::vector<double>>();
    ASSERT_LE(ref_row.size(), first_row.size());
    EXPECT_EQ(ref_row.size(), std::min<size_t>(1024, first_row.size()));
    int failures = 0;
    for (size_t i = 0; i < ref_row.size(); ++i) {
      const double ref = ref_row[i], ours = first_row[i];
      ++s.values;
      if (static_cast<float>(ref) == first_row[i]) ++s.bit_exact;
      const double e = rel_err(ours, ref);
      // Reported against the reference rounded to float32: the JSON prints float32 values with 9 significant
      // digits, which alone differ from the float by up to ~5e-9 relative.
      if (ref != 0) s.worst_value_rel = std::max(s.worst_value_rel, rel_err(ours, static_cast<float>(ref)));
      const bool ok = ref == 0 ? std::fabs(ours) <= 1e-30 : e <= 1e-6;
      if (!ok && ++failures <= 5) ADD_FAILURE() << "first_row[" << i << "]: ours " << ours << ", reference " << ref;
    }
    EXPECT_EQ(failures, 0) << failures << " first_row values out of tolerance";

    const double ref_sum = jt.at("sum").get<double>(), ref_sumsq = jt.at("sumsq").get<double>();
    const double sum_err = std::fabs(sum - ref_sum), sumsq_err = std::fabs(sumsq - ref_sumsq);
    EXPECT_LE(sum_err, std::max(1e-6 * std::fabs(ref_sum), 1e-12 * sum_abs)) << "sum " << sum << " vs " << ref_sum;
    EXPECT_LE(sumsq_err, std::max(1e-6 * std::fabs(ref_sumsq), 1e-12 * sumsq))
        << "sumsq " << sumsq << " vs " << ref_sumsq;
    s.worst_sum_rel = std::max(s.worst_sum_rel, rel_err(sum, ref_sum));
    s.worst_sumsq_rel = std::max(s.worst_sumsq_rel, rel_err(sumsq, ref_sumsq));
  }
}

TEST(DequantOracle, EveryTensorOfEveryOracleModel) {
  std::vector<std::filesystem::path> files;
  for (const auto& root : moetier::test::oracle_roots()) {
    for (const auto& e : std::filesystem::directory_iterator(root / "dequant"))
      if (e.path().extension() == ".json") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  ASSERT_FALSE(files.empty()) << "no dequant files under " << moetier::test::oracle_dir();

  std::map<std::string, TypeStats> stats;
  for (const auto& f : files) check_file(f, stats);

  int64_t values = 0, exact = 0;
  std::cout << "dequant oracle: " << files.size() << " files\n";
  for (const auto& [type, s] : stats) {
    std::cout << "  " << type << ": " << s.tensors << " tensors, " << s.bit_exact << "/" << s.values
              << " first_row values bit-exact, worst rel: value " << s.worst_value_rel << ", sum "
              << s.worst_sum_rel << ", sumsq " << s.worst_sumsq_rel << "\n";
    values += s.values;
    exact += s.bit_exact;
  }
  std::cout << "  total: " << exact << "/" << values << " bit-exact\n";
  // Every type the oracle exercises must be present, so a file that silently stopped matching is noticed.
  for (const char* type : {"F32", "F16", "BF16", "Q4_0", "Q5_0", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K",
                           "IQ4_NL", "IQ4_XS", "MXFP4"})
    EXPECT_TRUE(stats.count(type)) << type << " not exercised by any oracle file";
}

}  // namespace
}  // namespace moetier::quant
