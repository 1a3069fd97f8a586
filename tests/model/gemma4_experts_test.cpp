// Gemma 4's merged experts in the expert sources: ffn_gate_up_exps holds each expert's gate rows then its up rows,
// the per-expert output scale ffn_down_exps.scale stays with the router (a dense tensor, never streamed), and the
// resident views and the streaming store's slot layout agree on where every expert's gate, up and down are.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "gguf/tensor_binder.h"
#include "moe/expert_layout.h"
#include "moe/expert_store.h"
#include "moe/resident_experts.h"
#include "quant/ggml_type.h"
#include "test_support.h"

namespace moetier::moe {
namespace {

TEST(Gemma4Experts, MergedGateUpIsOneSliceWithGateRowsFirst) {
  for (const char* name : {"tiny-gemma4-F16", "tiny-gemma4-Q4_K_M"}) {
    const gguf::GgufModel f = gguf::GgufModel::open(test::oracle_model(name));
    EXPECT_FALSE(ExpertLayout::is_routed_expert_tensor("blk.0.ffn_down_exps.scale"));
    EXPECT_TRUE(ExpertLayout::is_routed_expert_tensor("blk.0.ffn_gate_up_exps.weight"));

    const ExpertStore store(f);
    const ExpertShape& sh = store.shape();
    EXPECT_TRUE(sh.merged_gate_up) << name;
    EXPECT_EQ(sh.n_ff, 64) << name;
    EXPECT_EQ(sh.n_embd, 256) << name;
    EXPECT_EQ(sh.n_moe_layers, 4) << name;
    ResidentExperts resident(f, sh);
    for (int64_t m = 0; m < sh.n_moe_layers; ++m) {
      const int64_t il = sh.moe_layers[static_cast<size_t>(m)];
      EXPECT_EQ(store.n_slices(m), 2) << name << " layer " << il;  // gate_up and down: the scale is not a slice
      const gguf::TensorInfo* gu = f.find(gguf::block_tensor(il, "ffn_gate_up_exps.weight"));
      ASSERT_NE(gu, nullptr);
      const size_t rb = quant::row_bytes(gu->type, sh.n_embd);
      const uint64_t per = gu->n_bytes / static_cast<uint64_t>(sh.n_expert);
      for (int32_t e = 0; e < sh.n_expert; ++e) {
        const ExpertWeights w = resident.expert(m, e);
        EXPECT_EQ(w.gate.data, gu->data + per * static_cast<uint64_t>(e)) << name << " layer " << il << " e " << e;
        EXPECT_EQ(w.up.data, w.gate.data + static_cast<size_t>(sh.n_ff) * rb) << name << " layer " << il;
        EXPECT_EQ(w.gate.rows, sh.n_ff);
        EXPECT_EQ(w.up.rows, sh.n_ff);
        EXPECT_EQ(w.down.rows, sh.n_embd);
        EXPECT_EQ(w.gate.row_bytes, rb);
      }
      // The store reads each expert's gate_up slice whole into its region; its views split it the same way.
      const SliceRead r = store.slice_read(m, 3, 0);
      EXPECT_EQ(r.need - r.skip, per);
      EXPECT_EQ(gu->file_offset + 3 * per, r.file_offset + r.skip);
      std::vector<uint8_t> slot(store.slot_bytes());
      const ExpertWeights v = store.view(m, 3, slot.data());
      EXPECT_EQ(v.gate.data, slot.data() + r.region + r.skip);
      EXPECT_EQ(v.up.data, v.gate.data + static_cast<size_t>(sh.n_ff) * rb);
      EXPECT_EQ(v.up.rows, sh.n_ff);
      EXPECT_EQ(v.gate.type, gu->type);
    }
  }
}

}  // namespace
}  // namespace moetier::moe
