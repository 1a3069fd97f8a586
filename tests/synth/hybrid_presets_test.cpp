// `synth` presets of the hybrid architectures (gemma4 MoE, qwen35moe): the planned full-size models have the
// tensor layout of the reference tiny files in ../shared/oracle/incoming/<arch>/models (the same tensor names and
// number of dims per kind of block, the same F32-or-quantized choice, the same metadata keys), and the tiny
// presets write files the reader accepts with finite, sane values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gguf/gguf.h"
#include "quant/dequant_ref.h"
#include "synth/model_plan.h"
#include "synth/synth.h"
#include "synth/synth_vocab.h"
#include "test_support.h"
#include "util/error.h"

namespace moetier {
namespace {

namespace fs = std::filesystem;
using quant::GgmlType;

// One tensor as the layout comparison sees it: its name within the block (or the whole name outside blocks),
// its number of dims, and whether it is stored F32.
struct Entry {
  std::string name;
  size_t n_dims = 0;
  bool f32 = false;
  bool operator==(const Entry&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Entry& e) {
  return os << e.name << " (" << e.n_dims << " dims, " << (e.f32 ? "F32" : "quantized") << ")";
}

// A model's tensors grouped by block kind: kind -> the entries of each block of that kind, in file order; the
// tensors outside blocks under kind "global".
struct Layout {
  std::map<std::string, std::vector<std::vector<Entry>>> kinds;
  std::set<std::string> metadata_keys;  // all but tokenizer.* (the vocabulary differs by design)
};

// The kind of block il, from the metadata that defines it: gemma4's sliding_window_pattern, qwen35moe's
// full_attention_interval.
std::string block_kind(const gguf::Metadata& md, const std::string& arch, int64_t il) {
  if (arch == "gemma4") {
    const auto& pattern = md.get(arch + ".attention.sliding_window_pattern").as_array();
    return pattern.at(static_cast<size_t>(il)).as_bool() ? "sliding" : "full";
  }
  const auto interval = static_cast<int64_t>(md.get_uint(arch + ".full_attention_interval"));
  return (il + 1) % interval == 0 ? "full" : "linear";
}

// kind_of(block index) names the block's kind from the model's own metadata.
template <class KindOf>
Layout layout_of(const std::vector<std::pair<std::string, std::pair<size_t, GgmlType>>>& tensors,
                 const gguf::Metadata& md, KindOf kind_of) {
  Layout l;
  std::map<int64_t, std::vector<Entry>> blocks;
  std::vector<Entry> global;
  for (const auto& [name, info] : tensors) {
    const Entry e{name, info.first, info.second == GgmlType::F32};
    if (name.rfind("blk.", 0) == 0) {
      const size_t dot = name.find('.', 4);
      const int64_t il = std::stoll(name.substr(4, dot - 4));
      blocks[il].push_back({name.substr(dot + 1), e.n_dims, e.f32});
    } else {
      global.push_back(e);
    }
  }
  for (auto& [il, entries] : blocks) l.kinds[kind_of(il)].push_back(std::move(entries));
  l.kinds["global"].push_back(std::move(global));
  for (const auto& [k, v] : md.entries())
    if (k.rfind("tokenizer.", 0) != 0) l.metadata_keys.insert(k);
  return l;
}

Layout layout_of_file(const fs::path& path, const std::string& arch) {
  gguf::OpenOptions o;
  o.map_data = false;
  const auto m = gguf::GgufModel::open(path, o);
  std::vector<std::pair<std::string, std::pair<size_t, GgmlType>>> tensors;
  for (const auto& t : m.tensors()) tensors.push_back({t.name, {t.n_dims, t.type}});
  const auto& md = m.metadata();
  return layout_of(tensors, md, [&](int64_t il) { return block_kind(md, arch, il); });
}

Layout layout_of_plan(const synth::ModelPlan& plan, const std::string& arch) {
  std::vector<std::pair<std::string, std::pair<size_t, GgmlType>>> tensors;
  for (const auto& t : plan.tensors) tensors.push_back({t.spec.name, {t.spec.ne.size(), t.spec.type}});
  return layout_of(tensors, plan.metadata, [&](int64_t il) { return block_kind(plan.metadata, arch, il); });
}

synth::ModelPlan plan_of(const std::string& preset) {
  const auto shape = synth::find_preset(preset);
  return synth::plan_model(shape, synth::parse_quant_mix("Q4_K_M"), synth::make_default_vocab(shape.n_vocab));
}

// Every block of a kind in the plan lists the same tensors (names, dims, F32 or not, in order) as the oracle's
// blocks of that kind; the kinds and the metadata keys are the same.
void expect_same_layout(const std::string& preset, const std::string& arch, const std::string& oracle_file) {
  const fs::path oracle = test::oracle_dir() / "incoming" / arch / "models" / oracle_file;
  ASSERT_TRUE(fs::exists(oracle)) << oracle;
  const Layout want = layout_of_file(oracle, arch);
  const Layout got = layout_of_plan(plan_of(preset), arch);
  EXPECT_EQ(got.metadata_keys, want.metadata_keys);
  ASSERT_EQ(got.kinds.size(), want.kinds.size());
  for (const auto& [kind, blocks] : want.kinds) {
    SCOPED_TRACE(preset + ": block kind " + kind);
    ASSERT_TRUE(got.kinds.count(kind));
    // The oracle's blocks of one kind agree with each other: the first is the reference.
    for (const auto& b : got.kinds.at(kind)) EXPECT_EQ(b, blocks.front());
  }
}

TEST(SynthHybrid, Gemma4PresetHasTheOracleLayout) {
  expect_same_layout("gemma-4-26b-a4b", "gemma4", "tiny-gemma4-Q4_K_M.gguf");
}

TEST(SynthHybrid, Qwen35MoePresetHasTheOracleLayout) {
  expect_same_layout("qwen3.5-35b-a3b", "qwen35moe", "tiny-qwen35moe-Q4_K_M.gguf");
}

const synth::PlannedTensor& tensor(const synth::ModelPlan& plan, const std::string& name) {
  for (const auto& t : plan.tensors)
    if (t.spec.name == name) return t;
  fail("no tensor {}", name);
}

bool has(const synth::ModelPlan& plan, const std::string& name) {
  for (const auto& t : plan.tensors)
    if (t.spec.name == name) return true;
  return false;
}

uint64_t n_params(const synth::ModelPlan& plan) {
  uint64_t n = 0;
  for (const auto& t : plan.tensors) {
    uint64_t e = 1;
    for (int64_t d : t.spec.ne) e *= static_cast<uint64_t>(d);
    n += e;
  }
  return n;
}

// Shapes from the published config (see src/synth/preset.cpp): block 5 is gemma4's first full-attention block.
TEST(SynthHybrid, Gemma4FullSizeShapesAndTypes) {
  const auto plan = plan_of("gemma-4-26b-a4b");
  EXPECT_EQ(tensor(plan, "blk.0.attn_q.weight").spec.ne, (std::vector<int64_t>{2816, 16 * 256}));
  EXPECT_EQ(tensor(plan, "blk.0.attn_v.weight").spec.ne, (std::vector<int64_t>{2816, 8 * 256}));
  EXPECT_EQ(tensor(plan, "blk.5.attn_q.weight").spec.ne, (std::vector<int64_t>{2816, 16 * 512}));
  EXPECT_EQ(tensor(plan, "blk.5.attn_k.weight").spec.ne, (std::vector<int64_t>{2816, 2 * 512}));
  EXPECT_FALSE(has(plan, "blk.5.attn_v.weight"));
  EXPECT_FALSE(has(plan, "output.weight"));  // tied embeddings
  EXPECT_EQ(tensor(plan, "blk.29.ffn_gate_up_exps.weight").spec.ne, (std::vector<int64_t>{2816, 2 * 704, 128}));
  EXPECT_EQ(tensor(plan, "rope_freqs.weight").spec.ne, (std::vector<int64_t>{256}));
  EXPECT_EQ(tensor(plan, "rope_freqs.weight").n_rotated, 64);
  // Rows of 704 and 2112 are not whole Q4_K/Q6_K blocks: llama-quantize's fallbacks.
  EXPECT_EQ(tensor(plan, "blk.1.ffn_down_exps.weight").spec.type, GgmlType::Q8_0);  // a more-bits layer
  EXPECT_EQ(tensor(plan, "blk.4.ffn_down_exps.weight").spec.type, GgmlType::Q5_0);
  EXPECT_EQ(tensor(plan, "blk.4.ffn_down.weight").spec.type, GgmlType::Q5_0);
  EXPECT_EQ(tensor(plan, "token_embd.weight").spec.type, GgmlType::Q6_K);  // the output's type when tied
  EXPECT_EQ(tensor(plan, "blk.3.ffn_gate_up_exps.weight").spec.type, GgmlType::Q4_K);
  EXPECT_EQ(plan.metadata.get_int_array("gemma4.attention.head_count_kv").at(5), 2);
  EXPECT_EQ(plan.metadata.get_int_array("gemma4.attention.head_count_kv").at(4), 8);
  // The model card's 25.2 B total parameters (the language model), to within 1%.
  EXPECT_GT(static_cast<double>(n_params(plan)), 24.95e9);
  EXPECT_LT(static_cast<double>(n_params(plan)), 25.45e9);
}

TEST(SynthHybrid, Qwen35MoeFullSizeShapesAndTypes) {
  const auto plan = plan_of("qwen3.5-35b-a3b");
  EXPECT_EQ(tensor(plan, "blk.0.attn_qkv.weight").spec.ne, (std::vector<int64_t>{2048, 2 * 16 * 128 + 32 * 128}));
  EXPECT_EQ(tensor(plan, "blk.0.ssm_conv1d.weight").spec.ne, (std::vector<int64_t>{4, 2 * 16 * 128 + 32 * 128}));
  EXPECT_EQ(tensor(plan, "blk.0.ssm_alpha.weight").spec.ne, (std::vector<int64_t>{2048, 32}));
  EXPECT_EQ(tensor(plan, "blk.0.ssm_norm.weight").spec.ne, (std::vector<int64_t>{128}));
  EXPECT_EQ(tensor(plan, "blk.3.attn_q.weight").spec.ne, (std::vector<int64_t>{2048, 2 * 16 * 256}));
  EXPECT_EQ(tensor(plan, "blk.3.attn_output.weight").spec.ne, (std::vector<int64_t>{16 * 256, 2048}));
  EXPECT_FALSE(has(plan, "blk.4.attn_q.weight"));
  EXPECT_EQ(tensor(plan, "blk.39.ffn_down_exps.weight").spec.ne, (std::vector<int64_t>{512, 2048, 256}));
  EXPECT_EQ(tensor(plan, "output.weight").spec.ne, (std::vector<int64_t>{2048, 248320}));
  EXPECT_EQ(tensor(plan, "blk.0.ssm_a").spec.type, GgmlType::F32);
  EXPECT_EQ(tensor(plan, "blk.0.ssm_a").center, -1.0f);
  EXPECT_EQ(tensor(plan, "blk.0.ffn_down_shexp.weight").spec.type, GgmlType::Q6_K);  // a more-bits layer
  EXPECT_EQ(tensor(plan, "blk.5.ffn_down_shexp.weight").spec.type, GgmlType::Q4_K);
  // The model card's 35 B counts the vision tower and the multi-token-prediction layer too (neither is here).
  EXPECT_GT(static_cast<double>(n_params(plan)), 34.0e9);
  EXPECT_LT(static_cast<double>(n_params(plan)), 35.0e9);
}

// The tiny presets write files the reader opens, with every value finite, RMSNorm gains near 1, ssm_a negative and
// rope_freqs rotating the preset's fraction of pairs.
TEST(SynthHybrid, TinyPresetsWriteSaneFiles) {
  for (const std::string preset : {"tiny-gemma4", "tiny-qwen35moe"}) {
    SCOPED_TRACE(preset);
    synth::SynthOptions o;
    o.shape = synth::find_preset(preset);
    o.output = test::tmp_dir("synth_hybrid") / (preset + ".gguf");
    const auto r = synth::write_synthetic_model(o);
    EXPECT_EQ(r.file_bytes, fs::file_size(o.output));
    const auto m = gguf::GgufModel::open(o.output);
    EXPECT_EQ(m.architecture(), o.shape.arch);
    for (const auto& t : m.tensors()) {
      std::vector<float> v(static_cast<size_t>(t.n_elements()));
      for (int64_t row = 0; row < t.n_elements() / t.ne[0]; ++row)
        quant::dequantize_row_ref(t.type, t.data + static_cast<uint64_t>(row) * t.row_bytes(), v.data() + row * t.ne[0],
                                  t.ne[0]);
      for (float x : v) ASSERT_TRUE(std::isfinite(x) || t.name == "rope_freqs.weight") << t.name;
      if (t.name.find("norm.weight") != std::string::npos)
        for (float x : v) ASSERT_NEAR(x, 1.0f, 0.2f) << t.name;
      if (t.name.size() > 5 && t.name.compare(t.name.size() - 5, 5, "ssm_a") == 0)
        for (float x : v) ASSERT_LT(x, 0.0f) << t.name;
      if (t.name == "rope_freqs.weight") {
        int n_one = 0;
        for (float x : v) n_one += x == 1.0f ? 1 : 0;
        EXPECT_EQ(n_one, static_cast<int>(o.shape.rope_partial * static_cast<double>(v.size())));
      }
    }
  }
}

}  // namespace
}  // namespace moetier
