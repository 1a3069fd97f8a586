// Repacked weights (ModelOptions::repack and repack_experts, quant/repack.h) change how the dense Q8_0, Q4_K, Q5_K,
// Q6_K, MXFP4 and IQ4_XS matrices and the resident routed experts' stacks are laid out in memory, never the math: a
// model's logits and routing, prompt and decode, are bit-identical with and without them; and the start log says what
// was repacked, or why nothing was.
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gguf/gguf.h"
#include "model/eval.h"
#include "model/model.h"
#include "quant/kernels/int8_kernels.h"
#include "test_support.h"

namespace moetier::model {
namespace {

EvalResult run(const gguf::GgufModel& file, bool repack, std::string* note, int threads = 2, bool experts = true) {
  ModelOptions opts;
  opts.n_ctx = 64;
  opts.threads = threads;
  opts.repack = repack;
  opts.repack_experts = repack && experts;
  const auto model = load_model(file, opts);
  *note = model->info().repack;
  std::vector<int32_t> tokens(24);
  std::iota(tokens.begin(), tokens.end(), 3);
  return evaluate(*model, tokens, 16);  // a prompt of 16 tokens as one batch, then 8 decode steps
}

class RepackTest : public ::testing::TestWithParam<std::string> {};

TEST_P(RepackTest, LogitsAndRoutingAreBitIdentical) {
  const gguf::GgufModel file = gguf::GgufModel::open(test::oracle_model(GetParam()));
  std::string on_note, off_note;
  const EvalResult on = run(file, true, &on_note);
  const EvalResult off = run(file, false, &off_note);
  EXPECT_EQ(off_note.rfind("off", 0), 0u) << off_note;
  if (quant::kernels::has_rows16_kernel(quant::GgmlType::Q8_0)) {
    // every file here has dense matrices of a repacked type: Q8_0, or Q4_K / Q5_K in the Q4_K_M / Q5_K_M mixes, or
    // IQ4_XS
    const std::string& file_name = GetParam();
    const char* type = file_name.find("Q4_K_M") != std::string::npos   ? " Q4_K"
                       : file_name.find("Q5_K_M") != std::string::npos ? " Q5_K"
                       : file_name.find("IQ4_XS") != std::string::npos ? " IQ4_XS"
                                                                        : " Q8_0";
    EXPECT_NE(on_note.find(type), std::string::npos) << on_note;
    EXPECT_NE(on_note.find(" matrices ("), std::string::npos) << on_note;
    // and so are their experts (stacks of those types, each expert whole groups of 16 rows): the gate and up
    // stacks of every MoE layer at least
    EXPECT_NE(on_note.find("the routed experts' among them: "), std::string::npos) << on_note;
  } else {
    EXPECT_EQ(on_note.rfind("none: ", 0), 0u) << on_note;
  }
  ASSERT_EQ(on.logits.size(), off.logits.size());
  EXPECT_EQ(0, std::memcmp(on.logits.data(), off.logits.data(), sizeof(float) * on.logits.size()))
      << GetParam() << ": logits differ with repacked weights";
  EXPECT_EQ(on.routing, off.routing);
  // One thread splits no product: the same bits again.
  std::string one_note;
  const EvalResult one = run(file, true, &one_note, 1);
  EXPECT_EQ(0, std::memcmp(on.logits.data(), one.logits.data(), sizeof(float) * on.logits.size()));
  // The dense matrices alone (the experts as the file stores them): the same bits, and a note without experts.
  std::string dense_note;
  const EvalResult dense = run(file, true, &dense_note, 2, false);
  EXPECT_EQ(dense_note.find("routed experts"), std::string::npos) << dense_note;
  EXPECT_EQ(0, std::memcmp(on.logits.data(), dense.logits.data(), sizeof(float) * on.logits.size()));
}

INSTANTIATE_TEST_SUITE_P(Files, RepackTest,
                         ::testing::Values("tiny-gptoss-Q8_0", "tiny-qwen3moe-Q8_0", "tiny-qwen3moe-Q4_K_M",
                                           "tiny-qwen3moe-Q5_K_M", "tiny-qwen35moe-Q4_K_M", "tiny-gemma4-Q4_K_M",
                                           "tiny-mixtral-IQ4_XS"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s)
                             if (c == '-') c = '_';
                           return s;
                         });

TEST(Repack, ExactActivationsKeepTheFileLayout) {
  const gguf::GgufModel file = gguf::GgufModel::open(test::oracle_model("tiny-gptoss-Q8_0"));
  ModelOptions opts;
  opts.n_ctx = 16;
  opts.rounding = quant::ActivationRounding::exact;
  opts.repack = true;
  opts.repack_experts = true;
  const auto model = load_model(file, opts);
  EXPECT_EQ(model->info().repack.rfind("off: ", 0), 0u) << model->info().repack;
}

}  // namespace
}  // namespace moetier::model
