// The server's stats as the monitor page reads them (JSON) and as Prometheus scrapes them (text format 0.0.4):
// the text is parsed line by line (every sample belongs to a family with HELP and TYPE, names and labels are
// well formed, values parse and are finite), and the JSON's figures agree with the snapshot and with the text.
#include <cmath>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/stats_export.h"
#include "telemetry/live_stats.h"

namespace moetier::server {
namespace {

using telemetry::LiveSnapshot;

struct Sample {
  std::string name, labels;
  double value = 0;
};

struct Exposition {
  std::map<std::string, std::string> type;  // family -> counter | gauge
  std::set<std::string> help;
  std::vector<Sample> samples;
  std::vector<std::string> errors;

  // The value of name{labels}; NaN when there is no such sample.
  double value(const std::string& name, const std::string& labels = "") const {
    for (const auto& s : samples)
      if (s.name == name && s.labels == labels) return s.value;
    return std::nan("");
  }
  bool has(const std::string& name, const std::string& labels = "") const { return !std::isnan(value(name, labels)); }
};

// Text format 0.0.4: "# HELP name text", "# TYPE name type", then `name{label="value",...} value` lines.
Exposition parse(const std::string& text) {
  static const std::regex kName("[a-zA-Z_:][a-zA-Z0-9_:]*");
  static const std::regex kSample(R"(([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})? (\S+))");
  static const std::regex kLabels(R"(([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*")(,[a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*")*)");
  Exposition e;
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    const std::string where = "line " + std::to_string(n) + ": " + line;
    if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) {
      std::istringstream f(line.substr(7));
      std::string name, rest;
      f >> name;
      std::getline(f, rest);
      if (!std::regex_match(name, kName)) e.errors.push_back("bad family name, " + where);
      if (line[2] == 'H') {
        if (rest.size() < 2) e.errors.push_back("empty HELP, " + where);
        if (!e.help.insert(name).second) e.errors.push_back("second HELP, " + where);
      } else {
        const std::string type = rest.empty() ? "" : rest.substr(1);
        if (type != "counter" && type != "gauge") e.errors.push_back("bad TYPE, " + where);
        if (!e.help.count(name)) e.errors.push_back("TYPE before HELP, " + where);
        if (!e.type.emplace(name, type).second) e.errors.push_back("second TYPE, " + where);
      }
      continue;
    }
    std::smatch m;
    if (line.empty() || line[0] == '#' || !std::regex_match(line, m, kSample)) {
      e.errors.push_back("not a sample, " + where);
      continue;
    }
    Sample s{m[1], m[3], 0};
    if (!s.labels.empty() && !std::regex_match(s.labels, kLabels)) e.errors.push_back("bad labels, " + where);
    try {
      size_t used = 0;
      s.value = std::stod(m[4].str(), &used);
      if (used != m[4].length()) throw std::invalid_argument("trailing");
    } catch (const std::exception&) {
      e.errors.push_back("bad value, " + where);
    }
    if (!std::isfinite(s.value)) e.errors.push_back("not finite, " + where);
    // A sample belongs to the family declared last, by name.
    const auto t = e.type.find(s.name);
    if (t == e.type.end() || !e.help.count(s.name)) e.errors.push_back("sample without HELP/TYPE, " + where);
    else if (t->second == "counter" && (s.name.size() < 6 || s.name.substr(s.name.size() - 6) != "_total"))
      e.errors.push_back("counter not ending in _total, " + where);
    else if (t->second == "counter" && s.value < 0)
      e.errors.push_back("negative counter, " + where);
    e.samples.push_back(s);
  }
  if (text.empty() || text.back() != '\n') e.errors.push_back("the text does not end in a line feed");
  return e;
}

ServerStats server_stats() {
  ServerStats s;
  s.state = "ok";
  s.model_id = R"(tiny "q"\moe.gguf)";  // a quote and a backslash: escaped in the label
  s.model_info = {{"experts", "stream (asked)"}, {"cache", "1 MiB as given"}};
  s.n_slots = 2;
  s.queue_depth = 3;
  s.active = 2;
  s.requests_total = 7;
  s.prompt_tokens_total = 420;
  s.reused_tokens_total = 300;
  s.completion_tokens_total = 96;
  RequestRecord r;
  r.id = 7;
  r.endpoint = "chat";
  r.slot = 1;
  r.prompt_tokens = 60;
  r.reused_tokens = 48;
  r.completion_tokens = 16;
  r.queue_ms = 1.5;
  r.ttft_ms = 30;
  r.decode_tps = 41.5;
  r.finish_reason = "stop";
  s.recent.push_back(r);
  return s;
}

// A streamed engine with a cache: 2 MoE layers of 4 experts, top-2; a window of 8 steps, of which 1 prefill.
LiveSnapshot streamed_snapshot() {
  LiveSnapshot s;
  s.total = {.steps = 40, .prefill_tokens = 120, .decode_tokens = 39, .prefill_ms = 300, .decode_ms = 975,
             .hits = 150, .misses = 50, .read_bytes = 50 << 20, .decode_read_bytes = 39 << 20, .stall_ms = 255,
             .swaps = 3};
  s.recent = {.steps = 8, .prefill_tokens = 20, .decode_tokens = 7, .prefill_ms = 40, .decode_ms = 140,
              .hits = 30, .misses = 10, .read_bytes = 10 << 20, .decode_read_bytes = 7 << 20, .stall_ms = 18,
              .swaps = 1};
  s.window = 8;
  s.window_steps = 8;
  s.has_cache = true;
  s.streamed = true;
  s.last_prefill_tokens = 20;
  s.last_prefill_ms = 40;
  s.last_step_age_s = 0.25;
  s.cache_resident_bytes = 6u << 20;
  s.cache_capacity_bytes = 8u << 20;
  s.n_moe_layers = 2;
  s.n_expert = 4;
  s.n_expert_used = 2;
  // 27 tokens x 2 per layer.
  s.routed = {20, 14, 10, 10, 30, 12, 8, 4};
  s.layer_hits = {16, 14};
  s.layer_misses = {4, 6};
  return s;
}

TEST(StatsExport, PrometheusTextIsWellFormed) {
  const Exposition e = parse(prometheus_text(server_stats(), streamed_snapshot()));
  for (const auto& err : e.errors) ADD_FAILURE() << err;
  // Every family declared has HELP and TYPE; the ones the issue names are there with their types.
  const std::map<std::string, std::string> want{
      {"moetier_prompt_tokens_total", "counter"},       {"moetier_completion_tokens_total", "counter"},
      {"moetier_decode_tokens_per_second", "gauge"},    {"moetier_prefill_tokens_per_second", "gauge"},
      {"moetier_expert_cache_hit_ratio", "gauge"},      {"moetier_expert_read_bytes_total", "counter"},
      {"moetier_expert_read_bytes_per_token", "gauge"}, {"moetier_stall_ratio", "gauge"},
      {"moetier_requests_queued", "gauge"},             {"moetier_requests_active", "gauge"},
      {"moetier_requests_total", "counter"},            {"moetier_prompt_tokens_reused_total", "counter"},
      {"moetier_tier_bytes", "gauge"}};
  for (const auto& [name, type] : want) {
    ASSERT_TRUE(e.type.count(name)) << name;
    EXPECT_EQ(e.type.at(name), type) << name;
  }
  EXPECT_EQ(e.value("moetier_prompt_tokens_total"), 420);
  EXPECT_EQ(e.value("moetier_completion_tokens_total"), 96);
  EXPECT_EQ(e.value("moetier_prompt_tokens_reused_total"), 300);
  EXPECT_EQ(e.value("moetier_requests_total"), 7);
  EXPECT_EQ(e.value("moetier_requests_queued"), 3);
  EXPECT_EQ(e.value("moetier_requests_active"), 2);
  EXPECT_DOUBLE_EQ(e.value("moetier_decode_tokens_per_second"), 7 / 0.140);
  EXPECT_DOUBLE_EQ(e.value("moetier_prefill_tokens_per_second"), 20 / 0.040);
  EXPECT_DOUBLE_EQ(e.value("moetier_expert_cache_hit_ratio", "window=\"recent\""), 0.75);
  EXPECT_DOUBLE_EQ(e.value("moetier_expert_cache_hit_ratio", "window=\"total\""), 0.75);
  EXPECT_EQ(e.value("moetier_expert_read_bytes_total"), 50 << 20);
  EXPECT_DOUBLE_EQ(e.value("moetier_expert_read_bytes_per_token"), 1 << 20);
  EXPECT_DOUBLE_EQ(e.value("moetier_stall_ratio"), 18.0 / 180.0);
  EXPECT_EQ(e.value("moetier_tier_bytes", "tier=\"ram_cache\""), 6 << 20);
  EXPECT_EQ(e.value("moetier_tier_bytes", "tier=\"ram_cache_capacity\""), 8 << 20);
  EXPECT_EQ(e.value("moetier_tier_bytes", "tier=\"mapped\""), 0);
  EXPECT_EQ(e.value("moetier_up", R"(model="tiny \"q\"\\moe.gguf",state="ok")"), 1);
  EXPECT_EQ(e.value("moetier_ready"), 1);
}

// Resident experts, nothing run yet: no cache, so no hit ratio sample (documented: absent), no rate before a
// token; everything that is sampled is finite.
TEST(StatsExport, NothingMeasuredMeansNoSampleAndJsonNull) {
  ServerStats server;
  server.model_id = "m.gguf";
  LiveSnapshot live;
  live.window = 64;
  live.mapped_expert_bytes = 123456;
  const Exposition e = parse(prometheus_text(server, live));
  for (const auto& err : e.errors) ADD_FAILURE() << err;
  EXPECT_TRUE(e.type.count("moetier_expert_cache_hit_ratio"));
  EXPECT_FALSE(e.has("moetier_expert_cache_hit_ratio", "window=\"recent\""));
  EXPECT_FALSE(e.has("moetier_expert_cache_hit_ratio", "window=\"total\""));
  EXPECT_FALSE(e.has("moetier_decode_tokens_per_second"));
  EXPECT_FALSE(e.has("moetier_prefill_tokens_per_second"));
  EXPECT_FALSE(e.has("moetier_stall_ratio"));
  EXPECT_EQ(e.value("moetier_ready"), 0);
  EXPECT_EQ(e.value("moetier_tier_bytes", "tier=\"mapped\""), 123456);
  EXPECT_EQ(e.value("moetier_requests_total"), 0);

  const nlohmann::json j = stats_json(server, live);
  EXPECT_EQ(j["server"]["state"], "loading");
  EXPECT_TRUE(j["recent"]["decode_tps"].is_null());
  EXPECT_TRUE(j["recent"]["hit_ratio"].is_null());
  EXPECT_TRUE(j["total"]["hit_ratio"].is_null());
  EXPECT_TRUE(j["recent"]["read_bytes_per_token"].is_null());
  EXPECT_TRUE(j["recent"]["last_step_age_s"].is_null());
  EXPECT_TRUE(j["last_prefill"]["tps"].is_null());
  EXPECT_EQ(j["tiers"]["mapped_bytes"], 123456);
  EXPECT_EQ(j["heat"]["routed"].size(), 0u);

  // Resident experts after some steps: hit ratio still absent (no cache), the rates and reads are measured.
  live.recent = {.steps = 3, .decode_tokens = 3, .decode_ms = 30};
  live.total = live.recent;
  const Exposition r = parse(prometheus_text(server, live));
  for (const auto& err : r.errors) ADD_FAILURE() << err;
  EXPECT_FALSE(r.has("moetier_expert_cache_hit_ratio", "window=\"recent\""));
  EXPECT_DOUBLE_EQ(r.value("moetier_decode_tokens_per_second"), 100);
  EXPECT_EQ(r.value("moetier_expert_read_bytes_per_token"), 0);
  EXPECT_EQ(r.value("moetier_stall_ratio"), 0);
}

TEST(StatsExport, JsonKeysAreThereAndAgreeWithTheSnapshotAndTheText) {
  const ServerStats server = server_stats();
  const LiveSnapshot live = streamed_snapshot();
  const nlohmann::json j = stats_json(server, live);
  for (const char* k : {"server", "model", "total", "recent", "last_prefill", "tiers", "heat", "requests"})
    EXPECT_TRUE(j.contains(k)) << k;
  for (const char* k : {"state", "model_id", "n_slots", "queue_depth", "active", "requests_total",
                        "prompt_tokens_total", "reused_tokens_total", "completion_tokens_total"})
    EXPECT_TRUE(j["server"].contains(k)) << k;
  for (const char* part : {"total", "recent"})
    for (const char* k : {"steps", "prefill_tokens", "decode_tokens", "prefill_ms", "decode_ms", "prefill_tps",
                          "decode_tps", "hits", "misses", "hit_ratio", "read_bytes", "decode_read_bytes",
                          "read_bytes_per_token", "stall_ms", "stall_ratio", "swaps"})
      EXPECT_TRUE(j[part].contains(k)) << part << "." << k;
  for (const char* k : {"window", "window_steps", "last_step_age_s"}) EXPECT_TRUE(j["recent"].contains(k)) << k;
  for (const char* k : {"streamed", "has_cache", "ram_cache_bytes", "ram_cache_capacity_bytes", "mapped_bytes"})
    EXPECT_TRUE(j["tiers"].contains(k)) << k;

  EXPECT_EQ(j["server"]["queue_depth"], 3);
  EXPECT_EQ(j["model"]["id"], server.model_id);
  ASSERT_EQ(j["model"]["info"].size(), 2u);
  EXPECT_EQ(j["model"]["info"][1]["topic"], "cache");
  EXPECT_EQ(j["model"]["info"][1]["text"], "1 MiB as given");
  EXPECT_DOUBLE_EQ(j["recent"]["decode_tps"].get<double>(), 50.0);
  EXPECT_DOUBLE_EQ(j["total"]["decode_tps"].get<double>(), 40.0);
  EXPECT_DOUBLE_EQ(j["total"]["prefill_tps"].get<double>(), 400.0);
  EXPECT_DOUBLE_EQ(j["recent"]["hit_ratio"].get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(j["recent"]["read_bytes_per_token"].get<double>(), 1 << 20);
  EXPECT_DOUBLE_EQ(j["total"]["stall_ratio"].get<double>(), 255.0 / 1275.0);
  EXPECT_EQ(j["recent"]["window_steps"], 8);
  EXPECT_DOUBLE_EQ(j["last_prefill"]["tps"].get<double>(), 500.0);
  EXPECT_EQ(j["tiers"]["ram_cache_capacity_bytes"], 8u << 20);

  // The heat map: one row per MoE layer of n_expert counts, each row summing to the window's tokens x top-k;
  // per-layer hits + misses are the window's lookups.
  const auto& heat = j["heat"];
  ASSERT_EQ(heat["routed"].size(), 2u);
  uint64_t lookups = 0;
  for (size_t l = 0; l < 2; ++l) {
    ASSERT_EQ(heat["routed"][l].size(), 4u);
    uint64_t sum = 0;
    for (const auto& c : heat["routed"][l]) sum += c.get<uint64_t>();
    EXPECT_EQ(sum, 27u * 2u) << l;
    lookups += heat["hits"][l].get<uint64_t>() + heat["misses"][l].get<uint64_t>();
  }
  EXPECT_EQ(lookups, j["recent"]["hits"].get<uint64_t>() + j["recent"]["misses"].get<uint64_t>());
  EXPECT_EQ(heat["routed"][1][0], 30);

  ASSERT_EQ(j["requests"].size(), 1u);
  const auto& r = j["requests"][0];
  EXPECT_EQ(r["id"], 7);
  EXPECT_EQ(r["endpoint"], "chat");
  EXPECT_EQ(r["reused_tokens"], 48);
  EXPECT_EQ(r["finish_reason"], "stop");
  EXPECT_DOUBLE_EQ(r["decode_tps"].get<double>(), 41.5);

  // The JSON and the text say the same.
  const Exposition e = parse(prometheus_text(server, live));
  EXPECT_DOUBLE_EQ(e.value("moetier_decode_tokens_per_second"), j["recent"]["decode_tps"].get<double>());
  EXPECT_DOUBLE_EQ(e.value("moetier_expert_read_bytes_per_token"), j["recent"]["read_bytes_per_token"].get<double>());
  EXPECT_DOUBLE_EQ(e.value("moetier_stall_ratio"), j["recent"]["stall_ratio"].get<double>());
  EXPECT_EQ(e.value("moetier_expert_swaps_total"), j["total"]["swaps"].get<double>());
}

// The parser above rejects what it must (so that its silence means something).
TEST(StatsExport, TheCheckerRejectsMalformedText) {
  EXPECT_FALSE(parse("moetier_x 1\n").errors.empty());  // no HELP/TYPE
  EXPECT_FALSE(parse("# HELP a_total h\n# TYPE a_total counter\na_total NaN\n").errors.empty());
  EXPECT_FALSE(parse("# HELP a h\n# TYPE a counter\na 1\n").errors.empty());  // counter without _total
  EXPECT_FALSE(parse("# HELP a h\n# TYPE a gauge\na{x=1} 1\n").errors.empty());  // unquoted label
  EXPECT_FALSE(parse("# HELP 1a h\n# TYPE 1a gauge\n").errors.empty());
  EXPECT_TRUE(parse("# HELP a h\n# TYPE a gauge\na{x=\"q\\\"\"} 1.5e+3\n").errors.empty());
}

}  // namespace
}  // namespace moetier::server
