// The -ngl / --n-cpu-moe plan (model/gpu_placement.h) on the oracle's files, without a GPU: which blocks, heads
// and expert stacks it places, counted as llama.cpp counts them.
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gguf/gguf.h"
#include "gguf/tensor_binder.h"
#include "model/gpu_placement.h"
#include "test_support.h"

namespace moetier::model {
namespace {

// Binds every 2-D tensor as a matrix, as an architecture binds its product weights.
std::vector<gguf::BoundMatrix> bind_all(const gguf::GgufModel& file, gguf::TensorBinder& bind) {
  for (const gguf::TensorInfo& t : file.tensors()) {
    if (t.n_dims == 2) bind.matrix(t.name, t.ne[0], t.ne[1]);
  }
  return bind.matrices();
}

bool placed(const GpuPlacement& p, const std::string& name) {
  return std::any_of(p.weights.begin(), p.weights.end(), [&](const gguf::BoundMatrix& b) { return b.name == name; });
}

TEST(GpuPlacement, LastBlocksFirstAndTheOutputHeadAboveTheBlockCount) {
  const auto file = gguf::GgufModel::open(test::oracle_model("tiny-qwen3moe-Q4_K_M"));
  gguf::TensorBinder bind(file);
  const auto bound = bind_all(file, bind);
  const GpuPlacementRequest two{4, 2, 0, true};
  const GpuPlacement p = plan_gpu_placement(file, bound, two);
  EXPECT_EQ(p.first_layer, 2);
  EXPECT_FALSE(p.output);
  EXPECT_EQ(p.expert_layers, 2);
  EXPECT_TRUE(placed(p, "blk.2.attn_q.weight"));
  EXPECT_TRUE(placed(p, "blk.3.ffn_down_exps.weight"));
  EXPECT_FALSE(placed(p, "blk.1.attn_q.weight"));
  EXPECT_FALSE(placed(p, "output.weight"));
  EXPECT_FALSE(placed(p, "token_embd.weight"));
  EXPECT_EQ(p.describe(two), "blocks 2..3 of 4; the routed experts of blocks 2..3");

  const GpuPlacementRequest all{4, 99, 3, true};
  const GpuPlacement q = plan_gpu_placement(file, bound, all);
  EXPECT_EQ(q.first_layer, 0);
  EXPECT_TRUE(q.output);
  EXPECT_TRUE(placed(q, "output.weight"));
  EXPECT_FALSE(placed(q, "token_embd.weight"));  // untied: the lookup reads RAM, no product reads it
  EXPECT_EQ(q.expert_layers, 1);
  EXPECT_FALSE(placed(q, "blk.2.ffn_up_exps.weight"));
  EXPECT_TRUE(placed(q, "blk.3.ffn_up_exps.weight"));
  EXPECT_TRUE(placed(q, "blk.0.ffn_gate_inp.weight"));  // the router is a dense product of its block
  // Each block's experts kept on the CPU is that much less on the GPU.
  const GpuPlacement q0 = plan_gpu_placement(file, bound, GpuPlacementRequest{4, 99, 0, true});
  EXPECT_EQ(q0.expert_layers, 4);
  EXPECT_GT(q0.bytes, q.bytes);
  // An expert stack is one view of n_expert * rows rows; a product reads one expert's rows.
  const gguf::TensorInfo* up = file.find("blk.3.ffn_up_exps.weight");
  ASSERT_NE(up, nullptr);
  EXPECT_GE(q.max_rows, up->ne[1]);
  EXPECT_EQ(q.describe(all),
            "blocks 0..3 of 4 and the output head; the routed experts of block 3 (--n-cpu-moe 3 keeps those of blocks "
            "below 3 on the CPU)");

  const GpuPlacementRequest streamed{4, 99, 0, false};
  const GpuPlacement s = plan_gpu_placement(file, bound, streamed);
  EXPECT_EQ(s.expert_layers, 0);
  EXPECT_FALSE(placed(s, "blk.0.ffn_up_exps.weight"));
  EXPECT_NE(s.describe(streamed).find("streamed experts are computed on the CPU"), std::string::npos);

  const GpuPlacement none = plan_gpu_placement(file, bound, GpuPlacementRequest{4, 0, 0, true});
  EXPECT_TRUE(none.weights.empty());
  EXPECT_EQ(none.bytes, 0u);
}

TEST(GpuPlacement, TiedEmbeddingsArePlacedOnceAsTheOutputHead) {
  const auto file = gguf::GgufModel::open(test::oracle_model("tiny-gemma4-Q4_K_M"));
  ASSERT_EQ(file.find("output.weight"), nullptr) << "expected a file with tied embeddings";
  gguf::TensorBinder bind(file);
  auto bound = bind_all(file, bind);
  const auto embd = std::find_if(bound.begin(), bound.end(),
                                 [](const gguf::BoundMatrix& b) { return b.name == "token_embd.weight"; });
  ASSERT_NE(embd, bound.end());
  bound.push_back(*embd);  // bound twice (as the embeddings and as the tied head), placed once
  const GpuPlacement p = plan_gpu_placement(file, bound, GpuPlacementRequest{4, 5, 0, true});
  EXPECT_TRUE(p.output);
  EXPECT_EQ(std::count_if(p.weights.begin(), p.weights.end(),
                          [](const gguf::BoundMatrix& b) { return b.name == "token_embd.weight"; }),
            1);
  EXPECT_EQ(p.expert_layers, 4);
  EXPECT_TRUE(placed(p, "blk.0.ffn_gate_up_exps.weight"));
}

}  // namespace
}  // namespace moetier::model
