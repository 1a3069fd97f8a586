// The stats JSON (GET /v1/moetier/stats), read by the monitor page (src/server/monitor.html), and the Prometheus
// text (GET /metrics). A figure that was not measured (a rate over no tokens, a hit ratio without a cache) is
// JSON null and has no Prometheus sample (its family's HELP and TYPE lines stay): never NaN, never a made-up 0.
//
// JSON keys (units in the names: _ms milliseconds, _s seconds, _bytes bytes, _tps tokens per second,
// _ratio 0..1):
//   server:  state ("loading" | "ok"), model_id, n_slots, queue_depth, active, requests_total,
//            prompt_tokens_total, reused_tokens_total, completion_tokens_total
//   model:   id, info: [{topic, text}] (the start log's decisions, in order)
//   total, recent (the same keys; total since the start, recent over the last `window` steps):
//            steps, prefill_tokens, decode_tokens, prefill_ms, decode_ms, prefill_tps|null, decode_tps|null,
//            hits, misses, hit_ratio|null (null without a cache or before any lookup), read_bytes,
//            decode_read_bytes, read_bytes_per_token|null (decode reads per decode token), stall_ms,
//            stall_ratio|null (stall_ms over the steps' wall time), swaps
//   recent also: window (steps it can hold), window_steps (steps it holds), last_step_age_s|null
//   last_prefill: tokens, ms, tps|null (the most recent prefill, which the window may no longer hold)
//   tiers:   streamed, has_cache, ram_cache_bytes, ram_cache_capacity_bytes, mapped_bytes
//   heat:    n_moe_layers, n_expert, n_expert_used, routed: [[count per expert] per MoE layer],
//            hits: [per MoE layer], misses: [per MoE layer] (over the recent window)
//   requests: [{id, endpoint, slot, prompt_tokens, reused_tokens, completion_tokens, queue_ms, ttft_ms,
//            decode_tps, finish_reason}] (newest last)
#include "server/stats_export.h"

#include <cmath>
#include <optional>
#include <string_view>

#include <fmt/format.h>

