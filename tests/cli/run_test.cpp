// `moetier run` and `chat` end to end on the shared models.
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "cli/run_cli.h"
#include "quant/kernels/int8_kernels.h"
#include "util/json_file.h"

namespace moetier {
namespace {

std::string stories() { return (test::oracle_dir() / "models/stories260K.gguf").string(); }

// Greedy generation through the CLI prints the prompt followed by the reference engine's greedy text.
TEST(Run, GreedyReproducesTheReferenceText) {
  const auto j = util::read_json_lenient(test::oracle_dir() / "ref/stories260K.p1.json");
  const auto prompt = j["prompt"].get<std::string>();
  const auto n = j["greedy_tokens"].size();
  const auto r = test::run_cli("run -m '" + stories() + "' --temp 0 -n " + std::to_string(n) + " -p '" + prompt + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(prompt + j["greedy_text"].get<std::string>()), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("decode: 31 tokens"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("tok/s"), std::string::npos);
}

// --no-repack-experts keeps the resident routed experts as the file stores them, and the start log says so; the
// text is the same as with them repacked (the same bits).
TEST(Run, NoRepackExpertsKeepsTheFileLayoutAndTheText) {
  const std::string m = (test::oracle_dir() / "models/tiny-qwen3moe-Q8_0.gguf").string();
  const std::string cmd = "run -m '" + m + "' --temp 0 -n 12 -p 'Once upon a time' --experts resident";
  const auto repacked = test::run_cli(cmd);
  const auto mapped = test::run_cli(cmd + " --no-repack-experts");
  ASSERT_EQ(repacked.exit_code, 0) << repacked.output;
  ASSERT_EQ(mapped.exit_code, 0) << mapped.output;
  const bool kernels = quant::kernels::has_rows16_kernel(quant::GgmlType::Q8_0);
  EXPECT_NE(repacked.output.find(kernels ? "the routed experts' among them: " : "repack: none: "), std::string::npos)
      << repacked.output;
  EXPECT_NE(mapped.output.find(kernels ? "the routed experts stay mapped as the file stores them (--no-repack-experts)"
                                       : "repack: none: "),
            std::string::npos)
      << mapped.output;
  // The prompt and its continuation: from the prompt's echo to the summary.
  const auto text = [](const std::string& out) {
    const size_t end = out.find("\nprefill: ");
    const size_t begin = out.rfind("Once upon a time", end);
    return end == std::string::npos || begin == std::string::npos ? std::string() : out.substr(begin, end - begin);
  };
  EXPECT_FALSE(text(repacked.output).empty()) << repacked.output;
  EXPECT_EQ(text(repacked.output), text(mapped.output));
}

// --tokens runs a prompt given as token ids as it is: the oracle case's prompt_tokens give its greedy text, and so
// does the same list as a plain JSON list, in a file or inline; the prefill is exactly that many tokens.
TEST(Run, PromptAsTokenIds) {
  const auto case_file = test::oracle_dir() / "ref/stories260K.p1.json";
  const auto j = util::read_json_lenient(case_file);
  const auto n_prompt = j["prompt_tokens"].size();
  const auto n = std::to_string(j["greedy_tokens"].size());
  const auto list = test::tmp_dir("run") / "prompt-ids.json";
  std::ofstream(list) << j["prompt_tokens"].dump();
  for (const std::string& arg : {case_file.string(), list.string(), j["prompt_tokens"].dump()}) {
    SCOPED_TRACE(arg);
    const auto r = test::run_cli("run -m '" + stories() + "' --temp 0 -n " + n + " --tokens '" + arg + "'");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find(j["greedy_text"].get<std::string>()), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("prefill: " + std::to_string(n_prompt) + " tokens"), std::string::npos) << r.output;
  }
  const auto bad = test::tmp_dir("run") / "bad-ids.json";
  std::ofstream(bad) << "[1, 2, 100000]";
  auto r = test::run_cli("run -m '" + stories() + "' -n 2 --tokens '" + bad.string() + "'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("--tokens"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("100000"), std::string::npos) << r.output;
  std::ofstream(bad) << "{\"ids\": [1, 2]}";
  r = test::run_cli("run -m '" + stories() + "' -n 2 --tokens '" + bad.string() + "'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("not a JSON list"), std::string::npos) << r.output;
  for (const std::string& arg : {std::string("[1, 2"), (test::tmp_dir("run") / "no-such-ids.json").string()}) {
    r = test::run_cli("run -m '" + stories() + "' -n 2 --tokens '" + arg + "'");
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find("--tokens " + arg + ":"), std::string::npos) << r.output;
  }
  r = test::run_cli("run -m '" + stories() + "' -n 2 -p hi --tokens '" + list.string() + "'");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_FALSE(r.signaled);
}

TEST(Run, SameSeedSameText) {
  const std::string cmd = "run -m '" + stories() + "' -p 'Once upon a time' -n 48 --temp 1.0 ";
  const auto a = test::run_cli(cmd + "--seed 7");
  const auto b = test::run_cli(cmd + "--seed 7");
  const auto c = test::run_cli(cmd + "--seed 8");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  auto text = [](const std::string& out) { return out.substr(0, out.find("prefill:")); };
  auto body = [&](const std::string& out) {  // drop the timing line, which differs run to run
    const auto t = text(out);
    return t.substr(t.find("Once upon a time"));
  };
  EXPECT_EQ(body(a.output), body(b.output));
  EXPECT_NE(body(a.output), body(c.output));
}

TEST(Run, PromptLongerThanContextIsAnError) {
  std::string long_prompt;
  for (int i = 0; i < 100; ++i) long_prompt += "Once upon a time ";
  const auto r = test::run_cli("run -m '" + stories() + "' -c 64 -n 4 -p '" + long_prompt + "'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("context"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("-c"), std::string::npos) << r.output;
}

TEST(Run, GenerationStopsAtAFullContext) {
  const auto r = test::run_cli("run -m '" + stories() + "' -c 24 -n 100 --temp 0 -p 'Once upon a time'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("context full at 24 tokens"), std::string::npos) << r.output;
}

// The start log states the memory that grows with -c: the KV cache, and the attention's score rows, which grow
// with the threads too (n_ctx x n_head / n_head_kv floats per thread; stories260K has 8 query heads per 4 KV heads:
// 100000 x 2 x 4 bytes = 0.76 MiB per thread).
TEST(Run, StartLogCountsTheAttentionScoresPerThread) {
  for (const auto& [threads, mib] : {std::pair{1, "0.8"}, std::pair{3, "2.3"}}) {
    const auto r = test::run_cli("run -m '" + stories() + "' -c 100000 -n 1 -p hi -t " + std::to_string(threads));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find(std::string("+ attention scores (") + mib + " MiB)"), std::string::npos) << r.output;
  }
}

TEST(Run, InvalidUtf8PromptDoesNotCrash) {
  const auto f = test::tmp_dir("run") / "bad-utf8.txt";
  std::ofstream(f, std::ios::binary) << "\xff\xfe bad \xc3";
  const auto r = test::run_cli("run -m '" + stories() + "' -n 4 -f '" + f.string() + "'");
  EXPECT_FALSE(r.signaled);
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST(Run, UnsupportedArchitectureListsTheSupportedOnes) {
  const auto vocab = (test::shared_dir() / "tokenizer/qwen3-vocab.gguf").string();
  const auto r = test::run_cli("run -m '" + vocab + "' -p hi");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("qwen2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("qwen3moe"), std::string::npos) << r.output;
}

TEST(Run, BadFlagsAreClearErrors) {
  // Rejected as the command line is parsed: CLI11's status, above 100 (main.cpp).
  auto r = test::run_cli("run -m '" + stories() + "' -p hi --top-p 2");
  EXPECT_GT(r.exit_code, 100);
  EXPECT_NE(r.output.find("--top-p"), std::string::npos) << r.output;
  r = test::run_cli("run -m '" + stories() + "' -p hi --seed banana");
  EXPECT_GT(r.exit_code, 100);
  EXPECT_NE(r.output.find("--seed"), std::string::npos) << r.output;
  r = test::run_cli("run -m '" + stories() + "' -p hi --chat --chat-format klingon");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("chatml"), std::string::npos) << r.output;
  r = test::run_cli("run -m '" + stories() + "' -p hi --no-such-flag");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_FALSE(r.signaled);
}

TEST(Run, ChatWrapsThePromptAndNamesTheFormat) {
  const auto m = (test::oracle_dir() / "models/tiny-qwen3moe-Q4_K_M.gguf").string();
  const auto r = test::run_cli("run -m '" + m + "' --chat --no-think -n 8 -p 'Hello there'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("chat format: chatml (no think)"), std::string::npos) << r.output;
}

TEST(Chat, KeepsTheContextAcrossTurns) {
  const auto m = (test::oracle_dir() / "models/tiny-gptoss-MXFP4.gguf").string();
  const auto f = test::tmp_dir("run") / "chat-input.txt";
  std::ofstream(f) << "Hello\nTell me a story\n";
  const auto r = test::run_cli("chat -m '" + m + "' -n 6 --temp 0 < '" + f.string() + "'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("chat format: harmony"), std::string::npos) << r.output;
  // Two turns of 6 generated tokens each: the second turn's prefill follows the first's reply in one context.
  EXPECT_NE(r.output.find("decode: 12 tokens"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace moetier

namespace moetier {
namespace {

// Streaming changes how weights arrive, never the math: the greedy text is the resident run's, whatever the
// cache, lanes, overlap, direct I/O, dense-weights policy or next-layer prefetch.
TEST(RunStreaming, SameTextAsResident) {
  const auto m = (test::oracle_dir() / "models/tiny-qwen3moe-Q4_K_M.gguf").string();
  const std::string base = "run -m '" + m + "' -p 'Once upon a time' -n 24 --temp 0 ";
  auto text = [](const std::string& out) {
    const auto b = out.find("Once upon a time");
    return out.substr(b, out.find("prefill:") - b);
  };
  const auto resident = test::run_cli(base + "--experts resident");
  ASSERT_EQ(resident.exit_code, 0) << resident.output;
  for (const std::string flags :
       {"--cache-mb 64", "--cache-mb 0", "--cache-mb 1 --io-threads 1 --no-overlap",
        "--cache-mb 2 --no-odirect --dense-weights mmap", "--cache-mb 2 --dense-weights warm --io-engine io_uring",
        "--cache-mb 1 --expert-prefetch next"}) {
    SCOPED_TRACE(flags);
    const auto r = test::run_cli(base + "--experts stream " + flags);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(text(r.output), text(resident.output));
    EXPECT_NE(r.output.find("experts: stream"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("hit rate"), std::string::npos) << r.output;
  }
}

// A streamed run keeps a heat profile (--heat FILE); the next run of the model warm-starts its expert cache from
// it before the first token (--cache-warm auto), with the same text and more hits. A profile of another model,
// or a --heat that is a directory, is an error naming the flag.
TEST(RunStreaming, HeatProfileWarmStartsTheNextRun) {
  const auto dir = test::tmp_dir("cli_heat");
  const auto heat = (dir / "tiny.json").string();
  std::filesystem::remove(heat);
  const auto m = (test::oracle_dir() / "models/tiny-qwen3moe-Q4_K_M.gguf").string();
  const std::string base = "run -m '" + m + "' -p 'Once upon a time' -n 16 --temp 0 --experts stream --cache-mb 2 ";
  const auto hits = [](const std::string& out) {
    const auto at = out.find(" hits, ");
    EXPECT_NE(at, std::string::npos) << out;
    return std::stoi(out.substr(out.rfind('(', at) + 1));
  };
  const auto text = [](const std::string& out) {
    const auto b = out.find("Once upon a time");
    return out.substr(b, out.find("prefill:") - b);
  };
  const auto cold = test::run_cli(base + "--heat '" + heat + "'");
  ASSERT_EQ(cold.exit_code, 0) << cold.output;
  EXPECT_NE(cold.output.find("cache warm: none: no heat profile at"), std::string::npos) << cold.output;
  ASSERT_TRUE(std::filesystem::exists(heat));
  const auto warm = test::run_cli(base + "--heat '" + heat + "'");
  ASSERT_EQ(warm.exit_code, 0) << warm.output;
  EXPECT_NE(warm.output.find("cache warm: 14 of the"), std::string::npos) << warm.output;  // 2 MiB: 14 slots
  EXPECT_EQ(text(warm.output), text(cold.output));
  EXPECT_GT(hits(warm.output), hits(cold.output));
  // The counts go on from run to run: 15 decode tokens each (16 generated, the last not run).
  const auto tokens_in = [&] { return util::read_json_lenient(heat)["decode_tokens"].get<int64_t>(); };
  EXPECT_EQ(tokens_in(), 30);
  // --cache-warm off starts cold again, and does not reset the kept counts; --cache-warm FILE reads a given
  // profile even with --heat off.
  const auto off = test::run_cli(base + "--heat '" + heat + "' --cache-warm off");
  EXPECT_NE(off.output.find("cache warm: off"), std::string::npos) << off.output;
  EXPECT_EQ(hits(off.output), hits(cold.output));
  EXPECT_EQ(tokens_in(), 45);
  const auto given = test::run_cli(base + "--heat off --cache-warm '" + heat + "'");
  EXPECT_NE(given.output.find("cache warm: 14 of the"), std::string::npos) << given.output;

  // A kept profile that is not one (here a mistyped field) is logged and replaced, never fatal.
  std::ofstream(heat) << R"({"format": 1, "version": 1})";
  auto r = test::run_cli(base + "--heat '" + heat + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("(this run replaces it)"), std::string::npos) << r.output;
  EXPECT_EQ(tokens_in(), 15);
  // A route trace records a cold start, which replay reproduces row by row.
  r = test::run_cli(base + "--heat '" + heat + "' --route-trace '" + (dir / "t.csv").string() + "'");
  EXPECT_NE(r.output.find("cache warm: none: --route-trace records a cold start"), std::string::npos) << r.output;

  const auto gptoss = (test::oracle_dir() / "models/micro-gptoss-F16.gguf").string();
  r = test::run_cli("run -m '" + gptoss + "' -p hi -n 2 --experts stream --heat off --cache-warm '" + heat + "'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--cache-warm " + heat + ": it was counted on tiny-qwen3moe-Q4_K_M.gguf"), std::string::npos)
      << r.output;
  r = test::run_cli(base + "--heat '" + dir.string() + "'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("is not a regular file"), std::string::npos) << r.output;
  // In the user's cache directory by default, one file per model.
  std::filesystem::remove_all(dir / "cache");
  r = test::run_shell("env -u MOETIER_HEAT MOETIER_CACHE_DIR='" + (dir / "cache").string() + "' " + test::cli_path() +
                      " " + base + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_TRUE(std::filesystem::exists(dir / "cache" / "heat"));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir / "cache" / "heat"),
                          std::filesystem::directory_iterator()),
            1);
}

// --expert-prefetch next says in the start log how it guesses, and the summary and the metrics CSV count the
// guesses; it does nothing where the experts do not stream, and says so.
TEST(RunStreaming, NextLayerPrefetchCountsItsGuesses) {
  const auto m = (test::oracle_dir() / "models/tiny-qwen3moe-Q4_K_M.gguf").string();
  const auto csv = (test::tmp_dir("cli_prefetch") / "m.csv").string();
  auto r = test::run_cli("run -m '" + m + "' -p 'Once upon a time' -n 12 --temp 0 --heat off --experts stream "
                         "--cache-mb 1 --expert-prefetch next --csv '" + csv + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("expert prefetch: next layer"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("4 ahead slots"), std::string::npos) << r.output;  // n_expert_used
  EXPECT_NE(r.output.find("experts guessed"), std::string::npos) << r.output;
  const std::string text = test::read_file(csv);
  EXPECT_NE(text.find("# config expert_prefetch=next layer"), std::string::npos);
  const auto at = text.find(" ahead_guesses=");
  ASSERT_NE(at, std::string::npos);
  EXPECT_GT(std::stoll(text.substr(at + 15)), 0) << text.substr(at, 80);

  r = test::run_cli("run -m '" + m + "' -p hi -n 2 --heat off --experts stream --cache-mb 1 --csv '" + csv + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("ahead slots"), std::string::npos) << r.output;
  EXPECT_NE(test::read_file(csv).find(" ahead_guesses=-1 "), std::string::npos);
  r = test::run_cli("run -m '" + m + "' -p hi -n 2 --experts resident --expert-prefetch next");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--expert-prefetch next has no effect"), std::string::npos) << r.output;
  r = test::run_cli("run -m '" + m + "' -p hi -n 2 --experts stream --expert-prefetch always");
  EXPECT_GT(r.exit_code, 100);
  EXPECT_NE(r.output.find("--expert-prefetch"), std::string::npos) << r.output;
}

TEST(RunStreaming, BadStreamingFlagsAreClearErrors) {
  const auto m = (test::oracle_dir() / "models/tiny-qwen3moe-Q4_K_M.gguf").string();
  auto r = test::run_cli("run -m '" + m + "' -p hi --experts stream --cache-mb lots");
  EXPECT_GT(r.exit_code, 100);  // rejected as the command line is parsed (CLI11's status)
  EXPECT_NE(r.output.find("--cache-mb"), std::string::npos) << r.output;
  r = test::run_cli("run -m '" + m + "' -p hi --experts sometimes");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("sometimes"), std::string::npos) << r.output;
  r = test::run_cli("run -m '" + m + "' -p hi --experts stream --dense-weights swap");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("swap"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace moetier
