// MoE layer identity: a model whose first block is dense (blk.0 has a dense FFN and no routed experts, as DeepSeek
// and GLM files lead with) streams and is resident. Both sources index by MoE ordinal m: they deliver for m the
// bytes of blk.(m+1)'s experts in the original file, identical between the two sources, whatever the cache.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>

#include "gguf/writer.h"
#include "moe/expert_layout.h"
#include "moe/expert_store.h"
#include "moe/resident_experts.h"
#include "moe/streaming_experts.h"
#include "stream_test_util.h"
#include "util/error.h"

namespace moetier::moe {
namespace {

namespace fs = std::filesystem;
using test::same_expert;

// `src` with blk.0's routed experts replaced by a dense SwiGLU FFN (expert 0's slices as ffn_gate, ffn_up,
// ffn_down [n_ff] x [n_embd]), its router and expert biases dropped and <arch>.leading_dense_block_count = 1.
// Written once per build tree (ctest runs tests as parallel processes: publish_once).
fs::path dense_lead_copy(const std::string& name) {
  const fs::path dest = moetier::test::tmp_dir("stream_dense_lead") / (name + "-dense0.gguf");
  if (fs::exists(dest)) return dest;
  const auto src = gguf::GgufModel::open(test::model_path(name));
  gguf::Metadata md = src.metadata();
  md.set(src.architecture() + ".leading_dense_block_count", gguf::Value::of_uint32(1));
  struct Out {
    gguf::TensorSpec spec;
    const uint8_t* data = nullptr;  // [spec.n_bytes()] bytes, in the source mapping
  };
  std::vector<Out> out;
  for (const auto& t : src.tensors()) {
    const bool blk0 = t.name.starts_with("blk.0.");
    if (blk0 && (t.name.starts_with("blk.0.ffn_gate_inp.") || t.name.ends_with("_exps.bias"))) continue;
    if (blk0 && ExpertLayout::is_routed_expert_tensor(t.name)) {
      std::string dense = t.name;
      dense.erase(dense.find("_exps"), 5);  // blk.0.ffn_gate_exps.weight -> blk.0.ffn_gate.weight
      out.push_back({{dense, t.type, {t.ne[0], t.ne[1]}}, t.data});  // expert 0: the first n_bytes / n_expert
      continue;
    }
    out.push_back({{t.name, t.type, std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims)}, t.data});
  }
  const fs::path part = dest.string() + "." + std::to_string(::getpid());
  {
    gguf::GgufWriter w(part, src.shards().front().alignment);
    w.set_metadata(md);
    for (const Out& o : out) w.add_tensor(o.spec);
    for (const Out& o : out) w.write_tensor_data({o.data, static_cast<size_t>(o.spec.n_bytes())});
    w.finish();
  }
  moetier::test::publish_once(part, dest);
  return dest;
}

// Checks every delivered expert of MoE layer `layer` against `want` (the resident source over the same file)
// and `original` (blk.(layer + 1) of the file the copy was made from, MoE ordinal layer + 1 there).
class Checker final : public ExpertConsumer {
 public:
  Checker(const ResidentExperts& want, const ResidentExperts& original) : want_(want), original_(original) {}
  void start(int64_t layer) {
    layer_ = layer;
    delivered_.assign(static_cast<size_t>(want_.shape().n_expert), 0);
  }
  void on_experts(std::span<const int32_t> experts, std::span<const ExpertWeights> weights) override {
    for (size_t i = 0; i < experts.size(); ++i) {
      const int32_t e = experts[i];
      ++delivered_[static_cast<size_t>(e)];
      EXPECT_TRUE(same_expert(weights[i], want_.expert(layer_, e), want_.shape()))
          << "MoE layer " << layer_ << " expert " << e << " differs from the resident source";
      EXPECT_TRUE(same_expert(weights[i], original_.expert(layer_ + 1, e), want_.shape()))
          << "MoE layer " << layer_ << " expert " << e << " is not blk." << layer_ + 1 << "'s";
    }
  }
  const std::vector<int>& delivered() const { return delivered_; }

