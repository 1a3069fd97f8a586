// Telemetry of `run`: the metrics CSV (--csv), the progress lines, the route trace (--route-trace) read back by the
// reader and by `moetier replay`, and `moetier report`'s HTML page. On the oracle's tiny qwen3moe, streamed through
// a 1 MiB cache (so it misses and evicts) and resident.
#include <charconv>
#include <cmath>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/run_cli.h"
#include "gguf/gguf.h"
#include "model/eval.h"
#include "model/model.h"
#include "telemetry/metrics_report.h"
#include "telemetry/run_metrics.h"
#include "trace/route_trace.h"
#include "util/error.h"
#include "util/json_file.h"

namespace moetier {
namespace {

std::string model_path() { return (test::oracle_dir() / "models/tiny-qwen3moe-Q4_K_M.gguf").string(); }
nlohmann::json oracle_case() {
  return util::read_json_lenient(test::oracle_dir() / "ref/tiny-qwen3moe-Q4_K_M.p1.json");
}
std::string tmp(const std::string& name) { return (test::tmp_dir("telemetry") / name).string(); }

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

std::vector<std::string> fields(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  for (std::string f; std::getline(in, f, ',');) out.push_back(f);
  return out;
}

bool numeric(const std::string& s) {
  double v = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  return !s.empty() && r.ec == std::errc() && r.ptr == s.data() + s.size() && std::isfinite(v);
}

// A greedy run of the oracle prompt with extra flags; returns the CLI's result (asserted successful by callers).
test::CliResult run(const std::string& flags, int n = 12) {
  const auto prompt = oracle_case()["prompt"].get<std::string>();
  return test::run_cli("run -m '" + model_path() + "' --temp 0 -n " + std::to_string(n) + " -p '" + prompt + "' " +
                       flags);
}

constexpr const char* kStream = "--experts stream --cache-mb 1 ";

TEST(MetricsCsv, PreambleHeaderRowsAndSummaryAgree) {
  const auto csv = tmp("stream.csv");
  const auto r = run(std::string(kStream) + "--csv '" + csv + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto lines = lines_of(slurp(csv));
  ASSERT_GT(lines.size(), 10u);
  EXPECT_EQ(lines[0], "# moetier_metrics v1");
  EXPECT_EQ(lines[1], "# engine moetier " MOETIER_VERSION);
  EXPECT_EQ(lines[2].rfind("# model file=tiny-qwen3moe-Q4_K_M.gguf arch=qwen3moe n_layer=4 ", 0), 0u) << lines[2];
  EXPECT_NE(lines[2].find("n_expert=16 n_expert_used=4"), std::string::npos) << lines[2];
  std::map<std::string, std::string> config;
  size_t i = 1;
  for (; i < lines.size() && lines[i][0] == '#'; ++i)
    if (lines[i].rfind("# config ", 0) == 0) {
      const auto kv = lines[i].substr(9);
      config[kv.substr(0, kv.find('='))] = kv.substr(kv.find('=') + 1);
    }
  for (const char* key : {"experts", "cache_mib", "cache_slots", "policy", "lanes", "io_engine", "overlap", "direct_io",
                          "dense_weights", "ctx", "batch", "kv_type", "n_expert_used", "temp", "seed", "sampling"})
    EXPECT_TRUE(config.count(key)) << key;
  EXPECT_EQ(config["experts"], "stream");
  EXPECT_EQ(config["cache_mb_flag"], "1");
  EXPECT_EQ(config["sampling"], "greedy");
  EXPECT_EQ(config["policy"], "lru");
  // The header names the units; the preamble says a prefill is one row.
  ASSERT_LT(i, lines.size());
  EXPECT_EQ(lines[i], telemetry::kColumns);
  EXPECT_NE(lines[i].find("wall_ms"), std::string::npos);
  EXPECT_NE(lines[i].find("read_bytes"), std::string::npos);
  EXPECT_NE(lines[i].find("cache_hit_pct"), std::string::npos);
  EXPECT_NE(lines[i].find(",swaps,swap_bytes"), std::string::npos);
  EXPECT_NE(slurp(csv).find("one row with phase=prefill"), std::string::npos);
  const size_t n_cols = fields(lines[i]).size();
  // Every row numeric (phase aside); then one summary line, last.
  int prefill = 0, decode = 0;
  size_t k = i + 1;
  for (; k < lines.size() && lines[k][0] != '#'; ++k) {
    const auto f = fields(lines[k]);
    ASSERT_EQ(f.size(), n_cols) << lines[k];
    for (size_t c = 0; c < f.size(); ++c) {
      if (c == 2) {
        EXPECT_TRUE(f[c] == "prefill" || f[c] == "decode") << lines[k];
        (f[c] == "prefill" ? prefill : decode)++;
      } else {
        EXPECT_TRUE(numeric(f[c])) << "column " << c << ": " << lines[k];
      }
    }
  }
  EXPECT_EQ(prefill, 1);
  EXPECT_EQ(decode, 11);  // 12 sampled tokens: the last is printed, not run
  ASSERT_EQ(k, lines.size() - 1);
  EXPECT_EQ(lines[k].rfind("# summary ", 0), 0u) << lines[k];

  // The summary is the rows' sums and final values.
  const auto m = telemetry::read_metrics(csv);
  ASSERT_EQ(m.rows.size(), 12u);
  uint64_t bytes = 0, hits = 0, misses = 0, ev = 0;
  int64_t dec_tokens = 0;
  for (const auto& row : m.rows) {
    bytes += row.read_bytes;
    hits += row.hits;
    misses += row.misses;
    ev += row.evictions;
    if (!row.prefill) dec_tokens += row.steps;
    EXPECT_GE(row.compute_ms, 0.0);
    EXPECT_GT(row.rss_mib, 0.0);
    EXPECT_GE(row.hit_pct, 0.0);
    EXPECT_LE(row.hit_pct, 100.0);
    EXPECT_GE(row.cache_resident_mib, 0.0);
    EXPECT_LE(row.cache_resident_mib, 1.0 + 1e-9);  // within the 1 MiB budget
    EXPECT_EQ(row.swaps, -1);  // lru has no adaptive tier
    EXPECT_EQ(row.swap_bytes, -1);
  }
  EXPECT_EQ(m.rows[0].steps, 21);  // the oracle prompt's tokens
  EXPECT_GT(bytes, 0u);
  EXPECT_GT(misses, 0u);
  EXPECT_EQ(m.summary_value("read_bytes"), std::to_string(bytes));
  EXPECT_EQ(m.summary_value("hits"), std::to_string(hits));
  EXPECT_EQ(m.summary_value("misses"), std::to_string(misses));
  EXPECT_EQ(m.summary_value("evictions"), std::to_string(ev));
  EXPECT_EQ(m.summary_value("decode_tokens"), std::to_string(dec_tokens));
  EXPECT_EQ(m.summary_value("prefill_tokens"), "21");
  EXPECT_NEAR(std::stod(m.summary_value("hit_pct")), m.rows.back().hit_pct, 1e-3);
  EXPECT_NEAR(std::stod(m.summary_value("hit_pct")),
              100.0 * static_cast<double>(hits) / static_cast<double>(hits + misses), 1e-3);
  EXPECT_GT(std::stod(m.summary_value("peak_rss_mib")), 0.0);
  EXPECT_EQ(m.summary_value("swaps"), "-1");
  EXPECT_EQ(m.summary_value("swap_bytes"), "-1");
  EXPECT_EQ(m.summary_value("interrupted"), "no");  // a run that ended as asked (see tests/cli/signal_test.cpp)
  EXPECT_FALSE(m.summary_derived);
  EXPECT_TRUE(m.warnings.empty());
  EXPECT_EQ(r.output.find("adaptive tier:"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("interrupted"), std::string::npos) << r.output;

  // The stdout summary: after the text and a blank line, with the steady window and the time split.
  EXPECT_NE(r.output.find("\n\nprefill: 21 tokens"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("decode: 11 tokens"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("steady decode:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("MiB per decode token"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("I/O stall"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("peak RSS:"), std::string::npos) << r.output;
}

TEST(MetricsCsv, ResidentReadsNothingAndHasNoHitRate) {
  const auto csv = tmp("resident.csv");
  const auto r = run("--experts resident --csv '" + csv + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto text = slurp(csv);
  EXPECT_NE(text.find("# config experts=resident"), std::string::npos);
  EXPECT_NE(text.find("# note experts resident"), std::string::npos);  // documents the zeros and -1
  const auto m = telemetry::read_metrics(csv);
  ASSERT_EQ(m.rows.size(), 12u);
  for (const auto& row : m.rows) {
    EXPECT_EQ(row.read_bytes, 0u);
    EXPECT_EQ(row.io_ms, 0.0);
    EXPECT_EQ(row.stall_ms, 0.0);
    EXPECT_EQ(row.hits + row.misses, 0u);
    EXPECT_EQ(row.hit_pct, -1.0);
    EXPECT_EQ(row.cache_resident_mib, -1.0);
    EXPECT_GE(row.compute_ms, 0.0);
    EXPECT_EQ(row.swaps, -1);
    EXPECT_EQ(row.swap_bytes, -1);
  }
  EXPECT_EQ(m.summary_value("hit_pct"), "-1.0000");
  EXPECT_EQ(m.summary_value("swaps"), "-1");
  EXPECT_NE(r.output.find("experts: resident (no reads, no cache)"), std::string::npos) << r.output;
}

// The adaptive tier's background swap-ins: through a cache of about a third of the experts the swap passes move
// experts in, and every step's swaps and swap bytes are in its row (0 in a step where none landed), summed in the
// summary and told in the stdout summary. Swap reads are part of the step's read_bytes.
TEST(MetricsCsv, AdaptiveRunRecordsSwaps) {
  const auto csv = tmp("adaptive.csv");
  const auto r = run("--experts stream --cache-mb 3 --cache-policy adaptive --csv '" + csv + "'", 32);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto text = slurp(csv);
  EXPECT_NE(text.find("# config policy=adaptive"), std::string::npos);
  EXPECT_NE(text.find("# note swaps:"), std::string::npos);  // documents the columns
  const auto m = telemetry::read_metrics(csv);
  ASSERT_EQ(m.rows.size(), 32u);
  int64_t swaps = 0, swap_bytes = 0;
  for (const auto& row : m.rows) {
    EXPECT_GE(row.swaps, 0);
    EXPECT_GE(row.swap_bytes, 0);
    EXPECT_LE(static_cast<uint64_t>(row.swap_bytes), row.read_bytes);
    if (row.prefill) EXPECT_EQ(row.swaps, 0);  // swap passes run after decode steps only
    swaps += row.swaps;
    swap_bytes += row.swap_bytes;
  }
  EXPECT_GT(swaps, 0);
  EXPECT_GT(swap_bytes, 0);
  EXPECT_EQ(m.summary_value("swaps"), std::to_string(swaps));
  EXPECT_EQ(m.summary_value("swap_bytes"), std::to_string(swap_bytes));
  EXPECT_NE(r.output.find("adaptive tier: " + std::to_string(swaps) + " background swap-ins landed"),
            std::string::npos)
      << r.output;
  // The report shows them.
  const auto html_path = tmp("adaptive.html");
  const auto rep = test::run_cli("report '" + csv + "' -o '" + html_path + "'");
  ASSERT_EQ(rep.exit_code, 0) << rep.output;
  EXPECT_NE(slurp(html_path).find("background swap-ins, MiB swapped in</td><td>" + std::to_string(swaps) + ", "),
            std::string::npos);
}

TEST(MetricsCsv, SteadyWindowRule) {
  std::vector<telemetry::StepRow> rows(1);
  rows[0].prefill = true;
  for (double h : {10.0, 30.0, 45.0, 50.0, 50.5, 51.0, 50.8, 50.9, 51.2, 51.0, 50.7, 51.1}) {
    telemetry::StepRow r;
    r.hit_pct = h;
    r.steps = 1;
    r.wall_ms = 2;
    rows.push_back(r);
  }
  EXPECT_EQ(telemetry::steady_skip(rows, -1), std::make_pair(int64_t{4}, std::string("auto")));  // 50 -> 51.2: over 1 point
  EXPECT_EQ(telemetry::steady_skip(rows, 5), std::make_pair(int64_t{5}, std::string("flag")));
  EXPECT_EQ(telemetry::steady_skip(rows, 100).first, 12);
  rows.resize(8);  // 7 decode tokens: never 8 in a row
  EXPECT_EQ(telemetry::steady_skip(rows, -1).second, "none");
  const auto s = telemetry::summarize(rows, 2, -1);
  EXPECT_EQ(s.steady_tokens, 5);
  EXPECT_DOUBLE_EQ(s.steady_ms, 10.0);
}

// The summary names what took most of the steps' time, and the CSV's summary line carries it as bound=.
TEST(MetricsCsv, SummaryNamesTheBound) {
  telemetry::RunSummary s;
  EXPECT_EQ(telemetry::step_bound(s), "none");
  s.steps = 3;
  s.compute_ms = 50;
  s.stall_ms = 30;
  s.mgmt_ms = 2;
  EXPECT_EQ(telemetry::step_bound(s), "compute");
  s.stall_ms = 60;
  EXPECT_EQ(telemetry::step_bound(s), "io");
  s.mgmt_ms = 70;
  EXPECT_EQ(telemetry::step_bound(s), "management");
  EXPECT_NE(telemetry::summary_fields(s).find(" bound=management"), std::string::npos);
  EXPECT_NE(telemetry::format_summary(s, 4).find("; bound: management\n"), std::string::npos);
}

// The warm-up's decode hit rates: over the first 8, 16 and 32 decode tokens (prefill left out), and over the
// steady window; a window the run did not reach, or a run without a cache, gives none.
TEST(MetricsCsv, SummaryGivesTheWarmUpHitRates) {
  std::vector<telemetry::StepRow> rows(1);
  rows[0].prefill = true;
  rows[0].hits = 1000;  // the prompt's: in no decode window
  rows[0].hit_pct = 0;
  for (int i = 0; i < 20; ++i) {
    telemetry::StepRow r;
    r.steps = 1;
    r.wall_ms = 1;
    r.hit_pct = 50;
    r.hits = i < 8 ? 1 : 3;  // tokens 0-7: 1 hit of 4; tokens 8-19: 3 of 4
    r.misses = 4 - r.hits;
    rows.push_back(r);
  }
  const auto s = telemetry::summarize(rows, 10, -1);  // the steady window: decode tokens 10-19
  EXPECT_DOUBLE_EQ(s.first_hit_pct[0], 25.0);
  EXPECT_DOUBLE_EQ(s.first_hit_pct[1], 100.0 * (8 * 1 + 8 * 3) / 64);
  EXPECT_EQ(s.first_hit_pct[2], -1.0);  // 20 decode tokens: no first 32
  EXPECT_DOUBLE_EQ(s.steady_hit_pct, 75.0);
  const std::string text = telemetry::format_summary(s, 4);
  EXPECT_NE(text.find("decode hit rate: first 8: 25.0%, first 16: 50.0%, steady: 75.0%\n"), std::string::npos) << text;
  const std::string fields = telemetry::summary_fields(s);
  EXPECT_NE(fields.find(" first8_hit_pct=25.0000 first16_hit_pct=50.0000 first32_hit_pct=-1.0000 "
                        "steady_hit_pct=75.0000"),
            std::string::npos)
      << fields;
  for (auto& r : rows) r.hit_pct = -1;  // no cache
  const auto none = telemetry::summarize(rows, 10, -1);
  EXPECT_EQ(none.first_hit_pct[0], -1.0);
  EXPECT_EQ(none.steady_hit_pct, -1.0);
  EXPECT_EQ(telemetry::format_summary(none, 4).find("decode hit rate"), std::string::npos);
}

TEST(MetricsCsv, SteadySkipFlagIsUsed) {
  const auto csv = tmp("skip.csv");
  const auto r = run("--experts resident --steady-skip 4 --csv '" + csv + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("after a warm-up of 4 (--steady-skip)"), std::string::npos) << r.output;
  const auto m = telemetry::read_metrics(csv);
  EXPECT_EQ(m.summary_value("steady_rule"), "flag");
  EXPECT_EQ(m.summary_value("steady_tokens"), "7");
}

TEST(MetricsCsv, UnwritablePathNamesTheFlag) {
  const auto r = run("--csv /nonexistent-dir/x.csv", 2);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("--csv /nonexistent-dir/x.csv"), std::string::npos) << r.output;
}

TEST(Progress, TextAndJsonLines) {
  const auto text = run(std::string(kStream) + "--progress", 6);
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(text.output.find("[prefill 0]"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("[token 5]"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("MiB | stall"), std::string::npos) << text.output;
  const auto json = run(std::string(kStream) + "--progress=json", 6);
  ASSERT_EQ(json.exit_code, 0) << json.output;
  int n = 0;
  for (const auto& line : lines_of(json.output)) {
    // stderr's lines land after the text printed so far on stdout (no newline yet) when both go to one pipe.
    const auto at = line.find("{\"step\":");
    if (at == std::string::npos) continue;
    const auto l = line.substr(at);
    const auto j = nlohmann::json::parse(l);
    EXPECT_EQ(j["step"].get<int>(), n);
    EXPECT_EQ(j["phase"].get<std::string>(), n == 0 ? "prefill" : "decode");
    for (const char* k : {"tok_s", "hit_pct", "read_mib", "stall_ms"}) EXPECT_TRUE(j[k].is_number()) << l;
    ++n;
  }
  EXPECT_EQ(n, 6);
  const auto bad = run("--progress=yaml", 2);
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_NE(bad.output.find("--progress"), std::string::npos) << bad.output;
}

// Expert sets per (position, layer) from routing [rows, layers, k].
using Sets = std::map<std::pair<int64_t, int32_t>, std::set<int32_t>>;

TEST(RouteTrace, MatchesTheModelsRoutingAndReplays) {
  constexpr int kNew = 8;
  const auto path = tmp("p1.route.csv");
  const auto r = run(std::string(kStream) + "--route-trace '" + path + "'", kNew);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto trace = trace::read_route_trace(path);
  EXPECT_EQ(trace.header.arch, "qwen3moe");
  EXPECT_EQ(trace.header.model, model_path());
  ASSERT_EQ(trace.header.n_moe_layers, 4);
  EXPECT_EQ(trace.header.n_expert, 16);
  EXPECT_EQ(trace.header.n_expert_used, 4);
  ASSERT_EQ(trace.header.layers.size(), 4u);
  for (const auto& l : trace.header.layers) EXPECT_GT(l.expert_bytes, 0u);
  const auto j = oracle_case();
  const auto prompt = j["prompt_tokens"].get<std::vector<int32_t>>();
  const auto n_prompt = static_cast<int64_t>(prompt.size());
  const int64_t n_rows = n_prompt + kNew - 1;  // the last sampled token is not run
  ASSERT_EQ(trace.rows.size(), static_cast<size_t>(n_rows * 4 * 4));

  Sets traced;
  std::set<std::pair<int32_t, int32_t>> seen_in_prefill;
  for (const auto& row : trace.rows) {
    EXPECT_EQ(row.turn, 0);
    EXPECT_EQ(row.phase, row.step < n_prompt ? 0 : 1);
    EXPECT_TRUE(std::isnan(row.weight));  // the router's weights are not recorded
    traced[{row.step, row.layer}].insert(row.expert);
    if (row.phase == 0) {
      // The cache is empty when the prompt starts: every row is its expert's lookup, a miss (as the shared
      // traces record repeats); a layer's first use of an expert reads its bytes, a repeat within the prompt's
      // batch reads nothing.
      const bool first = seen_in_prefill.insert({row.layer, row.expert}).second;
      EXPECT_EQ(row.residency, trace::Residency::miss);
      EXPECT_EQ(row.expert_bytes, first ? trace.header.layers[static_cast<size_t>(row.layer)].expert_bytes : 0u);
    } else {
      EXPECT_EQ(row.expert_bytes == 0, row.residency != trace::Residency::miss);
    }
  }
  ASSERT_EQ(traced.size(), static_cast<size_t>(n_rows * 4));
  for (const auto& [key, set] : traced) EXPECT_EQ(set.size(), 4u) << key.first << "," << key.second;

  // The same engine, teacher-forced on the same tokens (prompt as one batch, then one token at a time).
  auto file = gguf::GgufModel::open(model_path());
  auto m = model::load_model(file, model::ModelOptions{.n_ctx = 256});
  const auto gen = model::generate_greedy(*m, prompt, kNew);
  std::vector<int32_t> tokens = prompt;
  tokens.insert(tokens.end(), gen.begin(), gen.end() - 1);
  const auto ev = model::evaluate(*m, tokens, n_prompt);
  ASSERT_EQ(ev.n_moe_layers, 4);
  int64_t same = 0, same_oracle = 0, total_oracle = 0;
  const auto oracle_routing = j["routing"];
  for (int64_t t = 0; t < n_rows; ++t)
    for (int32_t l = 0; l < 4; ++l) {
      std::set<int32_t> want;
      for (int s = 0; s < 4; ++s) want.insert(ev.routing[static_cast<size_t>((t * 4 + l) * 4 + s)]);
      same += traced[{t, l}] == want;
      if (t < n_prompt) {  // the oracle's routing over the same prompt tokens
        const auto o = oracle_routing[static_cast<size_t>(t)][static_cast<size_t>(l)].get<std::vector<int32_t>>();
        same_oracle += traced[{t, l}] == std::set<int32_t>(o.begin(), o.end());
        ++total_oracle;
      }
    }
  EXPECT_EQ(same, n_rows * 4);
  EXPECT_GE(static_cast<double>(same_oracle), 0.96 * static_cast<double>(total_oracle));

  // `moetier replay` reads it.
  const auto rep = test::run_cli("replay '" + path + "' --cache-mb 1");
  EXPECT_EQ(rep.exit_code, 0) << rep.output;
  EXPECT_NE(rep.output.find("hit"), std::string::npos) << rep.output;
}

TEST(RouteTrace, ResidentRowsAreHitsThatReadNothing) {
  const auto path = tmp("resident.route.csv");
  const auto r = run("--experts resident --route-trace '" + path + "'", 4);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto trace = trace::read_route_trace(path);
  ASSERT_FALSE(trace.rows.empty());
  for (const auto& row : trace.rows) {
    EXPECT_EQ(row.residency, trace::Residency::hit);
    EXPECT_EQ(row.expert_bytes, 0u);
  }
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

TEST(Report, SelfContainedPageWithThreeCurves) {
  const auto a = tmp("report-a.csv"), b = tmp("report-b.csv"), out = tmp("report.html"), out2 = tmp("compare.html");
  ASSERT_EQ(run(std::string(kStream) + "--csv '" + a + "'", 16).exit_code, 0);
  ASSERT_EQ(run("--experts stream --cache-mb 64 --io-threads 2 --csv '" + b + "'", 16).exit_code, 0);
  const auto r = test::run_cli("report '" + a + "' -o '" + out + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto html = slurp(out);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(count(html, "<svg class=\"curve\""), 3u);
  EXPECT_EQ(count(html, "<polyline class=\"series\""), 3u);
  EXPECT_NE(html.find("tok/s"), std::string::npos);
  EXPECT_NE(html.find("hit rate"), std::string::npos);
  EXPECT_NE(html.find("MiB per token"), std::string::npos);
  EXPECT_NE(html.find("<svg class=\"split\""), std::string::npos);  // the time split
  EXPECT_NE(html.find("<td>cache_mb_flag</td>"), std::string::npos);  // the configuration
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);

  const auto c = test::run_cli("report '" + a + "' --compare '" + b + "' -o '" + out2 + "'");
  ASSERT_EQ(c.exit_code, 0) << c.output;
  const auto cmp = slurp(out2);
  EXPECT_EQ(count(cmp, "<svg class=\"curve\""), 3u);
  EXPECT_EQ(count(cmp, "<polyline class=\"series\""), 6u);  // both runs on every curve
  const auto differ = cmp.substr(cmp.find("Settings that differ"));
  const auto table = differ.substr(0, differ.find("</table>"));
  EXPECT_NE(table.find("<td>cache_mb_flag</td><td>1</td><td>64</td>"), std::string::npos) << table;
  EXPECT_NE(table.find("<td>lanes</td>"), std::string::npos) << table;
  EXPECT_EQ(table.find("<td>kv_type</td>"), std::string::npos) << table;  // the same in both
}

TEST(Report, BadInputNamesTheFile) {
  const auto bad = tmp("not-metrics.csv");
  std::ofstream(bad) << "a,b,c\n1,2,3\n";
  const auto r = test::run_cli("report '" + bad + "' -o '" + tmp("bad.html") + "'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(bad), std::string::npos) << r.output;
  EXPECT_THROW(telemetry::parse_metrics("# moetier_metrics v1\n" + std::string(telemetry::kColumns) +
                                            "\n0,1,decode,x,0,0,0,0,0,0,0,0,0,0,0,0,0,0,-1,-1\n",
                                        "m.csv"),
               Error);
  // A row with fewer fields than the header, and a header without a column the report needs.
  EXPECT_THROW(telemetry::parse_metrics("# moetier_metrics v1\n" + std::string(telemetry::kColumns) +
                                            "\n0,1,decode,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0\n",
                                        "m.csv"),
               Error);
  try {
    telemetry::parse_metrics("# moetier_metrics v1\nstep,steps,phase\n0,1,decode\n", "m.csv");
    ADD_FAILURE() << "a header without wall_ms parsed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("wall_ms"), std::string::npos) << e.what();
  }
}

// Columns are read by name: a file written before the swap columns existed reads them as -1, and columns in
// another order (or unknown ones) read the same values.
TEST(Report, ColumnsAreFoundByName) {
  const std::string v1 =
      "step,steps,phase,wall_ms,compute_ms,io_ms,read_bytes,cache_hit_pct,stall_ms,mgmt_ms,majflt,cpu_ms,rss_mib,"
      "cache_resident_mib,hits,misses,evictions,reread_bytes";
  const auto old = telemetry::parse_metrics(
      "# moetier_metrics v1\n" + v1 + "\n0,5,prefill,10,9,1,4096,50,0.5,0.1,0,12,100,2,3,3,1,0\n"
      "1,1,decode,2,2,0,0,60,0,0.1,0,2,100,2,4,0,0,0\n",
      "old.csv");
  ASSERT_EQ(old.rows.size(), 2u);
  EXPECT_EQ(old.rows[0].read_bytes, 4096u);
  EXPECT_EQ(old.rows[1].hits, 4u);
  EXPECT_EQ(old.rows[0].swaps, -1);
  EXPECT_EQ(old.rows[1].swap_bytes, -1);
  EXPECT_EQ(old.summary_value("swaps"), "-1");  // no summary line: derived from the rows
  EXPECT_NE(telemetry::render_report(old, nullptr).find("n/a (no adaptive tier)"), std::string::npos);

  const auto shuffled = telemetry::parse_metrics(
      "# moetier_metrics v1\nswap_bytes,future_column,phase,step,steps,wall_ms,compute_ms,io_ms,read_bytes,"
      "cache_hit_pct,stall_ms,mgmt_ms,majflt,cpu_ms,rss_mib,cache_resident_mib,hits,misses,evictions,reread_bytes,"
      "swaps\n8192,7,decode,3,1,2.5,2,0,12288,40,0,0,0,2,100,2,1,1,1,0,2\n",
      "new.csv");
  ASSERT_EQ(shuffled.rows.size(), 1u);
  const auto& row = shuffled.rows[0];
  EXPECT_FALSE(row.prefill);
  EXPECT_EQ(row.step, 3);
  EXPECT_DOUBLE_EQ(row.wall_ms, 2.5);
  EXPECT_EQ(row.read_bytes, 12288u);
  EXPECT_EQ(row.swaps, 2);
  EXPECT_EQ(row.swap_bytes, 8192);
  EXPECT_EQ(shuffled.summary_value("swaps"), "2");
  EXPECT_EQ(shuffled.summary_value("swap_bytes"), "8192");
}

// A metrics CSV whose writer was killed ends without its summary, and its last row may be cut mid-line: that
// row is skipped with a warning naming the file and line, and the totals come from the complete rows. A cut
// summary line is skipped the same way. Rows that end in a newline stay strict.
// The columns before the VRAM tier's were added: rows of files written then (a reader finds columns by name).
constexpr const char* kColumnsBeforeVram =
    "step,steps,phase,wall_ms,compute_ms,io_ms,read_bytes,cache_hit_pct,stall_ms,mgmt_ms,majflt,cpu_ms,rss_mib,"
    "cache_resident_mib,hits,misses,evictions,reread_bytes,swaps,swap_bytes";

TEST(Report, ACutLastLineIsSkippedWithAWarning) {
  const std::string head = "# moetier_metrics v1\n" + std::string(kColumnsBeforeVram) + "\n";
  const std::string rows = "0,5,prefill,10,9,1,4096,50,0.5,0.1,0,12,100,2,3,3,1,0,-1,-1\n"
                           "1,1,decode,2,2,0,0,60,0,0.1,0,2,100,2,4,0,0,0,-1,-1\n";
  const auto cut = telemetry::parse_metrics(head + rows + "2,1,decode,2.5,2,0,0,6", "cut.csv");
  ASSERT_EQ(cut.rows.size(), 2u);
  ASSERT_EQ(cut.warnings.size(), 1u);
  EXPECT_NE(cut.warnings[0].find("cut.csv:5:"), std::string::npos) << cut.warnings[0];
  EXPECT_NE(cut.warnings[0].find("cut off"), std::string::npos) << cut.warnings[0];
  EXPECT_TRUE(cut.summary_derived);
  EXPECT_EQ(cut.summary_value("decode_tokens"), "1");
  const std::string html = telemetry::render_report(cut, nullptr);
  EXPECT_NE(html.find("warning: cut.csv:5:"), std::string::npos);
  EXPECT_NE(html.find("cut short (no summary line"), std::string::npos);

  // Even a cut row that parses is skipped: its last number may be shortened.
  EXPECT_EQ(telemetry::parse_metrics(head + rows + "2,1,decode,2.5,2,0,0,6,0,0.1,0,2,100,2,4,0,0,0,-1,-", "c.csv")
                .rows.size(),
            2u);
  const auto cut_summary = telemetry::parse_metrics(head + rows + "# summary steps=2 prefill_tok", "s.csv");
  EXPECT_EQ(cut_summary.rows.size(), 2u);
  EXPECT_EQ(cut_summary.warnings.size(), 1u);
  EXPECT_TRUE(cut_summary.summary_derived);
  EXPECT_EQ(cut_summary.summary_value("prefill_tokens"), "5");

  const auto whole = telemetry::parse_metrics(head + rows + "# summary steps=2 interrupted=SIGINT\n", "w.csv");
  EXPECT_TRUE(whole.warnings.empty());
  EXPECT_NE(telemetry::render_report(whole, nullptr).find("interrupted by SIGINT"), std::string::npos);
  EXPECT_THROW(telemetry::parse_metrics(head + rows + "2,1,decode,2.5,2,0,0,6\n", "bad.csv"), Error);
}

// `moetier report` on the CSV of a real run cut off in the middle of a row (as a killed run leaves it): a warning
// on stderr, exit 0 and the page.
TEST(Report, RendersARunCutOffMidRow) {
  const auto csv = tmp("cut-source.csv"), cut = tmp("cut.csv"), out = tmp("cut.html");
  ASSERT_EQ(run(std::string(kStream) + "--csv '" + csv + "'", 16).exit_code, 0);
  std::string text = slurp(csv);
  text.resize(text.rfind("# summary"));             // the summary never written
  text.resize(text.size() - 1);                     // the last row's end of line
  text.resize(text.rfind('\n') + 1 + 12);           // 12 bytes of the last row
  std::ofstream(cut, std::ios::binary) << text;
  const auto r = test::run_cli("report '" + cut + "' -o '" + out + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("moetier: warning: " + cut + ":"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("(15 steps)"), std::string::npos) << r.output;  // 16 rows, the cut one skipped
  const auto html = slurp(out);
  EXPECT_EQ(count(html, "<svg class=\"curve\""), 3u);
  EXPECT_NE(html.find("cut short"), std::string::npos);
}

// Found by fuzz_metrics_csv (UBSan): count columns were converted from double unchecked, so 1e300, -5 or 0.5 in
// read_bytes, hits or step became undefined behaviour or garbage, and inf/nan read as numbers. Each is now an
// error naming the line and the column; -1 stays valid where it means "not measured".
TEST(Report, CountColumnsMustBeWholeNumbersInRange) {
  const std::string head = "# moetier_metrics v1\n" + std::string(kColumnsBeforeVram) + "\n";
  // step,steps,phase,wall_ms,compute_ms,io_ms,read_bytes,cache_hit_pct,stall_ms,mgmt_ms,majflt,cpu_ms,rss_mib,
  // cache_resident_mib,hits,misses,evictions,reread_bytes,swaps,swap_bytes
  auto row = [](const std::string& read_bytes, const std::string& majflt, const std::string& hits,
                const std::string& wall_ms) {
    return "0,1,decode," + wall_ms + ",1,0," + read_bytes + ",50,0,0," + majflt + ",2,100,-1," + hits +
           ",0,0,0,-1,-1\n";
  };
  const auto ok = telemetry::parse_metrics(head + row("4096", "-1", "3", "2.5"), "m.csv");
  ASSERT_EQ(ok.rows.size(), 1u);
  EXPECT_EQ(ok.rows[0].majflt, -1);
  EXPECT_EQ(ok.rows[0].swaps, -1);
  const std::pair<std::string, std::string> bad[] = {
      {row("1e300", "0", "0", "1"), "read_bytes '1e300'"}, {row("-5", "0", "0", "1"), "read_bytes '-5'"},
      {row("0", "0", "0.5", "1"), "hits '0.5'"},           {row("0", "-2", "0", "1"), "majflt '-2'"},
      {row("0", "0", "0", "inf"), "field 4 'inf'"},        {row("0", "0", "0", "nan"), "field 4 'nan'"},
  };
  for (const auto& [text, what] : bad) {
    try {
      telemetry::parse_metrics(head + text, "m.csv");
      ADD_FAILURE() << "parsed: " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("m.csv:3: "), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  }
  try {
    telemetry::parse_metrics(head + row("0", "0", "0", "1") + "# summary steps=1 steady_skip=1e300\n", "m.csv");
    ADD_FAILURE() << "a steady_skip of 1e300 parsed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("m.csv:4: steady_skip '1e300'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace moetier
