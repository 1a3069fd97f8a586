// `synth`: plans with real architectures' shapes, random blocks that dequantize to finite values of the intended
// spread, reproducible files that the reader accepts.
#include <cmath>
#include <fstream>
#include <vector>

#include <gtest/gtest.h>
#include <xxhash.h>

#include "cli/run_cli.h"
#include "gguf/gguf.h"
#include "quant/dequant_ref.h"
#include "synth/model_plan.h"
#include "synth/random_blocks.h"
#include "synth/synth.h"
#include "synth/synth_vocab.h"
#include "util/error.h"

namespace moetier {
namespace {

namespace fs = std::filesystem;
using quant::GgmlType;

double stddev(const std::vector<float>& v, double* mean_out = nullptr) {
  double s = 0, ss = 0;
  for (float x : v) {
    s += x;
    ss += static_cast<double>(x) * x;
  }
  const double n = static_cast<double>(v.size());
  if (mean_out) *mean_out = s / n;
  return std::sqrt(std::max(0.0, ss / n - (s / n) * (s / n)));
}

// Every type synth can write decodes (through the reference dequantizer) to finite values whose standard
// deviation is within 2x of the target and whose mean is small against it: the scales are sane.
TEST(SynthBlocks, EveryTypeDecodesToTheIntendedSpread) {
  for (const auto& tr : quant::all_types()) {
    if (!synth::can_fill(tr.type)) continue;
    SCOPED_TRACE(std::string(quant::type_name(tr.type)));
    const int64_t n = 256 * 64;
    std::vector<uint8_t> buf(quant::row_bytes(tr.type, n));
    synth::Rng rng(7);
    const float target = 0.05f;
    synth::fill_random(tr.type, buf.data(), n, target, rng);
    std::vector<float> v(static_cast<size_t>(n));
    quant::dequantize_row_ref(tr.type, buf.data(), v.data(), n);
    for (float x : v) ASSERT_TRUE(std::isfinite(x));
    double mean = 0;
    const double sd = stddev(v, &mean);
    EXPECT_GT(sd, target / 2.0);
    EXPECT_LT(sd, target * 2.0);
    EXPECT_LT(std::fabs(mean), target / 2.0);
  }
}

TEST(SynthPlan, Qwen3_30B_A3B_HasTheRealShape) {
  const auto shape = synth::find_preset("qwen3-30b-a3b");
  const auto plan = synth::plan_model(shape, synth::parse_quant_mix("Q4_K_M"), synth::make_default_vocab(shape.n_vocab));
  int n_gate = 0;
  for (const auto& t : plan.tensors) {
    if (t.spec.name.find("ffn_gate_exps") != std::string::npos) {
      ++n_gate;
      EXPECT_EQ(t.spec.ne, (std::vector<int64_t>{2048, 768, 128}));
      EXPECT_EQ(t.spec.type, GgmlType::Q4_K);
    }
    if (t.spec.name == "token_embd.weight") EXPECT_EQ(t.spec.ne, (std::vector<int64_t>{2048, 151936}));
    if (t.spec.name == "output.weight") EXPECT_EQ(t.spec.type, GgmlType::Q6_K);
  }
  EXPECT_EQ(n_gate, 48);
  // The "~17 GB": 48 x 128 experts of 3 x 2048 x 768 weights at 4.5-6.6 bits each, plus dense weights.
  EXPECT_GT(plan.total_bytes, 16.0e9);
  EXPECT_LT(plan.total_bytes, 19.5e9);
  EXPECT_EQ(plan.metadata.get_uint("qwen3moe.expert_used_count"), 8u);
}

TEST(SynthPlan, GptOssRowsOf2880FallBackFromKQuants) {
  const auto shape = synth::find_preset("gpt-oss-20b");
  const auto vocab = synth::make_default_vocab(1000);
  const auto k = synth::plan_model(shape, synth::parse_quant_mix("Q4_K_M"), vocab);
  const auto mx = synth::plan_model(shape, synth::parse_quant_mix("MXFP4"), vocab);
  bool saw_sinks = false;
  for (const auto& t : k.tensors) {
    EXPECT_EQ(t.spec.ne[0] % quant::traits(t.spec.type).block_size, 0) << t.spec.name;
    // llama-quantize's tensor_type_fallback (src/llama-quant.cpp): Q4_K -> Q5_0 on 2880-wide rows.
    if (t.spec.name == "blk.0.ffn_gate_exps.weight") EXPECT_EQ(t.spec.type, GgmlType::Q5_0);
    if (t.spec.name == "blk.0.ffn_down_exps.weight") EXPECT_EQ(t.spec.type, GgmlType::Q8_0);  // Q6_K -> Q8_0
    saw_sinks |= t.spec.name == "blk.3.attn_sinks.weight";
  }
  EXPECT_TRUE(saw_sinks);
  for (const auto& t : mx.tensors)
    if (t.spec.name == "blk.0.ffn_down_exps.weight") EXPECT_EQ(t.spec.type, GgmlType::MXFP4);
}

TEST(SynthPlan, UnknownMixAndPresetAreErrors) {
  EXPECT_THROW(synth::parse_quant_mix("Q9_Z"), Error);
  EXPECT_THROW(synth::parse_quant_mix("IQ2_XXS"), Error);
  EXPECT_THROW(synth::find_preset("gpt-5"), Error);
}

uint64_t file_hash(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::vector<char> b{std::istreambuf_iterator<char>(in), {}};
  return XXH3_64bits(b.data(), b.size());
}

TEST(Synth, WritesAReadableReproducibleModel) {
  const fs::path dir = test::tmp_dir("synth");
  synth::SynthOptions o;
  o.shape = synth::find_preset("tiny");
  o.shape.n_layer = 2;
  o.output = dir / "a.gguf";
  const auto r = synth::write_synthetic_model(o);
  EXPECT_EQ(r.file_bytes, fs::file_size(o.output));
  const auto m = gguf::GgufModel::open(o.output);
  EXPECT_EQ(m.architecture(), "qwen3moe");
  EXPECT_EQ(m.metadata().get_uint("qwen3moe.block_count"), 2u);
  const auto& router = m.get("blk.1.ffn_gate_inp.weight");
  EXPECT_EQ(router.type, GgmlType::F32);
  for (const auto& t : m.tensors()) {
    std::vector<float> row(static_cast<size_t>(t.ne[0]));
    quant::dequantize_row_ref(t.type, t.data, row.data(), t.ne[0]);
    for (float x : row) ASSERT_TRUE(std::isfinite(x)) << t.name;
  }
  o.output = dir / "b.gguf";
  synth::write_synthetic_model(o);
  EXPECT_EQ(file_hash(dir / "a.gguf"), file_hash(dir / "b.gguf"));
  o.seed = 2;
  o.output = dir / "c.gguf";
  synth::write_synthetic_model(o);
  EXPECT_NE(file_hash(dir / "a.gguf"), file_hash(dir / "c.gguf"));
}

TEST(Synth, RealVocabularyAndPageAlignment) {
  const fs::path dir = test::tmp_dir("synth");
  const fs::path vocab = test::shared_dir() / "tokenizer/ggml-vocab-gpt-2.gguf";
  const fs::path out = dir / "vocab.gguf";
  const auto r = test::run_cli("synth --preset tiny --layers 1 --alignment 4096 -q --vocab '" + vocab.string() +
                               "' -o '" + out.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("meaningless"), std::string::npos);
  const auto m = gguf::GgufModel::open(out);
  const auto v = gguf::GgufModel::open(vocab);
  EXPECT_EQ(m.metadata().get_string("tokenizer.ggml.pre"), v.metadata().get_string("tokenizer.ggml.pre"));
  const auto n_vocab = v.metadata().get_string_array("tokenizer.ggml.tokens").size();
  EXPECT_EQ(m.get("token_embd.weight").ne[1], static_cast<int64_t>(n_vocab));
  for (const auto& t : m.tensors()) EXPECT_EQ(t.file_offset % 4096, 0u) << t.name;
  const auto ins = test::run_cli("inspect '" + out.string() + "'");
  EXPECT_EQ(ins.exit_code, 0) << ins.output;
}

TEST(Synth, BadFlagsAreClearErrors) {
  const fs::path out = test::tmp_dir("synth") / "bad.gguf";
  auto r = test::run_cli("synth --preset nope -o '" + out.string() + "'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("qwen3-30b-a3b"), std::string::npos) << r.output;
  r = test::run_cli("synth --type Q9_9 -o '" + out.string() + "'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("Q9_9"), std::string::npos) << r.output;
  r = test::run_cli("synth --alignment 100 -o '" + out.string() + "'");
  EXPECT_EQ(r.exit_code, 1);
  r = test::run_cli("synth -o /nonexistent-dir/x.gguf");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("/nonexistent-dir/x.gguf"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace moetier
