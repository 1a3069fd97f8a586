// A model file whose weights hold a NaN (a damaged or hostile file: one fp16 block scale of the first layer's query
// projection set to NaN): `run` stops with an error that says the logits went non-finite, instead of crashing or
// printing tokens picked from NaN. The NaN activations reach the integer kernels' activation quantization, which once
// read past a block holding a NaN (kernels_test: NonFiniteActivationsMakeTheirBlockNaN).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cli/run_cli.h"
#include "gguf/gguf.h"
#include "model/model_rewrite.h"
#include "quant/blocks.h"
#include "test_support.h"

namespace moetier::test {
namespace {

// tiny-qwen3moe-Q4_K_M with the d of blk.0.attn_q.weight's first Q4_K block set to NaN.
std::filesystem::path nan_weights_model() {
  bool edited = false;
  const std::filesystem::path out = rewrite_model(
      oracle_model("tiny-qwen3moe-Q4_K_M"), "damaged_weights", "nan-attn-q.gguf", [](gguf::Metadata&) {}, "",
      [&](const gguf::TensorInfo& t, std::vector<uint8_t>& bytes) {
        if (t.name != "blk.0.attn_q.weight") return;
        EXPECT_EQ(t.type, quant::GgmlType::Q4_K);
        const uint16_t nan = 0x7e00;  // fp16 quiet NaN
        std::memcpy(bytes.data() + offsetof(quant::BlockQ4_K, d), &nan, 2);
        edited = true;
      });
  EXPECT_TRUE(edited) << "no blk.0.attn_q.weight in the model";
  return out;
}

TEST(DamagedWeights, NanWeightsStopRunWithAClearError) {
  const std::filesystem::path model = nan_weights_model();
  for (const std::string& flags : {"", " --no-repack", " --experts stream"}) {
    const CliResult r = run_cli("run -m '" + model.string() + "' -p 'Once upon a time' -n 4 --temp 0" + flags);
    EXPECT_FALSE(r.signaled) << flags << "\n" << r.output;
    EXPECT_EQ(r.exit_code, 1) << flags << "\n" << r.output;
    EXPECT_NE(r.output.find("non-finite logit"), std::string::npos) << flags << "\n" << r.output;
    EXPECT_NE(r.output.find("is the file damaged?"), std::string::npos) << flags << "\n" << r.output;
  }
}

}  // namespace
}  // namespace moetier::test
