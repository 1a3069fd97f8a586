// The composition root: one EngineConfig loads a model resident or streamed, with the architecture's defaults,
// and says why it chose what it chose; a model whose first block is dense numbers its MoE layers from 0 at its
// first MoE block, resident and streamed alike.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cli/run_cli.h"
#include "engine/context_memory.h"
#include "engine/engine.h"
#include "engine/expert_setup.h"
#include "model/eval.h"
#include "moe/expert_layout.h"
#include "quant/kernels/int8_kernels.h"
#include "test_support.h"
#include "trace/route_trace.h"
#include "util/error.h"

namespace moetier::engine {
namespace {

namespace fs = std::filesystem;

std::string oracle_model(const char* name) { return (test::oracle_dir() / "models" / name).string(); }

EngineConfig quiet(std::string model) {
  EngineConfig c;
  c.model = std::move(model);
  c.threads = 2;
  c.log = [](std::string_view) {};
  return c;
}

bool has_decision(const Engine& e, std::string_view topic, std::string_view text) {
  return std::any_of(e.decisions().begin(), e.decisions().end(), [&](const StartDecision& d) {
    return d.topic == topic && d.text.find(text) != std::string::npos;
  });
}

TEST(Engine, DefaultsComeFromTheArchitecture) {
  const auto e = load_engine(quiet(oracle_model("tiny-qwen3moe-Q4_K_M.gguf")));
  const auto& md = e->file().metadata();
  const auto trained = static_cast<int64_t>(md.get_uint_or("qwen3moe.context_length", 0));
  EXPECT_EQ(e->info().n_ctx, std::min<int64_t>(trained, model::kMaxDefaultContext));
  // The KV cache per position from the architecture: 2 x n_layer x n_head_kv x head_dim elements.
  const model::ArchSummary s = model::summarize(e->file());
  const auto n_layer = static_cast<int64_t>(md.get_uint_or("qwen3moe.block_count", 0));
  const auto n_head_kv = static_cast<int64_t>(md.get_uint_or("qwen3moe.attention.head_count_kv", 0));
  const auto head_dim = static_cast<int64_t>(md.get_uint_or("qwen3moe.attention.key_length", 0));
  EXPECT_EQ(s.kv_elements_per_position, 2 * n_layer * n_head_kv * head_dim);
  // 100 positions x (K and V) x n_layer x n_head_kv x head_dim f16 elements of 2 bytes.
  EXPECT_EQ(context_bytes(s, 100, model::KvType::f16, 1).kv,
            static_cast<uint64_t>(100 * 2 * n_layer * n_head_kv * head_dim * 2));
  EXPECT_TRUE(has_decision(*e, "experts", "resident")) << "placement decided without its reason in the log";
  EXPECT_TRUE(has_decision(*e, "model", "(the model's default)"));
  EXPECT_EQ(e->stream(), nullptr);
  EXPECT_EQ(e->dense_weights(), "mapped");
}

// A recurrent model's state counts in the memory a context needs: per sequence, whatever the context, each
// DeltaNet block's convolution window ((conv_kernel - 1) x (2 x group_count x state_size + inner_size) floats)
// and delta-rule state (inner_size x state_size floats), from the file's ssm.* metadata; the start log shows it.
TEST(Engine, CountsTheRecurrentStateOfEverySequence) {
  EngineConfig c = quiet(test::oracle_model("tiny-qwen35moe-F16").string());
  c.n_ctx = 64;
  c.n_seq = 3;
  const auto e = load_engine(c);
  const gguf::Metadata& md = e->file().metadata();
  const auto key = [&](const char* k) { return static_cast<int64_t>(md.get_uint_or(std::string("qwen35moe.") + k, 0)); };
  const int64_t n_layer = key("block_count"), interval = key("full_attention_interval");
  const int64_t kernel = key("ssm.conv_kernel"), groups = key("ssm.group_count"), state = key("ssm.state_size"),
                inner = key("ssm.inner_size");
  ASSERT_GT(n_layer * interval * kernel * groups * state * inner, 0);
  const int64_t n_recurrent = n_layer - n_layer / interval;
  const int64_t per_block = (kernel - 1) * (2 * groups * state + inner) + inner * state;
  const model::ArchSummary s = model::summarize(e->file());
  EXPECT_EQ(s.recurrent_floats_per_sequence, n_recurrent * per_block);
  EXPECT_EQ(context_bytes(s, 64, model::KvType::f16, 1, 3).recurrent,
            static_cast<uint64_t>(3 * n_recurrent * per_block * 4));
  EXPECT_EQ(context_bytes(s, 4096, model::KvType::f16, 1, 3).recurrent,
            context_bytes(s, 64, model::KvType::f16, 1, 3).recurrent);
  EXPECT_TRUE(has_decision(*e, "model", "+ recurrent state ("));
  // An attention-only model has none, and says nothing of it.
  const model::ArchSummary q = model::summarize(load_engine(quiet(oracle_model("tiny-qwen3moe-Q4_K_M.gguf")))->file());
  EXPECT_EQ(q.recurrent_floats_per_sequence, 0);
}

// Repacking (model::ModelOptions::repack, repack_experts) is the engine's choice, logged with its reason: on for
// resident experts where the CPU has the kernels (the experts too, the model fitting in RAM), the experts left out
// with --no-repack-experts, everything off with --no-repack; streamed experts repacked in their cache slots unless
// --no-repack-experts or exact activations say otherwise.
TEST(Engine, RepacksResidentModelsAndSaysWhyNot) {
  EngineConfig c = quiet(oracle_model("tiny-gptoss-Q8_0.gguf"));
  c.n_ctx = 64;
  const auto resident = load_engine(c);
  const bool kernels = quant::kernels::has_rows16_kernel(quant::GgmlType::Q8_0);
  EXPECT_TRUE(has_decision(*resident, "repack", kernels ? " Q8_0)" : "none: ")) << resident->repack();
  EXPECT_EQ(resident->repack(), resident->info().repack);
  if (kernels) {
    // its 4 MoE layers' gate, up and down stacks; a 4 MiB file fits beside its copy, so its pages stay cached
    EXPECT_TRUE(has_decision(*resident, "repack", "the routed experts' among them: 12 stacks")) << resident->repack();
    EXPECT_TRUE(has_decision(*resident, "repack", ", left to the page cache")) << resident->repack();
  }
  c.repack_experts = false;
  const auto dense_only = load_engine(c);
  EXPECT_TRUE(has_decision(*dense_only, "repack",
                           kernels ? "the routed experts stay mapped as the file stores them (--no-repack-experts)"
                                   : "none: "))
      << dense_only->repack();
  EXPECT_FALSE(has_decision(*dense_only, "repack", "among them")) << dense_only->repack();
  c.repack_experts = true;
  c.repack = false;
  EXPECT_TRUE(has_decision(*load_engine(c), "repack", "off (--no-repack)"));
  c.repack = true;
  c.placement = moe::Placement::stream;
  c.cache_mib = 1;
  const auto streamed = load_engine(c);
  // Streamed: the experts in their cache slots where the CPU has the kernels, not with --no-repack-experts.
  ASSERT_NE(streamed->stream(), nullptr);
  EXPECT_EQ(streamed->stream()->packs(), kernels);
  EXPECT_TRUE(has_decision(*streamed, "repack",
                           kernels ? "the routed experts in their cache slots" : "off: the experts stream"))
      << streamed->repack();
  c.repack_experts = false;
  const auto streamed_as_read = load_engine(c);
  EXPECT_FALSE(streamed_as_read->stream()->packs());
  EXPECT_TRUE(has_decision(*streamed_as_read, "repack", "off: the experts stream")) << streamed_as_read->repack();
  c.repack_experts = true;
  c.rounding = quant::ActivationRounding::exact;  // the float kernels read the file's layout
  EXPECT_FALSE(load_engine(c)->stream()->packs());
}

// The experts' copy is anonymous memory, which the kernel cannot page out as it does the mapping: it is made only
// where the model fits in the available memory by placement auto's test, whatever --experts says.
TEST(ExpertSetup, TheExpertsFitInRamOnlyWhereTheModelDoes) {
  const gguf::GgufModel file = gguf::GgufModel::open(oracle_model("tiny-gptoss-Q8_0.gguf"));
  const auto layout = moe::ExpertLayout::from_model(file);
  EngineConfig c = quiet(oracle_model("tiny-gptoss-Q8_0.gguf"));
  const DecisionLog log = [](const std::string&, const std::string&) {};
  ContextBytes ctx;
  ctx.kv = uint64_t{1} << 20;
  const uint64_t file_bytes = file.shards().front().file_size;
  for (const moe::Placement p : {moe::Placement::resident, moe::Placement::automatic}) {
    c.placement = p;
    const ExpertSetup roomy = setup_experts(file, layout, c, 0, ctx, uint64_t{1} << 40, log);
    EXPECT_TRUE(roomy.fits_ram);
    EXPECT_TRUE(roomy.fits_beside_file);
    // Room for the model, not for a copy of its experts beside it: the copy's file pages leave the page cache.
    const ExpertSetup fits =
        setup_experts(file, layout, c, 0, ctx, file_bytes + ctx.total() + moe::kDefaultHeadroom, log);
    EXPECT_TRUE(fits.fits_ram);
    EXPECT_FALSE(fits.fits_beside_file);
  }
  // Forced resident on a host without the room: mapped, paging as llama.cpp's mmap does, and not copied.
  c.placement = moe::Placement::resident;
  const ExpertSetup tight = setup_experts(file, layout, c, 0, ctx, file_bytes, log);
  EXPECT_EQ(tight.source, nullptr);
  EXPECT_FALSE(tight.fits_ram);
  EXPECT_FALSE(tight.fits_beside_file);
}

TEST(Engine, StreamsWhenAskedAndLogsEveryChoice) {
  EngineConfig c = quiet(oracle_model("tiny-qwen3moe-Q4_K_M.gguf"));
  c.placement = moe::Placement::stream;
  c.cache_mib = 1;
  c.cache_policy = "adaptive";
  c.n_ctx = 64;
  const auto e = load_engine(c);
  ASSERT_NE(e->stream(), nullptr);
  EXPECT_TRUE(has_decision(*e, "experts", "stream"));
  EXPECT_TRUE(has_decision(*e, "cache", "1 MiB as given"));
  EXPECT_TRUE(has_decision(*e, "adapt-tuned", ""));
  EXPECT_TRUE(has_decision(*e, "dense weights", "anon"));
  EXPECT_EQ(e->info().n_ctx, 64);
}

// Checked even when the experts stay resident (where the store would never see them): a typo is an error.
TEST(Engine, BadStreamSettingsAreErrorsEvenWhenResident) {
  EngineConfig c = quiet(oracle_model("tiny-qwen3moe-Q4_K_M.gguf"));
  c.placement = moe::Placement::resident;
  c.adapt_every = 3;
  EXPECT_THROW(load_engine(c), Error);
  c.cache_policy = "adaptive";
  c.adapt_decay = 1.5;
  EXPECT_THROW(load_engine(c), Error);
  c = quiet(oracle_model("tiny-qwen3moe-Q4_K_M.gguf"));
  c.cache_policy = "lru-ish";
  try {
    load_engine(c);
    ADD_FAILURE() << "an unknown cache policy was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lru-ish"), std::string::npos) << e.what();
  }
}

