// Every oracle model with its products on the GPU (lavapipe in CI), under the Khronos validation layer: with
// -ngl 99 (every block and the output head) and, for the MoE models, with the experts of the first two blocks on
// the CPU (--n-cpu-moe 2, the hybrid split; a 2-block model then keeps all its experts on the CPU). Held to the
// tolerances of ../shared/oracle/README.md as the CPU run is (the GPU rounds activations as the CPU does), and a
// fixed placement is deterministic: the same prompt twice gives bit-identical logits. The architectures built from
// the shared blocks (llama, mixtral, qwen3moe, gpt-oss) run the whole step on the GPU (model/gpu_blocks.h): one
// submission per token and per MoE layer; the others run their products there one submission each.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "gguf/gguf.h"
#include "gpu/gpu.h"
#include "model/eval.h"
#include "model/model.h"
#include "model/token_input.h"
#include "oracle_cases.h"
#include "test_support.h"

namespace moetier::model {
namespace {

struct GpuCase {
  std::string model;
  int n_cpu_moe = 0;
  int n_gpu_layers = 99;
};

// gtest prints a parameter with this (the default is its bytes).
void PrintTo(const GpuCase& c, std::ostream* os) {
  *os << c.model << " -ngl " << c.n_gpu_layers << " --n-cpu-moe " << c.n_cpu_moe;
}

std::vector<GpuCase> gpu_cases() {
  std::vector<GpuCase> cases;
  for (const std::string& m : test::oracle_model_names()) cases.push_back({m, 0});
  for (const std::string& m : test::moe_model_names()) cases.push_back({m, 2});
  // Partial offload (-ngl 2: the last two blocks on the GPU step, the first ones and the output head on the CPU)
  // for one model of each architecture the GPU step runs.
  for (const char* m : {"stories260K", "tiny-mixtral-Q4_0", "tiny-qwen3moe-Q4_K_M", "tiny-gptoss-MXFP4"}) {
    cases.push_back({m, 0, 2});
  }
  return cases;
}

class OracleGpuTest : public ::testing::TestWithParam<GpuCase> {
 protected:
  // The validation layer, with synchronization validation, on for every backend the models open.
  void SetUp() override { setenv("MOETIER_VULKAN_VALIDATION", "sync", 1); }
};

TEST_P(OracleGpuTest, TeacherForcedMatchesReference) {
  const GpuCase& gc = GetParam();
  const uint64_t errors_before = gpu::validation_errors_in_process();
  const gguf::GgufModel file = gguf::GgufModel::open(test::oracle_model(gc.model));
  ModelOptions opts;
  opts.n_ctx = 512;
  opts.n_gpu_layers = gc.n_gpu_layers;
  opts.n_cpu_moe = gc.n_cpu_moe;
  const auto model = load_model(file, opts);
  const ModelInfo& info = model->info();
  ASSERT_FALSE(info.gpu.empty());
  const bool partial = gc.n_gpu_layers < info.n_layer;
  const int64_t first = partial ? info.n_layer - gc.n_gpu_layers : 0;  // the first block on the GPU
  EXPECT_NE(info.gpu.find(partial ? fmt::format("blocks {}..{} of {};", first, info.n_layer - 1, info.n_layer)
                                  : fmt::format("blocks 0..{} of {} and the output head", info.n_layer - 1,
                                                info.n_layer)),
            std::string::npos)
      << info.gpu;
  if (gc.n_cpu_moe > 0) {
    const std::string experts = info.n_layer > gc.n_cpu_moe
                                    ? fmt::format("the routed experts of blocks {}..{}", gc.n_cpu_moe, info.n_layer - 1)
                                    : std::string("no routed experts");
    EXPECT_NE(info.gpu.find(experts), std::string::npos) << info.gpu;
  }
  const bool gpu_step = info.architecture == "llama" || info.architecture == "qwen3moe" ||
                        info.architecture == "gpt-oss";
  const std::string step_line =
      partial ? fmt::format("the step on the GPU from block {} (blocks below {} on the CPU), the output head on the CPU",
                            first, first)
              : std::string("the whole step on the GPU");
  EXPECT_EQ(info.gpu.find(step_line) != std::string::npos, gpu_step) << info.gpu;
  const std::vector<test::OracleCase> cases = test::run_oracle_cases(*model, test::reference_for(gc.model));
  ASSERT_EQ(cases.size(), 3u) << "expected p1, p2 and plong references for " << gc.model;
  for (const test::OracleCase& c : cases) {
    fmt::print("  {:<24} cpu-moe {} {:<6} rows {:>3}  mean rel {:.2e}  max rel {:.2e}  argmax {:>3}/{:<3}  routing "
               "{:>4}/{:<4}\n",
               gc.model, gc.n_cpu_moe, c.prompt, c.logits.n_rows, c.logits.mean_rel, c.logits.max_rel,
               c.logits.argmax_same, c.logits.n_rows, c.routing.same, c.routing.total);
  }
  // A fixed placement computes in a fixed order: p1 again gives the same bits.
  const TokenInput p1 = read_token_input(test::oracle_ref(test::reference_for(gc.model), "p1").string(), 0);
  const EvalResult again = evaluate(*model, p1.tokens, p1.n_prefill);
  ASSERT_EQ(again.logits.size(), cases.front().result.logits.size());
  EXPECT_EQ(0, std::memcmp(again.logits.data(), cases.front().result.logits.data(), again.logits.size() * sizeof(float)))
      << gc.model << ": a second run of p1 gave other logits";
  EXPECT_EQ(gpu::validation_errors_in_process(), errors_before) << "the validation layer reported errors";
  // The products ran on the GPU, not silently on the CPU: every step dispatched.
  const compute::BackendCounters counters = model->backend_counters();
  EXPECT_GE(counters.submissions, static_cast<uint64_t>(cases.size())) << gc.model;
  EXPECT_GT(counters.dispatches, counters.submissions) << gc.model;
  if (gpu_step) {
    // One decode step: one submission at its end (the logits, or the rows the CPU's output head reads) and one per
    // MoE layer on the GPU step (its routing, or its CPU experts' input).
    const auto moe_on_gpu = static_cast<uint64_t>(
        std::count_if(info.moe_layers.begin(), info.moe_layers.end(), [&](int64_t il) { return il >= first; }));
    std::vector<float> logits(static_cast<size_t>(info.n_vocab));
    const int32_t token = p1.tokens.front();
    model->forward({&token, 1}, static_cast<int64_t>(p1.tokens.size()), logits, LogitsMode::last, {});
    EXPECT_EQ(model->backend_counters().submissions - counters.submissions, moe_on_gpu + 1) << gc.model;
  }
  const test::OracleTotals t = test::oracle_totals(cases);
  if (const char* problem = test::reference_problem(gc.model))
    GTEST_SKIP() << gc.model << ": mean rel " << t.mean_rel << " not judged: " << problem;
  test::expect_within_oracle_tolerance(t, file, gc.model);
}

INSTANTIATE_TEST_SUITE_P(Gpu, OracleGpuTest, ::testing::ValuesIn(gpu_cases()),
                         [](const ::testing::TestParamInfo<GpuCase>& info) {
                           std::string s = info.param.model + (info.param.n_cpu_moe > 0 ? "_cpu_moe_2"
                                                               : info.param.n_gpu_layers < 99 ? "_ngl_2"
                                                                                               : "_ngl_99");
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

}  // namespace
}  // namespace moetier::model