namespace moetier::server {
namespace {

using nlohmann::json;
using telemetry::LiveSnapshot;
using telemetry::LiveTotals;

std::optional<double> ratio(double a, double b) {
  if (!(b > 0) || !std::isfinite(a)) return std::nullopt;
  return a / b;
}

// Tokens per second over the steps' wall time.
std::optional<double> tps(int64_t tokens, double ms) {
  if (tokens <= 0) return std::nullopt;
  return ratio(static_cast<double>(tokens) * 1e3, ms);
}

std::optional<double> hit_ratio(const LiveSnapshot& s, const LiveTotals& t) {
  if (!s.has_cache) return std::nullopt;
  return ratio(static_cast<double>(t.hits), static_cast<double>(t.hits + t.misses));
}

std::optional<double> read_per_token(const LiveTotals& t) {
  if (t.decode_tokens <= 0) return std::nullopt;
  return static_cast<double>(t.decode_read_bytes) / static_cast<double>(t.decode_tokens);
}

std::optional<double> stall_ratio(const LiveTotals& t) { return ratio(t.stall_ms, t.prefill_ms + t.decode_ms); }

// The prefill rate shown live: the window's prefills, else the latest one (a window of decode steps holds none).
std::optional<double> live_prefill_tps(const LiveSnapshot& s) {
  if (auto r = tps(s.recent.prefill_tokens, s.recent.prefill_ms)) return r;
  return tps(s.last_prefill_tokens, s.last_prefill_ms);
}

json opt(std::optional<double> v) { return v ? json(*v) : json(nullptr); }

json totals_json(const LiveSnapshot& s, const LiveTotals& t) {
  return {{"steps", t.steps},
          {"prefill_tokens", t.prefill_tokens},
          {"decode_tokens", t.decode_tokens},
          {"prefill_ms", t.prefill_ms},
          {"decode_ms", t.decode_ms},
          {"prefill_tps", opt(tps(t.prefill_tokens, t.prefill_ms))},
          {"decode_tps", opt(tps(t.decode_tokens, t.decode_ms))},
          {"hits", t.hits},
          {"misses", t.misses},
          {"hit_ratio", opt(hit_ratio(s, t))},
          {"read_bytes", t.read_bytes},
          {"decode_read_bytes", t.decode_read_bytes},
          {"read_bytes_per_token", opt(read_per_token(t))},
          {"stall_ms", t.stall_ms},
          {"stall_ratio", opt(stall_ratio(t))},
          {"swaps", t.swaps}};
}

// Prometheus text, one family at a time: HELP and TYPE, then its samples.
class PromWriter {
 public:
  void family(std::string_view name, std::string_view type, std::string_view help) {
    out_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  }
  void sample(std::string_view name, std::string_view labels, double v) {
    if (!std::isfinite(v)) return;  // not measured: no sample
    out_ += labels.empty() ? fmt::format("{} {}\n", name, v) : fmt::format("{}{{{}}} {}\n", name, labels, v);
  }
  void sample(std::string_view name, std::string_view labels, std::optional<double> v) {
    if (v) sample(name, labels, *v);
  }
  template <typename Int>
    requires std::is_integral_v<Int>
  void sample(std::string_view name, std::string_view labels, Int v) {
    out_ += labels.empty() ? fmt::format("{} {}\n", name, v) : fmt::format("{}{{{}}} {}\n", name, labels, v);
  }
  // One family with one unlabelled sample.
  template <typename V>
  void metric(std::string_view name, std::string_view type, std::string_view help, V v) {
    family(name, type, help);
    sample(name, "", v);
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

// A label value as the text format quotes it: backslash, double quote and line feed escaped.
std::string label_value(std::string_view v) {
  std::string o;
  for (const char c : v) {
    if (c == '\\') o += "\\\\";
    else if (c == '"') o += "\\\"";
    else if (c == '\n') o += "\\n";
    else o += c;
  }
  return o;
}

}  // namespace

json stats_json(const ServerStats& server, const LiveSnapshot& live) {
  json info = json::array();
  for (const auto& [topic, text] : server.model_info) info.push_back({{"topic", topic}, {"text", text}});
  json recent = totals_json(live, live.recent);
  recent["window"] = live.window;
  recent["window_steps"] = live.window_steps;
  recent["last_step_age_s"] = live.last_step_age_s >= 0 ? json(live.last_step_age_s) : json(nullptr);
  json routed = json::array();
  for (int64_t l = 0; l < live.n_moe_layers; ++l) {
    const auto b = live.routed.begin() + l * live.n_expert;
    routed.push_back(std::vector<uint32_t>(b, b + live.n_expert));
  }
  json requests = json::array();
  for (const auto& r : server.recent)
    requests.push_back({{"id", r.id},
                        {"endpoint", r.endpoint},
                        {"slot", r.slot},
                        {"prompt_tokens", r.prompt_tokens},
                        {"reused_tokens", r.reused_tokens},
                        {"completion_tokens", r.completion_tokens},
                        {"queue_ms", r.queue_ms},
                        {"ttft_ms", r.ttft_ms},
                        {"decode_tps", r.decode_tps},
                        {"finish_reason", r.finish_reason}});
  return {
      {"server",
       {{"state", server.state},
        {"model_id", server.model_id},
        {"n_slots", server.n_slots},
        {"queue_depth", server.queue_depth},
        {"active", server.active},
        {"requests_total", server.requests_total},
        {"prompt_tokens_total", server.prompt_tokens_total},
        {"reused_tokens_total", server.reused_tokens_total},
        {"completion_tokens_total", server.completion_tokens_total}}},
      {"model", {{"id", server.model_id}, {"info", std::move(info)}}},
      {"total", totals_json(live, live.total)},
      {"recent", std::move(recent)},
      {"last_prefill",
       {{"tokens", live.last_prefill_tokens},
        {"ms", live.last_prefill_ms},
        {"tps", opt(tps(live.last_prefill_tokens, live.last_prefill_ms))}}},
      {"tiers",
       {{"streamed", live.streamed},
        {"has_cache", live.has_cache},
        {"ram_cache_bytes", live.cache_resident_bytes},
        {"ram_cache_capacity_bytes", live.cache_capacity_bytes},
        {"mapped_bytes", live.mapped_expert_bytes}}},
      {"heat",
       {{"n_moe_layers", live.n_moe_layers},
        {"n_expert", live.n_expert},
        {"n_expert_used", live.n_expert_used},
        {"routed", std::move(routed)},
        {"hits", live.layer_hits},
        {"misses", live.layer_misses}}},
      {"requests", std::move(requests)},
  };
}

// Metric families (a figure not measured has no sample; see the top of this file):
//   moetier_up{model, state} gauge 1; moetier_ready gauge (1 once loaded); moetier_slots gauge
//   moetier_requests_queued, moetier_requests_active gauges; moetier_requests_total counter
//   moetier_prompt_tokens_total, moetier_prompt_tokens_reused_total, moetier_completion_tokens_total counters
//   moetier_prefill_tokens_total, moetier_decode_tokens_total counters (tokens the engine ran: reused prompt
//   tokens are not run), moetier_prefill_seconds_total, moetier_decode_seconds_total counters
//   moetier_decode_tokens_per_second gauge (recent window), moetier_prefill_tokens_per_second gauge (the recent
//   window's prefills, else the latest prefill)
//   moetier_expert_cache_hit_ratio{window="recent"|"total"} gauge: absent without a RAM cache (resident experts
//   or cache 0) and before any lookup
//   moetier_expert_cache_lookups_total{result="hit"|"miss"} counter
//   moetier_expert_read_bytes_total counter; moetier_expert_read_bytes_per_token gauge (recent decode tokens)
//   moetier_expert_stall_seconds_total counter; moetier_stall_ratio gauge (recent: stall over the steps' wall time)
//   moetier_expert_swaps_total counter (adaptive tier swap-ins landed)
//   moetier_tier_bytes{tier="ram_cache"|"ram_cache_capacity"|"mapped"} gauge
std::string prometheus_text(const ServerStats& server, const LiveSnapshot& live) {
  PromWriter w;
  const LiveTotals& t = live.total;
  const LiveTotals& r = live.recent;
  w.family("moetier_up", "gauge", "The server is running (1), with the served model and its state as labels.");
  w.sample("moetier_up",
           fmt::format("model=\"{}\",state=\"{}\"", label_value(server.model_id), label_value(server.state)), 1);
  w.metric("moetier_ready", "gauge", "1 once the model is loaded and requests are served, else 0.",
           server.state == "ok" ? 1 : 0);
  w.metric("moetier_slots", "gauge", "Request slots (--parallel).", server.n_slots);
  w.metric("moetier_requests_queued", "gauge", "Requests waiting for a slot.", server.queue_depth);
  w.metric("moetier_requests_active", "gauge", "Requests running on a slot.", server.active);
  w.metric("moetier_requests_total", "counter", "Requests answered, any finish reason.", server.requests_total);
  w.metric("moetier_prompt_tokens_total", "counter", "Prompt tokens of the requests answered.",
           server.prompt_tokens_total);
  w.metric("moetier_prompt_tokens_reused_total", "counter",
           "Prompt tokens whose KV cache rows were kept from the slot's previous request (not recomputed).",
           server.reused_tokens_total);
  w.metric("moetier_completion_tokens_total", "counter", "Completion tokens of the requests answered.",
           server.completion_tokens_total);
  w.metric("moetier_prefill_tokens_total", "counter", "Prompt tokens the engine ran (prefill).", t.prefill_tokens);
  w.metric("moetier_decode_tokens_total", "counter", "Tokens the engine decoded.", t.decode_tokens);
  w.metric("moetier_prefill_seconds_total", "counter", "Wall time of the prefill steps, seconds.",
           t.prefill_ms / 1e3);
  w.metric("moetier_decode_seconds_total", "counter", "Wall time of the decode steps, seconds.", t.decode_ms / 1e3);
  w.metric("moetier_decode_tokens_per_second", "gauge",
           fmt::format("Decode rate over the last {} engine steps, tokens per second.", live.window),
           tps(r.decode_tokens, r.decode_ms));
  w.metric("moetier_prefill_tokens_per_second", "gauge",
           "Prefill rate of the prefills among the recent steps, else of the latest prefill, tokens per second.",
           live_prefill_tps(live));
  w.family("moetier_expert_cache_hit_ratio", "gauge",
           "Expert lookups found in the RAM cache over lookups, 0..1, over the recent steps and since the start "
           "(absent without a cache).");
  w.sample("moetier_expert_cache_hit_ratio", "window=\"recent\"", hit_ratio(live, r));
  w.sample("moetier_expert_cache_hit_ratio", "window=\"total\"", hit_ratio(live, t));
  w.family("moetier_expert_cache_lookups_total", "counter", "Expert lookups of the streaming store, by result.");
  w.sample("moetier_expert_cache_lookups_total", "result=\"hit\"", t.hits);
  w.sample("moetier_expert_cache_lookups_total", "result=\"miss\"", t.misses);
  w.metric("moetier_expert_read_bytes_total", "counter", "Bytes the expert store read from the model file.",
           t.read_bytes);
  w.metric("moetier_expert_read_bytes_per_token", "gauge",
           "Expert bytes read per decode token over the recent steps, bytes.", read_per_token(r));
  w.metric("moetier_expert_stall_seconds_total", "counter",
           "Time the compute thread waited for expert reads, seconds.", t.stall_ms / 1e3);
  w.metric("moetier_stall_ratio", "gauge",
           "Share of the recent steps' wall time spent waiting for expert reads, 0..1.", stall_ratio(r));
  w.metric("moetier_expert_swaps_total", "counter", "Adaptive tier swap-ins that landed.", t.swaps);
  w.family("moetier_tier_bytes", "gauge",
           "Expert bytes per tier: held by the RAM cache, the RAM cache's capacity, resident in the file mapping.");
  w.sample("moetier_tier_bytes", "tier=\"ram_cache\"", live.cache_resident_bytes);
  w.sample("moetier_tier_bytes", "tier=\"ram_cache_capacity\"", live.cache_capacity_bytes);
  w.sample("moetier_tier_bytes", "tier=\"mapped\"", live.mapped_expert_bytes);
  return w.take();
}

}  // namespace moetier::server
