// Every numeric flag of every subcommand is parsed, never wrapped: a negative, overflowing, non-numeric, NaN or
// infinite value is an error naming the flag and the range as a person writes it; file flags given a directory
// say so; and the subcommands agree on what they take (issue 27, items 1, 4 and 5).
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "cli/run_cli.h"

namespace moetier {
namespace {

namespace fs = std::filesystem;

std::string qwen() { return (test::oracle_dir() / "models/tiny-qwen3moe-Q4_K_M.gguf").string(); }
std::string stories() { return (test::oracle_dir() / "models/stories260K.gguf").string(); }
std::string trace() { return (test::shared_dir() / "traces/bigmoeonedge-2026-07-15/qwen.route.csv").string(); }

// A directory under the build tree, for the flags that take a file.
std::string a_directory() { return test::tmp_dir("flags/a-directory").string(); }

struct Rejected {
  std::string args;                // after "moetier "
  std::vector<std::string> says;  // every one must appear in the output
};

// The command fails cleanly (no crash, no "internal error", no 309-digit range) and names what it should.
void expect_rejected(const Rejected& c) {
  SCOPED_TRACE(c.args);
  const auto r = test::run_cli(c.args);
  EXPECT_FALSE(r.signaled) << r.output;
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("internal error"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("179769313486231570814527"), std::string::npos) << r.output;  // DBL_MAX as a range
  for (const std::string& s : c.says) EXPECT_NE(r.output.find(s), std::string::npos) << "'" << s << "'\n" << r.output;
}

TEST(Flags, IntegerFlagsOfTheModelCommandsAreParsedNotWrapped) {
  const std::string run = "run -m '" + qwen() + "' -p hi -n 2 ";
  const Rejected cases[] = {
      {run + "--experts stream --cache-mb -5", {"--cache-mb", "-5 is not auto or a whole number from 0 to"}},
      {run + "--experts stream --cache-mb 17592186044416", {"--cache-mb", "17592186044416 is not auto"}},
      {run + "--experts stream --cache-mb 0x10", {"--cache-mb", "0x10 is not auto"}},
      {run + "--cache-floor-mb -5", {"--cache-floor-mb", "-5 is not a whole number from 0 to 1099511627776"}},
      {run + "--cache-ceil-mb 1e3", {"--cache-ceil-mb", "1e3 is not a whole number"}},
      {run + "-c -5", {"--ctx-size", "-5 is not a whole number ≥ 0"}},
      {run + "-c 99999999999999999999", {"--ctx-size", "99999999999999999999 is not a whole number ≥ 0"}},
      {run + "-b 0", {"--batch-size", "0 is not a whole number ≥ 1"}},
      {run + "-t 2000", {"--threads", "2000 is not a whole number from 0 to 1024"}},
      {run + "--io-threads 0", {"--io-threads", "0 is not a whole number from 1 to 64"}},
      {run + "--n-expert-used -1", {"--n-expert-used", "-1 is not a whole number ≥ 1"}},
      {run + "--cache-policy adaptive --adapt-every 99999999999", {"--adapt-every", "is not a whole number ≥ 1"}},
      {run + "--cache-policy adaptive --adapt-swaps -1", {"--adapt-swaps", "-1 is not a whole number ≥ 0"}},
      {run + "--steady-skip -1", {"--steady-skip", "-1 is not a whole number ≥ 0"}},
      {run + "--top-k -3", {"--top-k", "-3 is not a whole number ≥ 0"}},
      {run + "--repeat-last-n -1", {"--repeat-last-n", "-1 is not a whole number ≥ 0"}},
      {run + "--seed -2", {"--seed", "-2 is not random, -1 (random) or a whole number ≥ 0"}},
      {run + "--seed 18446744073709551616", {"--seed", "18446744073709551616 is not random"}},
      {"run -m '" + qwen() + "' -p hi -n -5", {"--n-predict", "-5 is not -1 (until the end) or a whole number ≥ 0"}},
      {"chat -m '" + qwen() + "' -n -2", {"--n-predict", "-2 is not -1 (until the end)"}},
      {"eval -m '" + qwen() + "' -p hi -c -5", {"--ctx-size", "-5 is not a whole number ≥ 0"}},
      {"eval -m '" + qwen() + "' -p hi --decode-from -1", {"--decode-from", "-1 is not a whole number ≥ 0"}},
  };
  for (const auto& c : cases) expect_rejected(c);
}

TEST(Flags, FloatFlagsRejectNanInfinityAndOutOfRange) {
  const std::string run = "run -m '" + qwen() + "' -p hi -n 2 ";
  const Rejected cases[] = {
      {run + "--temp nan", {"--temp", "nan is not a number ≥ 0"}},
      {run + "--temp -1", {"--temp", "-1 is not a number ≥ 0"}},
      {run + "--temp 1e39", {"--temp", "1e39 is not a number ≥ 0"}},  // finite as a double, not as a float
      {run + "--top-p nan", {"--top-p", "nan is not a number in (0, 1]"}},
      {run + "--top-p 0", {"--top-p", "0 is not a number in (0, 1]"}},
      {run + "--min-p 1", {"--min-p", "1 is not a number in [0, 1)"}},
      {run + "--repeat-penalty nan", {"--repeat-penalty", "nan is not a number > 0"}},
      {run + "--repeat-penalty inf", {"--repeat-penalty", "inf is not a number > 0"}},
      {run + "--cache-policy adaptive --adapt-decay inf", {"--adapt-decay", "inf is not a number in (0, 1]"}},
      {"chat -m '" + qwen() + "' --temp nan", {"--temp", "nan is not a number ≥ 0"}},
  };
  for (const auto& c : cases) expect_rejected(c);
}

TEST(Flags, ReplaySynthAndReportFlags) {
  const std::string replay = "replay '" + trace() + "' ";
  const std::string out = (test::tmp_dir("flags") / "synth.gguf").string();
  const std::string synth = "synth --preset tiny -q -o '" + out + "' ";
  const Rejected cases[] = {
      // Was "cache config: set exactly one of capacity_bytes (0) and capacity_entries (0)".
      {replay + "--cache-mb inf", {"--cache-mb", "inf is not a number in (0, 1099511627776]"}},
      {replay + "--cache-mb nan", {"--cache-mb", "nan is not a number in (0,"}},
      {replay + "--cache-mb 1e30", {"--cache-mb", "1e30 is not a number in (0,"}},
      {replay + "--cache-experts -5", {"--cache-experts", "-5 is not a whole number ≥ 1"}},
      {replay + "--cache-mb 100 --policy static --static-warm -5", {"--static-warm", "-5 is not a whole number ≥ 0"}},
      {replay + "--cache-mb 100 --policy adaptive --adapt-every 0", {"--adapt-every", "0 is not a whole number ≥ 1"}},
      {replay + "--cache-mb 100 --policy adaptive --adapt-decay nan", {"--adapt-decay", "nan is not a number in (0, 1]"}},
      {replay + "--cache-mb 100 --policy lfu-decay --lfu-decay 2", {"--lfu-decay", "2 is not a number in (0, 1]"}},
      {replay + "--cache-mb 100 --phase prefill", {"--phase", "prefill is not one of all, decode"}},
      // Every policy replay accepts, the simulator's belady included.
      {replay + "--cache-mb 100 --policy foo",
       {"--policy", "foo is not one of lru, lfu, lfu-decay, adaptive, adaptive-tuned, static, reuse, belady"}},
      {synth + "--seed -5", {"--seed", "-5 is not a whole number ≥ 0"}},  // was written with seed 2^64 - 5
      {synth + "--alignment -8", {"--alignment", "-8 is not a whole number from 8 to 2147483648"}},
      {synth + "--layers -1", {"--layers", "-1 is not a whole number ≥ 0"}},
      {synth + "--dense-lead 5000", {"--dense-lead", "5000 is not a whole number from 0 to 4096"}},
  };
  for (const auto& c : cases) expect_rejected(c);
}

// -c 010 is ten positions (CLI11 alone reads a leading 0 as octal: eight).
TEST(Flags, IntegersAreDecimal) {
  const auto r = test::run_cli("run -m '" + stories() + "' -c 010 -n 1 -p hi");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("context 10 tokens,"), std::string::npos) << r.output;
}

// --seed -1 asks for a random seed, as in llama.cpp (it was taken as 2^64 - 1).
TEST(Flags, SeedMinusOneIsRandom) {
  const auto r = test::run_cli("run -m '" + stories() + "' -n 2 --temp 1 --seed -1 -p hi");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("sampling: seed "), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("18446744073709551615"), std::string::npos) << r.output;
}