 private:
  const ResidentExperts& want_;
  const ResidentExperts& original_;
  int64_t layer_ = 0;
  std::vector<int> delivered_;  // [n_expert] deliveries of each expert in the current fetch
};

class DenseLeadTest : public ::testing::TestWithParam<std::string> {};

TEST_P(DenseLeadTest, StoreAndResidentIndexTheMoeLayersByOrdinal) {
  const auto original = gguf::GgufModel::open(test::model_path(GetParam()));
  const auto file = gguf::GgufModel::open(dense_lead_copy(GetParam()));
  const ExpertStore full(original);
  const ExpertStore store(file);
  const ExpertShape& sh = store.shape();
  ASSERT_EQ(sh.n_moe_layers, full.shape().n_moe_layers - 1);
  std::vector<int64_t> blocks;
  for (int64_t il = 1; il <= sh.n_moe_layers; ++il) blocks.push_back(il);
  EXPECT_EQ(sh.moe_layers, blocks);
  EXPECT_EQ(sh.n_expert, full.shape().n_expert);
  EXPECT_EQ(sh.has_bias, full.shape().has_bias);

  const ResidentExperts resident(file, sh);
  EXPECT_EQ(resident.shape().moe_layers, blocks);
  ExpertShape counted = sh;  // the model may name the count alone: the blocks come from the file
  counted.moe_layers.clear();
  EXPECT_EQ(ResidentExperts(file, counted).shape().moe_layers, blocks);
  const ResidentExperts resident_full(original, full.shape());
  for (int64_t m = 0; m < sh.n_moe_layers; ++m) {
    for (int32_t e = 0; e < sh.n_expert; ++e) {
      ASSERT_TRUE(same_expert(resident.expert(m, e), resident_full.expert(m + 1, e), sh))
          << "MoE layer " << m << " expert " << e;
    }
  }
}

TEST_P(DenseLeadTest, StreamedExpertsAreTheResidentOnesAtEveryCacheSize) {
  const auto original = gguf::GgufModel::open(test::model_path(GetParam()));
  const auto file = gguf::GgufModel::open(dense_lead_copy(GetParam()));
  const ExpertStore store(file);
  const ExpertShape& sh = store.shape();
  const ResidentExperts resident(file, sh);
  const ResidentExperts resident_full(original, ExpertStore(original).shape());
  Checker check(resident, resident_full);
  std::vector<int32_t> all(static_cast<size_t>(sh.n_expert));
  for (int32_t e = 0; e < sh.n_expert; ++e) all[static_cast<size_t>(e)] = e;
  const std::vector<int32_t> few = {1, 3};

  for (const int64_t per_layer : {int64_t{0}, int64_t{1}, sh.n_expert}) {
    SCOPED_TRACE("cache slots per MoE layer: " + std::to_string(per_layer));
    StreamingOptions so;
    so.cache_bytes = store.slot_bytes() * static_cast<uint64_t>(per_layer * sh.n_moe_layers);
    StreamingExperts stream(file, so);
    EXPECT_EQ(stream.shape().moe_layers, sh.moe_layers);
    ASSERT_EQ(stream.misses_by_moe_layer().size(), static_cast<size_t>(sh.n_moe_layers));
    if (stream.policy() != nullptr) EXPECT_EQ(stream.policy()->config().n_moe_layers, sh.n_moe_layers);
    // A prefill touching every expert, then decode steps touching a few (hits once they are cached).
    for (const bool prefill : {true, false, false}) {
      stream.set_phase(prefill ? Phase::prefill : Phase::decode);
      const std::vector<int32_t>& experts = prefill ? all : few;
      for (int64_t m = 0; m < sh.n_moe_layers; ++m) {
        check.start(m);
        stream.fetch(m, experts, check);
        for (int32_t e : experts) EXPECT_EQ(check.delivered()[static_cast<size_t>(e)], 1) << "expert " << e;
      }
      stream.end_step();
    }
    const StreamCounters& t = stream.totals();
    EXPECT_EQ(t.hits + t.misses, static_cast<uint64_t>(sh.n_moe_layers) * (all.size() + 2 * few.size()));
    if (per_layer == sh.n_expert) EXPECT_EQ(t.misses, static_cast<uint64_t>(sh.n_moe_layers) * all.size());
  }
}

TEST_P(DenseLeadTest, ResidentRefusesAModelThatExpectsOtherMoeLayers) {
  const auto file = gguf::GgufModel::open(dense_lead_copy(GetParam()));
  ExpertShape every_block = ExpertStore(file).shape();  // what a model assuming blocks 0.. would ask for
  for (int64_t& il : every_block.moe_layers) --il;
  try {
    ResidentExperts r(file, every_block);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("-dense0.gguf"), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Oracle, DenseLeadTest,
                         ::testing::Values("tiny-mixtral-Q4_0", "tiny-qwen3moe-Q4_K_M", "tiny-gptoss-MXFP4"),
                         [](const auto& i) { return test::param_name(i.param); });

}  // namespace
}  // namespace moetier::moe
