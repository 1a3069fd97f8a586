// Hostile metadata in gemma4 and qwen35moe files: each bad value is refused at load with a moetier::Error naming
// the key (or the tensor that contradicts it), before anything is sized by it: no overflow, no huge allocation.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gguf/gguf.h"
#include "model/model.h"
#include "model/model_rewrite.h"
#include "test_support.h"
#include "util/error.h"

namespace moetier::model {
namespace {

namespace fs = std::filesystem;

// The oracle model `name` rewritten into `out_name` with `edit` applied to its metadata.
fs::path rewrite(const std::string& name, const std::string& out_name,
                 const std::function<void(gguf::Metadata&)>& edit) {
  return test::rewrite_model(test::oracle_model(name), "new_arch_bounds", out_name, edit);
}
using test::load_error;

gguf::Value u32_array(std::vector<uint32_t> v) {
  std::vector<gguf::Value> e;
  for (uint32_t x : v) e.push_back(gguf::Value::of_uint32(x));
  return gguf::Value::of_array(gguf::ValueType::UINT32, std::move(e));
}

struct Case {
  const char* label;
  std::function<void(gguf::Metadata&)> edit;
  const char* expect;  // a part of the message: the key or tensor named
};

void expect_refused(const std::string& model, const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    SCOPED_TRACE(c.label);
    const std::string msg = load_error(rewrite(model, std::string(c.label) + ".gguf", c.edit));
    EXPECT_NE(msg.find(c.expect), std::string::npos) << msg;
  }
}

TEST(NewArchBounds, Qwen35HugeOrInconsistentSizesAreRefused) {
  const std::string q = "qwen35moe.";
  auto u64 = [](uint64_t v) { return gguf::Value::of_uint64(v); };
  expect_refused(
      "tiny-qwen35moe-Q8_0",
      {
          // 2^40 x 2^40 would overflow int64 in 2 x group_count x state_size before any tensor check.
          {"state_size_huge",
           [&](gguf::Metadata& md) {
             md.set(q + "ssm.state_size", u64(uint64_t{1} << 40));
             md.set(q + "ssm.group_count", u64(uint64_t{1} << 40));
           },
           "ssm.state_size"},
          {"conv_kernel_huge", [&](gguf::Metadata& md) { md.set(q + "ssm.conv_kernel", u64(uint64_t{1} << 62)); },
           "ssm.conv_kernel"},
          {"conv_kernel_mismatch", [&](gguf::Metadata& md) { md.set(q + "ssm.conv_kernel", u64(5)); },
           "ssm_conv1d.weight"},
          {"inner_size_mismatch", [&](gguf::Metadata& md) { md.set(q + "ssm.inner_size", u64(512)); },
           "attn_qkv.weight"},
          {"inner_not_multiple", [&](gguf::Metadata& md) { md.set(q + "ssm.inner_size", u64(257)); },
           "ssm.inner_size"},
          {"value_heads_not_multiple", [&](gguf::Metadata& md) { md.set(q + "ssm.time_step_rank", u64(3)); },
           "ssm.time_step_rank"},
          {"state_size_zero", [&](gguf::Metadata& md) { md.set(q + "ssm.state_size", u64(0)); }, "ssm.state_size"},
          {"head_count_huge", [&](gguf::Metadata& md) { md.set(q + "attention.head_count", u64(uint64_t{1} << 62)); },
           "attention.head_count"},
          {"key_length_mismatch",
           [&](gguf::Metadata& md) {
             md.set(q + "attention.key_length", u64(32));
             md.set(q + "attention.value_length", u64(32));
           },
           "attn_q.weight"},
      });
}

TEST(NewArchBounds, Gemma4BadPerLayerArraysAndScalarsAreRefused) {
  const std::string g = "gemma4.";
  expect_refused(
      "tiny-gemma4-Q8_0",
      {
          {"kv_array_short", [&](gguf::Metadata& md) { md.set(g + "attention.head_count_kv", u32_array({2, 2, 2})); },
           "attention.head_count_kv"},
          {"kv_array_zero", [&](gguf::Metadata& md) { md.set(g + "attention.head_count_kv", u32_array({2, 0, 2, 1})); },
           "attention.head_count_kv"},
          {"kv_array_wrong", [&](gguf::Metadata& md) { md.set(g + "attention.head_count_kv", u32_array({2, 2, 2, 2})); },
           "blk.3.attn_k.weight"},
          {"pattern_not_bool",
           [&](gguf::Metadata& md) { md.set(g + "attention.sliding_window_pattern", u32_array({1, 1, 1, 0})); },
           "attention.sliding_window_pattern"},
          {"softcap_negative",
           [&](gguf::Metadata& md) { md.set(g + "final_logit_softcapping", gguf::Value::of_float32(-1.0f)); },
           "final_logit_softcapping"},
          {"key_length_swa_huge",
           [&](gguf::Metadata& md) {
             md.set(g + "attention.key_length_swa", gguf::Value::of_uint64(uint64_t{1} << 62));
             md.set(g + "attention.value_length_swa", gguf::Value::of_uint64(uint64_t{1} << 62));
           },
           "blk.0.attn_q.weight"},
          {"per_layer_input",
           [&](gguf::Metadata& md) { md.set(g + "embedding_length_per_layer_input", gguf::Value::of_uint32(256)); },
           "embedding_length_per_layer_input"},
      });
}

}  // namespace
}  // namespace moetier::model
