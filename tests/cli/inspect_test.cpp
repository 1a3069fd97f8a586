// `moetier inspect` end to end: a correct summary for every shared GGUF, a clear error for broken files.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/run_cli.h"
#include "gguf/gguf.h"
#include "gguf/raw_gguf.h"
#include "model/model_rewrite.h"
#include "quant/ggml_type.h"

namespace moetier {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::vector<fs::path> shared_gguf_files() {
  std::vector<fs::path> v;
  std::vector<fs::path> dirs{test::shared_dir() / "tokenizer"};
  for (const auto& root : test::oracle_roots()) dirs.push_back(root / "models");
  for (const auto& dir : dirs)
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".gguf") v.push_back(e.path());
  std::sort(v.begin(), v.end());
  return v;
}

// A stacked expert tensor (weights, gpt-oss's biases); Gemma 4's ffn_down_exps.scale is one number per expert, kept
// with the router as a dense tensor.
bool is_expert_tensor(const std::string& name) {
  return name.find("_exps.") != std::string::npos && !name.ends_with(".scale");
}

// The summary is checked against numbers computed here from the reader's tensor list, independently of the
// inspect code's own bookkeeping.
TEST(Inspect, SummarisesEverySharedModel) {
  const auto files = shared_gguf_files();
  ASSERT_GE(files.size(), 20u);
  for (const auto& f : files) {
    SCOPED_TRACE(f.string());
    const auto r = test::run_cli("inspect --json '" + f.string() + "'");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const json j = json::parse(r.output);
    const auto model = gguf::GgufModel::open(f);
    EXPECT_EQ(j["tensors"]["count"].get<size_t>(), model.tensors().size());
    uint64_t all = 0, experts = 0, n_exp_tensors = 0;
    for (const auto& t : model.tensors()) {
      all += t.n_bytes;
      if (is_expert_tensor(t.name)) {
        experts += t.n_bytes;
        ++n_exp_tensors;
      }
    }
    EXPECT_EQ(j["tensors"]["routed_experts"]["bytes"].get<uint64_t>(), experts);
    EXPECT_EQ(j["tensors"]["routed_experts"]["count"].get<uint64_t>(), n_exp_tensors);
    EXPECT_EQ(j["tensors"]["dense"]["bytes"].get<uint64_t>() + experts, all);
    {
      // Weights one decode token reads: every dense tensor but token_embd (a row lookup) unless it doubles as the
      // output matrix, plus n_expert_used experts of every MoE layer.
      const std::string a = model.metadata().get_string_or("general.architecture", "");
      const uint64_t k = a.empty() ? 0 : model.metadata().get_uint_or(a + ".expert_used_count", 0);
      uint64_t embd = 0, expert_read = 0;
      bool has_output = false;
      std::map<std::string, uint64_t> expert_by_type, dense_by_type;
      for (const auto& t : model.tensors()) {
        if (t.name == "token_embd.weight") embd = t.n_bytes;
        if (t.name == "output.weight") has_output = true;
        const std::string type(quant::type_name(t.type));
        if (is_expert_tensor(t.name)) {
          expert_read += k * (t.n_bytes / static_cast<uint64_t>(t.ne[t.n_dims - 1]));
          expert_by_type[type] += k * (t.n_bytes / static_cast<uint64_t>(t.ne[t.n_dims - 1]));
        } else {
          dense_by_type[type] += t.n_bytes;
        }
      }
      if (has_output && embd > 0) dense_by_type[std::string(quant::type_name(model.find("token_embd.weight")->type))] -= embd;
      const uint64_t dense_read = all - experts - (has_output ? embd : 0);
      const auto& rd = j["decode_read_per_token"];
      EXPECT_EQ(rd["n_expert_used"].get<uint64_t>(), k);
      EXPECT_EQ(rd["expert_bytes"].get<uint64_t>(), expert_read);
      EXPECT_EQ(rd["dense_bytes"].get<uint64_t>(), dense_read);
      EXPECT_EQ(rd["bytes"].get<uint64_t>(), dense_read + expert_read);
      EXPECT_EQ(rd["token_embd_bytes"].get<uint64_t>(), embd);
      EXPECT_EQ(rd["token_embd_is_output"].get<bool>(), !has_output && embd > 0);
      EXPECT_EQ(rd["token_embd_type"].get<std::string>(),
                embd > 0 ? std::string(quant::type_name(model.find("token_embd.weight")->type)) : std::string());
      // The same bytes by weight type: every type read, each with its dense and expert bytes.
      uint64_t by_type_sum = 0;
      for (const auto& [type, b] : rd["by_type"].items()) {
        by_type_sum += b.get<uint64_t>();
        EXPECT_EQ(b.get<uint64_t>(), dense_by_type[type] + expert_by_type[type]) << type;
      }
      EXPECT_EQ(by_type_sum, dense_read + expert_read);
      // A DeltaNet layer's state, from its tensors' shapes: the convolution window (kernel - 1 positions of
      // ssm_conv1d's channels) and n_v_heads matrices of head_v_dim x head_k_dim (ssm_a: one value per v head).
      uint64_t state_floats = 0;
      for (const auto& t : model.tensors()) {
        if (!t.name.ends_with(".ssm_conv1d.weight")) continue;
        const std::string blk = t.name.substr(0, t.name.size() - std::string("ssm_conv1d.weight").size());
        const uint64_t n_v = static_cast<uint64_t>(model.get(blk + "ssm_a").ne[0]);
        const uint64_t head_k = model.metadata().get_uint(a + ".ssm.state_size");
        const uint64_t head_v = model.metadata().get_uint(a + ".ssm.inner_size") / n_v;
        state_floats += static_cast<uint64_t>((t.ne[0] - 1) * t.ne[1]) + n_v * head_v * head_k;
      }
      EXPECT_EQ(rd["recurrent_state_bytes"].get<uint64_t>(), state_floats * sizeof(float));
      if (a == "qwen35moe") EXPECT_GT(state_floats, 0u);
    }
    const auto& md = model.metadata();
    if (md.has("tokenizer.ggml.tokens"))
      EXPECT_EQ(j["tokenizer"]["n_vocab"].get<size_t>(), md.get_string_array("tokenizer.ggml.tokens").size());
    const std::string arch = md.get_string_or("general.architecture", "");
    EXPECT_EQ(j["architecture"].get<std::string>(), arch);
    if (arch.empty()) continue;
    EXPECT_EQ(j["hyperparameters"]["block_count"].get<uint64_t>(), md.get_uint(arch + ".block_count"));
    if (md.get_uint_or(arch + ".expert_count", 0) == 0 || model.tensors().empty()) {
      EXPECT_TRUE(j["moe_layers"].empty());
      continue;
    }
    const uint64_t n_layer = md.get_uint(arch + ".block_count");
    const uint64_t n_expert = md.get_uint(arch + ".expert_count");
    ASSERT_EQ(j["moe_layers"].size(), n_layer);
    uint64_t aligned = 0, slices = 0;
    for (uint64_t l = 0; l < n_layer; ++l) {
      const auto& jl = j["moe_layers"][l];
      EXPECT_EQ(jl["n_expert"].get<uint64_t>(), n_expert);
      uint64_t one = 0;
      for (const auto& t : model.tensors())
        if (t.name.rfind("blk." + std::to_string(l) + ".", 0) == 0 && is_expert_tensor(t.name)) {
          one += t.n_bytes / n_expert;
          for (uint64_t e = 0; e < n_expert; ++e, ++slices)
            aligned += (t.file_offset + e * (t.n_bytes / n_expert)) % 4096 == 0;
        }
      EXPECT_EQ(jl["expert_bytes"].get<uint64_t>(), one) << "layer " << l;
    }
    EXPECT_EQ(j["expert_slices"]["total"].get<uint64_t>(), slices);
    EXPECT_EQ(j["expert_slices"]["aligned_4096"].get<uint64_t>(), aligned);
    const auto& first = j["first_experts"][1];  // expert 1 of the first layer
    // The first expert tensor: gate, or gate and up merged (Gemma 4).
    const auto& gate = model.find("blk.0.ffn_gate_exps.weight") != nullptr ? model.get("blk.0.ffn_gate_exps.weight")
                                                                            : model.get("blk.0.ffn_gate_up_exps.weight");
    EXPECT_EQ(first["slices"][0]["offset"].get<uint64_t>(), gate.file_offset + gate.n_bytes / n_expert);
  }
}