// A qwen3moe whose first block is dense (leading_dense_block_count 1): written once by `moetier synth`.
fs::path dense_first_model() {
  const fs::path dir = test::tmp_dir("engine");
  const fs::path path = dir / "tiny-dense-lead.gguf";
  if (!fs::exists(path)) {
    const fs::path part = dir / ("tiny-dense-lead.gguf.part" + std::to_string(::getpid()));
    const auto r = test::run_cli("synth --preset tiny --type Q4_K_M --layers 4 --dense-lead 1 -q -o '" +
                                 part.string() + "'");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    test::publish_once(part, path);
  }
  return path;
}

TEST(Engine, DenseFirstLayerRunsResidentAndStreamedWithIdenticalLogits) {
  const fs::path path = dense_first_model();
  const std::vector<int32_t> tokens{1, 17, 230, 41, 99, 5, 123, 77, 250, 3, 64, 12};
  EngineConfig c = quiet(path.string());
  c.n_ctx = 32;
  c.placement = moe::Placement::resident;
  const auto resident = load_engine(c);
  EXPECT_EQ(resident->info().n_layer, 4);
  EXPECT_EQ(resident->info().n_moe_layers, 3);
  EXPECT_EQ(resident->info().moe_layers, (std::vector<int64_t>{1, 2, 3}));
  const model::EvalResult a = model::evaluate(resident->model(), tokens, 6);

  c.placement = moe::Placement::stream;
  c.cache_mib = 0;  // no cache: every expert of every step read from the file
  const fs::path trace_path = test::tmp_dir("engine") / ("dense-lead-" + std::to_string(::getpid()) + ".route.csv");
  c.telemetry.route_trace = trace_path.string();
  c.telemetry.command = "eval";
  const auto streamed = load_engine(c);
  ASSERT_NE(streamed->stream(), nullptr);
  const model::EvalResult b = model::evaluate(streamed->model(), tokens, 6, streamed->hooks());
  streamed->finish();
  EXPECT_TRUE(a.logits == b.logits) << "streamed logits differ from resident ones";
  EXPECT_EQ(a.routing, b.routing);
  ASSERT_EQ(b.n_moe_layers, 3);

  // The trace is numbered by MoE ordinal: three layers, the routing of blocks 1..3.
  const trace::RouteTrace t = trace::read_route_trace(c.telemetry.route_trace);
  EXPECT_EQ(t.header.n_moe_layers, 3);
  ASSERT_EQ(t.rows.size(), b.routing.size());
  for (const auto& r : t.rows) {
    ASSERT_GE(r.layer, 0);
    ASSERT_LT(r.layer, 3);
    const auto i = static_cast<size_t>((r.step * 3 + r.layer) * b.n_expert_used + r.slot);
    EXPECT_EQ(r.expert, b.routing[i]);
  }
  // The streamed run read experts for the three MoE layers only.
  EXPECT_EQ(streamed->stream()->misses_by_moe_layer().size(), 3u);
}

}  // namespace
}  // namespace moetier::engine
