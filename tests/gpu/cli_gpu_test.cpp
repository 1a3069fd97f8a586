// `moetier run` with -ngl / --n-cpu-moe / --device end to end on lavapipe, under the validation layer: the text
// is the CPU run's, the start log says what lives where, and bad placement values are refused naming the flag.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/run_cli.h"
#include "test_support.h"

namespace moetier {
namespace {

std::string tiny_qwen3moe() { return (test::oracle_dir() / "models/tiny-qwen3moe-Q4_K_M.gguf").string(); }

const std::string kRun = "run -m '" + tiny_qwen3moe() + "' --temp 0 -n 24 -p 'Once upon a time'";
const std::string kValidated = "MOETIER_VULKAN_VALIDATION=1 ";

TEST(CliGpu, AllLayersOnTheGpuPrintTheCpuText) {
  const auto cpu = test::run_cli(kRun, "2>/dev/null");
  ASSERT_EQ(cpu.exit_code, 0) << cpu.output;
  const auto gpu = test::run_shell(kValidated + test::cli_path() + " " + kRun + " -ngl 99 2>/dev/null");
  ASSERT_EQ(gpu.exit_code, 0) << gpu.output;
  // stdout: the text, then the summary (whose timings differ) from its "prefill:" line.
  const auto text = [](const std::string& out) { return out.substr(0, out.find("\nprefill: ")); };
  ASSERT_NE(cpu.output.find("\nprefill: "), std::string::npos) << cpu.output;
  EXPECT_EQ(text(cpu.output), text(gpu.output));
  const auto log = test::run_shell(kValidated + test::cli_path() + " " + kRun + " -ngl 99 2>&1 >/dev/null");
  ASSERT_EQ(log.exit_code, 0) << log.output;
  EXPECT_NE(log.output.find("gpu: device 0 "), std::string::npos) << log.output;
  EXPECT_NE(log.output.find("blocks 0..3 of 4 and the output head; the routed experts of blocks 0..3"),
            std::string::npos)
      << log.output;
  EXPECT_NE(log.output.find("the whole step on the GPU"), std::string::npos) << log.output;
  EXPECT_EQ(log.output.find("vulkan validation"), std::string::npos) << log.output;
  // The summary counts the GPU's work: with every block on the GPU each step submits and dispatches.
  unsigned long long submissions = 0, dispatches = 0;
  const size_t at = gpu.output.find("gpu: ");
  ASSERT_NE(at, std::string::npos) << gpu.output;
  ASSERT_EQ(std::sscanf(gpu.output.c_str() + at, "gpu: %llu submissions, %llu dispatches", &submissions, &dispatches),
            2)
      << gpu.output;
  EXPECT_GT(submissions, 24u);  // at least one per step
  EXPECT_GT(dispatches, submissions);
  EXPECT_EQ(cpu.output.find("dispatches since load"), std::string::npos) << cpu.output;
}

TEST(CliGpu, HybridSplitSaysWhereTheExpertsAre) {
  const auto r = test::run_shell(kValidated + test::cli_path() + " " + kRun + " -ngl=99 --n-cpu-moe 2 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("the routed experts of blocks 2..3 (--n-cpu-moe 2 keeps those of blocks below 2 on the "
                          "CPU)"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("vulkan validation"), std::string::npos) << r.output;
}

TEST(CliGpu, PartialOffloadCountsFromTheLastBlock) {
  const auto r = test::run_cli(kRun + " --n-gpu-layers 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("block 3 of 4; the routed experts of block 3"), std::string::npos) << r.output;
  // The last block runs on the GPU step; the blocks before it and the output head stay on the CPU.
  EXPECT_NE(r.output.find("the step on the GPU from block 3 (blocks below 3 on the CPU), the output head on the CPU"),
            std::string::npos)
      << r.output;
}

// MOETIER_GPU_PROFILE=1: the step's GPU time per kernel, whose rows add up to the GPU's busy time.
TEST(CliGpu, ProfileChargesTheGpuTimeToTheStepsKernels) {
  const auto r = test::run_shell("MOETIER_GPU_PROFILE=1 " + test::cli_path() + " " + kRun + " -ngl 99 2>&1 >/dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  unsigned long long submissions = 0;
  double record = 0, done = 0, busy = 0;
  const size_t at = r.output.find("gpu profile: ");
  ASSERT_NE(at, std::string::npos) << r.output;
  ASSERT_EQ(std::sscanf(r.output.c_str() + at,
                        "gpu profile: %llu submissions; host recording %lf ms, submit to done %lf ms, GPU busy %lf ms",
                        &submissions, &record, &done, &busy),
            4)
      << r.output;
  EXPECT_GT(submissions, 24u);  // one per step at least
  EXPECT_GT(busy, 0.0);
  EXPECT_GE(done, busy * 0.99) << "the host waited less than the GPU worked";
  // The rows: name (one or two words), count, total ms, share, mean us; their totals are the busy time.
  double sum = 0;
  for (const char* op : {"attention", "rms_norm", "grouped Q4_K", "rope", "kv_store", "combine", "upload"}) {
    const size_t row = r.output.find(std::string("gpu profile:   ") + op + " ");
    EXPECT_NE(row, std::string::npos) << op << "\n" << r.output;
  }
  size_t pos = r.output.find("mean us\n");
  ASSERT_NE(pos, std::string::npos) << r.output;
  std::istringstream rows(r.output.substr(pos + 8));
  for (std::string line; std::getline(rows, line) && line.starts_with("gpu profile:   ");) {
    std::istringstream f(line.substr(15));
    std::vector<std::string> w{std::istream_iterator<std::string>(f), {}};
    ASSERT_GE(w.size(), 5u) << line;
    sum += std::stod(w[w.size() - 3]);
  }
  EXPECT_NEAR(sum, busy, busy * 0.01 + 0.1) << r.output;
}

// The VRAM tier end to end: a run with --experts-vram logs its slots, writes the vram_* columns and records its
// routing; `moetier replay --tier vram` over that trace with the same slots counts what the run counted (the
// issue asks for misses within 3%; the same SlotTier over the same batches gives them exactly).
TEST(CliGpu, VramTierRunAndItsReplayCountTheSameMisses) {
  const auto dir = test::tmp_dir("cli_gpu_vram_tier");
  const std::string csv = (dir / "m.csv").string(), trace = (dir / "r.trace").string();
  const auto r = test::run_shell(kValidated + test::cli_path() + " run -m '" + tiny_qwen3moe() +
                                 "' --temp 0 -n 48 -p 'Once upon a time there was a tier' -ngl 99 --experts-vram 1 "
                                 "--adapt-every 1 --csv '" + csv + "' --route-trace '" + trace + "' 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("experts: 7 VRAM slots (11% of 64) of 0.12 MiB and 1 staging slots for the PCIe share"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("vram tier: hit rate"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("vulkan validation"), std::string::npos) << r.output;
  std::ifstream in(csv);
  std::string line, summary;
  while (std::getline(in, line)) {
    if (line.rfind("# summary ", 0) == 0) summary = line;
  }
  const auto field = [&](const std::string& key) {
    const size_t at = summary.find(" " + key + "=");
    EXPECT_NE(at, std::string::npos) << key << " in " << summary;
    return at == std::string::npos ? -1.0 : std::stod(summary.substr(at + key.size() + 2));
  };
  // A miss is computed by the CPU or crosses PCIe for its layer: to the tier's book both are misses.
  const double hits = field("vram_hits"), fills = field("vram_fills"), cpu = field("vram_cpu") + field("vram_pcie");
  EXPECT_GT(cpu, 0);
  const auto rep = test::run_cli("replay '" + trace + "' --tier vram --cache-experts 7 --adapt-every 1 --json");
  ASSERT_EQ(rep.exit_code, 0) << rep.output;
  const nlohmann::json j = nlohmann::json::parse(rep.output);
  const double rep_hits = j["prefill"]["hits"].get<double>() + j["decode"]["hits"].get<double>();
  const double rep_misses = j["prefill"]["fills"].get<double>() + j["decode"]["fills"].get<double>() +
                            j["prefill"]["cpu"].get<double>() + j["decode"]["cpu"].get<double>();
  EXPECT_LE(std::abs(rep_misses - (fills + cpu)), 0.03 * (fills + cpu)) << rep.output << "\n" << summary;
  EXPECT_LE(std::abs(rep_hits - hits), 0.03 * (fills + cpu)) << rep.output << "\n" << summary;
  const auto policy = test::run_cli("replay '" + trace + "' --tier vram --cache-experts 7 --policy lru");
  EXPECT_EQ(policy.exit_code, 1) << policy.output;
  EXPECT_NE(policy.output.find("--policy does not apply to --tier vram"), std::string::npos) << policy.output;
}

TEST(CliGpu, VramTierValuesAreRefused) {
  const auto no_ngl = test::run_cli(kRun + " --experts-vram 64");
  EXPECT_EQ(no_ngl.exit_code, 1) << no_ngl.output;
  EXPECT_NE(no_ngl.output.find("--experts-vram needs the step on the GPU: add -ngl 99"), std::string::npos)
      << no_ngl.output;
  const auto bad = test::run_cli(kRun + " -ngl 99 --experts-vram lots");
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_NE(bad.output.find("--experts-vram lots is not off, auto, a percentage (30%) or"), std::string::npos)
      << bad.output;
  const auto pct = test::run_cli(kRun + " -ngl 99 --experts-vram 120%");
  EXPECT_EQ(pct.exit_code, 1) << pct.output;
  EXPECT_NE(pct.output.find("--experts-vram 120% is not a percentage in (0, 100]"), std::string::npos) << pct.output;
  const auto share = test::run_cli(kRun + " -ngl 99 --experts-vram 25%");
  EXPECT_EQ(share.exit_code, 0) << share.output;
  EXPECT_NE(share.output.find("experts: 16 VRAM slots (25% of 64) of 0.12 MiB and 2 staging slots"),
            std::string::npos)
      << share.output;
  const auto stream = test::run_cli(kRun + " -ngl 99 --experts-vram 1 --experts stream");
  EXPECT_EQ(stream.exit_code, 1) << stream.output;
  EXPECT_NE(stream.output.find("--experts stream"), std::string::npos) << stream.output;
}

TEST(CliGpu, BadPlacementValuesAreRefused) {
  const auto dev = test::run_cli(kRun + " -ngl 99 --device 7");
  EXPECT_EQ(dev.exit_code, 1) << dev.output;
  EXPECT_NE(dev.output.find("--device 7 is out of range"), std::string::npos) << dev.output;
  const auto neg = test::run_cli(kRun + " -ngl -1");
  EXPECT_GT(neg.exit_code, 100) << neg.output;
  EXPECT_NE(neg.output.find("--n-gpu-layers"), std::string::npos) << neg.output;
  const auto no_ngl = test::run_cli(kRun + " --n-cpu-moe 2");
  EXPECT_EQ(no_ngl.exit_code, 0) << no_ngl.output;
  EXPECT_NE(no_ngl.output.find("--n-cpu-moe has no effect without -ngl"), std::string::npos) << no_ngl.output;
}

}  // namespace
}  // namespace moetier