TEST(Inspect, TextSummaryNamesArchitectureAndExperts) {
  const auto r = test::run_cli("inspect '" + (test::oracle_dir() / "models/tiny-qwen3moe-Q4_K_M.gguf").string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("architecture: qwen3moe"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("routed experts"), std::string::npos);
  EXPECT_NE(r.output.find("Q4_K"), std::string::npos);
  EXPECT_NE(r.output.find("4096-byte boundary"), std::string::npos);
  EXPECT_NE(r.output.find("per decode token: "), std::string::npos) << r.output;
}

// Gemma 4's merged gate/up experts and per-layer arrays, Qwen3.5's shared expert: shown for what they are.
TEST(Inspect, MergedGateUpSharedExpertAndPerLayerArrays) {
  const fs::path incoming = test::oracle_dir() / "incoming";
  auto r = test::run_cli("inspect '" + (incoming / "gemma4/models/tiny-gemma4-Q4_K_M.gguf").string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("(gate and up merged: each expert's gate rows, then its up rows)"), std::string::npos)
      << r.output;
  const auto gemma = gguf::GgufModel::open(incoming / "gemma4/models/tiny-gemma4-Q4_K_M.gguf");
  std::string kv = "[";
  for (const auto& e : gemma.metadata().get("gemma4.attention.head_count_kv").as_array())
    kv += (kv.size() > 1 ? "," : "") + std::to_string(e.as_uint());
  EXPECT_NE(r.output.find("attention.head_count_kv                  " + kv + "]"), std::string::npos) << r.output;
  r = test::run_cli("inspect '" + (incoming / "qwen35moe/models/tiny-qwen35moe-Q4_K_M.gguf").string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("shared expert (layer 0): ffn_gate_inp_shexp.weight, ffn_gate_shexp.weight, "
                          "ffn_up_shexp.weight, ffn_down_shexp.weight (dense: always resident"),
            std::string::npos)
      << r.output;
}

class InspectBadFile : public ::testing::Test {
 protected:
  fs::path dir = test::tmp_dir("inspect_bad");
  std::vector<char> model_bytes() {
    std::ifstream in(test::oracle_dir() / "models/tiny-qwen3moe-Q4_K_M.gguf", std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }
  fs::path write(const std::string& name, const std::vector<char>& bytes, size_t n) {
    const fs::path p = dir / name;
    std::ofstream(p, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(n));
    return p;
  }
  // Non-zero exit, no crash, and a message that names the problem.
  void expect_clean_error(const fs::path& p, const std::vector<std::string>& words) {
    for (const char* json_flag : {"", " --json"}) {
      const auto r = test::run_cli("inspect '" + p.string() + "'" + json_flag);
      EXPECT_FALSE(r.signaled) << r.output;
      EXPECT_EQ(r.exit_code, 1) << r.output;
      EXPECT_NE(r.output.find("error"), std::string::npos) << r.output;
      EXPECT_NE(r.output.find(p.filename().string()), std::string::npos) << "message should name the file: " << r.output;
      for (const auto& w : words) EXPECT_NE(r.output.find(w), std::string::npos) << "missing '" << w << "': " << r.output;
    }
  }
};

TEST_F(InspectBadFile, Truncated) {
  const auto b = model_bytes();
  for (size_t n : {size_t{0}, size_t{3}, size_t{20}, size_t{200}, size_t{4000}}) {
    SCOPED_TRACE(n);
    expect_clean_error(write("truncated-" + std::to_string(n) + ".gguf", b, n), {});
  }
}

TEST_F(InspectBadFile, BadMagic) {
  auto b = model_bytes();
  b[0] = 'X';
  expect_clean_error(write("bad-magic.gguf", b, b.size()), {"magic"});
}

TEST_F(InspectBadFile, TensorDataPastTheEnd) {
  const auto b = model_bytes();
  expect_clean_error(write("short-data.gguf", b, b.size() - 100), {"output.weight"});
}

TEST_F(InspectBadFile, UnknownTensorType) {
  gguf::test_raw::RawGguf g;
  g.header(1, 1).kv_string("general.architecture", "llama").tensor("blk.0.mystery.weight", {32}, 99, 0).pad().zeros(64);
  const fs::path p = dir / "unknown-type.gguf";
  g.write(p);
  expect_clean_error(p, {"blk.0.mystery.weight", "99"});
}

TEST_F(InspectBadFile, MissingFile) {
  expect_clean_error(dir / "does-not-exist.gguf", {});
}

// A file whose hyperparameters do not load (here the recurrent model's DeltaNet state size is missing) is still
// described: only the recurrent state, which needs them, is left unsized, with the reason.
TEST(Inspect, DescribesAFileWhoseHyperparametersDoNotLoad) {
  const fs::path p = test::rewrite_model(test::oracle_model("tiny-qwen35moe-Q4_K_M"), "inspect_hparams",
                                         "no-state-size.gguf",
                                         [](gguf::Metadata& md) { md.erase("qwen35moe.ssm.state_size"); });
  auto r = test::run_cli("inspect --json '" + p.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json j = json::parse(r.output);
  const auto& rd = j["decode_read_per_token"];
  EXPECT_TRUE(rd["recurrent_state_bytes"].is_null()) << rd.dump();
  EXPECT_NE(rd["recurrent_state_error"].get<std::string>().find("ssm.state_size"), std::string::npos) << rd.dump();
  EXPECT_GT(rd["bytes"].get<uint64_t>(), 0u);
  r = test::run_cli("inspect '" + p.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("recurrent state not sized"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace moetier
