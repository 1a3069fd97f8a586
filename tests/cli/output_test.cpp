// Output that fails to be written is an error: every command whose standard output is a full disk (/dev/full)
// exits 1 with "writing standard output failed", and `run` stops generating at the first failed write. An
// unwritable `eval --logits-out` fails before anything is evaluated.
#include <array>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include <gtest/gtest.h>

#include "cli/run_cli.h"

namespace moetier {
namespace {

constexpr const char* kFullMessage = "moetier: error: writing standard output failed: No space left on device";

std::string qwen() { return (test::oracle_dir() / "models/tiny-qwen3moe-Q4_K_M.gguf").string(); }
std::string tmp(const std::string& name) { return (test::tmp_dir("output") / name).string(); }

// Runs moetier with its stdout on /dev/full; the result's output is its stderr.
test::CliResult run_to_full_disk(const std::string& args) { return test::run_cli(args, "2>&1 >/dev/full"); }

void expect_write_failure(const test::CliResult& r) {
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_FALSE(r.signaled) << r.output;
  EXPECT_NE(r.output.find(kFullMessage), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("internal error"), std::string::npos) << r.output;
}

// `run` to a full disk: an error, and no token is generated after the first write failed (the metrics CSV, which
// is still closed with its summary, counts the decode steps).
TEST(Output, RunToAFullDiskIsAnErrorAndStopsGenerating) {
  const auto csv = tmp("full.csv");
  const auto r = run_to_full_disk("run -m '" + qwen() + "' --temp 0 -n 128 -p 'Once upon a time' --csv '" + csv + "'");
  expect_write_failure(r);
  const std::string text = test::read_file(csv);
  EXPECT_NE(text.find("# summary "), std::string::npos) << text;
  EXPECT_NE(text.find(" decode_tokens=0 "), std::string::npos) << text;
  EXPECT_EQ(text.find(",decode,"), std::string::npos) << text;
}

TEST(Output, ChatToAFullDiskIsAnError) {
  const auto input = tmp("chat-input.txt");
  std::ofstream(input) << "Hello\nTell me a story\n";
  expect_write_failure(run_to_full_disk("chat -m '" + qwen() + "' --temp 0 -n 8 < '" + input + "'"));
}

TEST(Output, InspectAndReplayToAFullDiskAreErrors) {
  expect_write_failure(run_to_full_disk("inspect '" + qwen() + "'"));
  expect_write_failure(run_to_full_disk("inspect '" + qwen() + "' --json"));
  const auto trace = (test::shared_dir() / "traces/bigmoeonedge-2026-07-15/qwen.route.csv").string();
  expect_write_failure(run_to_full_disk("replay '" + trace + "' --cache-mb 4000"));
  expect_write_failure(run_to_full_disk("replay '" + trace + "' --cache-mb 4000 --json"));
}

TEST(Output, EvalAndHelpToAFullDiskAreErrors) {
  const auto tokens = (test::oracle_dir() / "ref/tiny-qwen3moe-Q4_K_M.p1.json").string();
  expect_write_failure(run_to_full_disk("eval -m '" + qwen() + "' --tokens '" + tokens + "'"));
  expect_write_failure(run_to_full_disk("--help"));
  expect_write_failure(run_to_full_disk("run --help"));
}

// An unwritable --logits-out (or --routing-out) fails at once, naming the flag: no model is loaded and no
// perplexity is printed.
TEST(Output, UnwritableEvalOutputFailsBeforeTheEvaluation) {
  const auto tokens = (test::oracle_dir() / "ref/tiny-qwen3moe-Q4_K_M.p1.json").string();
  for (const char* flag : {"--logits-out", "--routing-out"}) {
    SCOPED_TRACE(flag);
    const auto r = test::run_cli("eval -m '" + qwen() + "' --tokens '" + tokens + "' " + flag +
                                 " /nonexistent-dir/x.out");
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find(std::string(flag) + " /nonexistent-dir/x.out: cannot write it: No such file or directory"),
              std::string::npos)
        << r.output;
    EXPECT_EQ(r.output.find("perplexity"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("loaded in"), std::string::npos) << r.output;  // the engine's start line
  }
}

}  // namespace
}  // namespace moetier