// A context too large for any memory is said to be so, not wrapped into a small byte count that fits.
TEST(Flags, HugeContextIsTooLargeNotWrapped) {
  expect_rejected({"eval -m '" + qwen() + "' -p hi -c 4611686018427387904", {"-c 4611686018427387904", "lower -c"}});
}

TEST(Flags, UnknownSubcommandIsNamed) {
  expect_rejected({"frob -m x", {"unknown command 'frob'", "run", "replay"}});
}

TEST(Flags, FileFlagsGivenADirectory) {
  const std::string dir = a_directory();
  const std::string run = "run -m '" + qwen() + "' -n 2 ";
  const std::string metrics = (test::tmp_dir("flags") / "metrics.csv").string();
  const Rejected cases[] = {
      {run + "-f '" + dir + "'", {"-f " + dir + ": is a directory"}},                  // was basic_filebuf::underflow
      {"eval -m '" + qwen() + "' -f '" + dir + "'", {"-f " + dir + ": is a directory"}},
      {run + "--tokens '" + dir + "'", {"--tokens " + dir + ": is a directory"}},
      {"eval -m '" + qwen() + "' --tokens '" + dir + "'", {"--tokens " + dir + ": is a directory"}},
      {"eval -m '" + qwen() + "' -p hi --kl-base '" + dir + "'", {"--kl-base", "directory"}},  // was 2^63-1 bytes
      {run + "-p hi --csv '" + dir + "'", {"--csv " + dir + ": is a directory, not a file"}},
      {run + "-p hi --route-trace '" + dir + "'", {"--route-trace " + dir + ": is a directory, not a file"}},
      {run + "-p hi --route-replay '" + dir + "'", {"--route-replay", "directory"}},
      {"replay '" + dir + "' --cache-mb 100", {"TRACE", "directory"}},
      {"replay '" + trace() + "' --cache-mb 100 --policy static --profile '" + dir + "'", {"--profile", "directory"}},
      {"report '" + dir + "' -o '" + metrics + ".html'", {"metrics", "directory"}},
      {"report '" + trace() + "' --compare '" + dir + "' -o '" + metrics + ".html'", {"--compare", "directory"}},
  };
  for (const auto& c : cases) expect_rejected(c);
  // Rejected before the model loads: no start log.
  const auto r = test::run_cli(run + "-p hi --csv '" + dir + "'");
  EXPECT_EQ(r.output.find("model: "), std::string::npos) << r.output;
}

// --tokens takes ids that fit the vocabulary and int32, in run and eval alike, inline or in a file.
TEST(Flags, TokenIdsAreCheckedNotWrapped) {
  const Rejected cases[] = {
      // 1000000000000 was wrapped to 3567587328 by get<int32_t>().
      {"eval -m '" + qwen() + "' --tokens '[1000000000000, 3]'",
       {"--tokens [1000000000000, 3]: token 0 is 1000000000000, not a token id"}},
      {"run -m '" + qwen() + "' -n 2 --tokens '[1, 2, 3000000000]'", {"token 2 is 3000000000, not a token id"}},
      {"eval -m '" + qwen() + "' --tokens '[1, 512]'", {"token 1 is 512", "vocabulary (0 to 511)"}},
      {"eval -m '" + qwen() + "' --tokens '[1, 2.5]'", {"token 1 is 2.5, not a token id"}},
      {"eval -m '" + qwen() + "' --tokens '[]'", {"--tokens []: the list of token ids is empty"}},
      {"run -m '" + qwen() + "' -n 2 --tokens '[]'", {"--tokens []: the list of token ids is empty"}},
  };
  for (const auto& c : cases) expect_rejected(c);
}

// eval takes --tokens inline as run does; a one-token input says why there is no perplexity.
TEST(Flags, EvalTakesInlineTokensAndExplainsOneToken) {
  auto r = test::run_cli("eval -m '" + qwen() + "' --tokens '[1,2,3]'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("perplexity: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("3 tokens (2 in the first batch"), std::string::npos) << r.output;
  r = test::run_cli("eval -m '" + qwen() + "' --tokens '[5]'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("perplexity: none: one token predicts no token"), std::string::npos) << r.output;
  // --decode-from keeps its meaning on an inline list.
  r = test::run_cli("eval -m '" + qwen() + "' --tokens '[1,2,3,4]' --decode-from 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("4 tokens (1 in the first batch"), std::string::npos) << r.output;
  expect_rejected({"eval -m '" + qwen() + "' --tokens '[1,2]' --decode-from 3", {"--decode-from 3 is beyond the 2"}});
}

// static pins a hot list from a profile, which only replay reads: run, chat and eval refuse it instead of a cache
// that never fills, and do not offer it.
TEST(Flags, StaticPolicyNeedsAProfile) {
  for (const std::string cmd : {"run -m '" + qwen() + "' -p hi -n 2", "eval -m '" + qwen() + "' -p hi"}) {
    expect_rejected({cmd + " --experts stream --cache-policy static", {"--cache-policy static", "replay --profile"}});
    expect_rejected({cmd + " --experts resident --cache-policy static", {"--cache-policy static"}});
  }
  const auto help = test::run_cli("run --help");
  const auto line = help.output.substr(help.output.find("--cache-policy"));
  EXPECT_EQ(line.substr(0, line.find('\n')).find("static"), std::string::npos) << line.substr(0, line.find('\n'));
}

TEST(Flags, NExpertUsedOnADenseModelSaysItHasNoEffect) {
  const auto r = test::run_cli("run -m '" + stories() + "' -p hi -n 2 --n-expert-used 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--n-expert-used 2 has no effect: the model has no routed experts"), std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("overrides the model's top-k"), std::string::npos) << r.output;
}

// stories260K's vocabulary has no ChatML markers: they would be read as plain text, and the run says so.
TEST(Flags, ChatFormatWithoutItsTokensWarns) {
  auto r = test::run_cli("run -m '" + stories() + "' -p hi -n 2 --chat --chat-format chatml");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("warning: the vocabulary has no <|im_start|> <|im_end|> tokens"), std::string::npos)
      << r.output;
  // Its own format (Mistral, by the llama architecture) needs only </s>, which it has.
  r = test::run_cli("run -m '" + stories() + "' -p hi -n 2 --chat");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("warning"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace moetier
