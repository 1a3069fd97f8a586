// `moetier replay TRACE... [--cache-mb N | --cache-experts N] [--policy NAME] ...`: replay route traces through
// an expert-cache policy and report hit rates, misses and bytes read, with the recording engine's batch
// semantics (src/sim/batches.h). The policies are the engine's own objects (src/moe/cache_policy.h). With
// --tier vram, the VRAM expert tier's bookkeeping instead (src/sim/vram_replay.h).
#include <algorithm>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "engine/engine_config.h"
#include "moe/adapt_rule.h"
#include "moe/cache_policy.h"
#include "moe/heat_profile.h"
#include "sim/batches.h"
#include "sim/hot_list.h"
#include "sim/replay.h"
#include "sim/vram_replay.h"
#include "trace/route_trace.h"
#include "util/error.h"

namespace moetier::cli {
namespace {

using nlohmann::json;

constexpr double kMiB = 1024.0 * 1024.0;

struct Opts {
  std::vector<std::string> traces;
  double cache_mb = 0;        // MiB
  int64_t cache_experts = 0;  // entries
  std::string policy = "lru";
  std::string phase = "all";
  bool json = false;
  std::string profile;
  int64_t static_warm = -1;  // decode steps
  int32_t adapt_every = 0;
  int32_t adapt_swaps = 0;
  double adapt_decay = 0;
  bool adapt_tuned = false;
  double lfu_decay = 0;
  bool cliff_guard = false;
  bool strict = false;
  std::string cache_warm;  // heat profile for a warm start
  std::string write_heat;  // heat profile to write from the replayed decode steps
  std::string tier = "ram";  // ram: the RAM expert cache; vram: the VRAM tier
};

// The decode hit rate over the warm-up windows a warm start is judged on, and after them.
constexpr int64_t kWindows[] = {8, 16, 32};

json to_json(const std::string& trace, const sim::ReplayResult& r, bool swaps) {
  json j;
  j["trace"] = trace;
  j["policy"] = r.policy;
  j["cache_bytes"] = r.cache_bytes;
  j["cache_mib"] = static_cast<double>(r.cache_bytes) / kMiB;
  j["cache_experts"] = r.cache_entries;
  j["hit_rate"] = {{"all", r.hit_pct_all()}, {"prefill", r.prefill.hit_pct()}, {"decode", r.decode.hit_pct()}};
  j["lookups"] = {{"prefill", r.prefill.lookups}, {"decode", r.decode.lookups}};
  j["prefill_tokens"] = r.prefill_tokens;
  j["decode_tokens"] = r.decode_tokens;
  j["misses_per_layer_step"] = r.misses_per_layer_step();
  j["decode_misses_by_layer"] = r.decode_misses_by_layer;
  j["read_mib_per_token"] = r.read_mib_per_token();
  j["prefill_read_mib"] = static_cast<double>(r.prefill.miss_bytes) / kMiB;
  j["residency_match"] = r.residency_match_pct();
  j["cliff_guard_engaged"] = r.cliff_guard_engaged;
  j["warm_experts"] = r.warm_experts;
  json windows;
  for (const int64_t w : kWindows) windows[fmt::format("first_{}", w)] = r.decode_window(0, w).hit_pct();
  windows[fmt::format("after_{}", kWindows[2])] = r.decode_window(kWindows[2], r.decode_tokens).hit_pct();
  j["decode_hit_rate_windows"] = windows;
  j["working_set_mib"] = static_cast<double>(r.working_set_bytes) / kMiB;
  if (swaps) {
    j["swaps_per_round"] = r.swaps_per_round();
    j["swap_mib"] = static_cast<double>(r.swap_bytes) / kMiB;
    j["swap_passes"] = r.swap_passes;
    j["rounds"] = r.rounds;
  }
  return j;
}

void print_text(const std::string& trace, const sim::BatchedTrace& t, const sim::ReplayResult& r, bool swaps) {
  fmt::print("{}: {} ({} layers x {} experts, top-{}), {} prompt + {} decode tokens replayed\n", trace,
             t.header.arch, t.header.n_moe_layers, t.header.n_expert, t.header.n_expert_used, r.prefill_tokens,
             r.decode_tokens);
  if (r.cache_bytes > 0) {
    fmt::print("  policy {}, cache {:.0f} MiB{} (one token's working set {:.0f} MiB{})\n", r.policy,
               static_cast<double>(r.cache_bytes) / kMiB,
               t.header.cache ? fmt::format(" = {} slots of {} bytes", r.cache_entries, t.header.cache->slot_bytes)
                              : std::string(),
               static_cast<double>(r.working_set_bytes) / kMiB, r.cliff_guard_engaged ? ", cliff guard engaged" : "");
  } else {
    fmt::print("  policy {}, cache {} experts{}\n", r.policy, r.cache_entries,
               r.cliff_guard_engaged ? " (cliff guard engaged)" : "");
  }
  if (r.warm_experts > 0) fmt::print("  warm start: {} experts resident before the first token\n", r.warm_experts);
  fmt::print("  hit rate: all {:.1f}%, prefill {:.1f}%, decode {:.1f}%\n", r.hit_pct_all(), r.prefill.hit_pct(),
             r.decode.hit_pct());
  fmt::print("  decode hit rate over the first {} / {} / {} tokens: {:.1f}% / {:.1f}% / {:.1f}%, after {}: {:.1f}%\n",
             kWindows[0], kWindows[1], kWindows[2], r.decode_window(0, kWindows[0]).hit_pct(),
             r.decode_window(0, kWindows[1]).hit_pct(), r.decode_window(0, kWindows[2]).hit_pct(), kWindows[2],
             r.decode_window(kWindows[2], r.decode_tokens).hit_pct());
  fmt::print("  decode misses per layer per step: {:.3f}\n", r.misses_per_layer_step());
  fmt::print("  read per decode token: {:.1f} MiB (prefill read {:.1f} MiB)\n", r.read_mib_per_token(),
             static_cast<double>(r.prefill.miss_bytes) / kMiB);
  if (swaps) {
    fmt::print("  background swaps: {:.2f} per round, {:.1f} MiB in all, {} passes over {} rounds\n",
               r.swaps_per_round(), static_cast<double>(r.swap_bytes) / kMiB, r.swap_passes, r.rounds);
  }
  fmt::print("  recorded residency column reproduced on {:.2f}% of {} rows\n", r.residency_match_pct(),
             r.rows_compared);
}

// One slot of the engine's VRAM tier holds gate, up and down each from a 256-byte boundary (moe/vram_tier.h); the
// trace knows only each layer's expert bytes, so a slot is taken as the largest of them plus the most padding.
uint64_t vram_slot_bytes(const trace::TraceHeader& h) {
  uint64_t most = 0;
  for (const trace::TraceLayer& l : h.layers) most = std::max(most, l.expert_bytes);
  return (most + 3 * 255) / 256 * 256;
}

void run_replay_vram(const Opts& o, const CLI::App& cmd) {
  for (const char* flag : {"--policy", "--profile", "--static-warm", "--lfu-decay", "--cliff-guard", "--cache-warm",
                           "--write-heat", "--strict"}) {
    if (cmd.count(flag)) fail("replay: {} does not apply to --tier vram (its policy is the adaptive tier's)", flag);
  }
  json all = json::array();
  for (const std::string& path : o.traces) {
    const sim::BatchedTrace t = sim::make_batches(trace::read_route_trace(path));
    const uint64_t slot = vram_slot_bytes(t.header);
    const int64_t total = static_cast<int64_t>(t.header.n_moe_layers) * t.header.n_expert;
    sim::VramReplayOptions vo;
    vo.slots = o.cache_experts > 0 ? o.cache_experts
                                   : static_cast<int64_t>(static_cast<uint64_t>(o.cache_mb * kMiB) / slot);
    vo.slots = std::min(vo.slots, total);
    if (vo.slots < 1) fail("replay: --cache-mb {} holds no VRAM slot of {} bytes", o.cache_mb, slot);
    vo.decode_only = o.phase == "decode";
    // As the engine decides: the rule over RAM (swaps are copies), then explicit values.
    const moe::AdaptDecision d = moe::decide_adapt({vo.slots, total, moe::SlowTier::ram, o.adapt_tuned});
    vo.params = d.params;
    if (cmd.count("--adapt-every")) vo.params.adapt_every = o.adapt_every;
    if (cmd.count("--adapt-swaps")) vo.params.adapt_swaps = o.adapt_swaps;
    if (cmd.count("--adapt-decay")) vo.params.adapt_decay = o.adapt_decay;
    const sim::VramReplayResult r = sim::replay_vram(t, vo);
    const auto counts = [](const moe::SlotTierCounters& c) {
      return json{{"lookups", c.lookups}, {"hits", c.hits},           {"fills", c.fills},
                  {"cpu", c.misses_slow}, {"hit_rate", 100.0 * c.hit_rate()},
                  {"swaps", c.swaps_landed}, {"swap_mib", static_cast<double>(c.swap_bytes) / kMiB}};
    };
    if (o.json) {
      all.push_back({{"trace", path},
                     {"tier", "vram"},
                     {"slots", r.slots},
                     {"slot_bytes", o.cache_experts > 0 ? 0 : slot},
                     {"adapt", d.reason},
                     {"adapt_every", vo.params.adapt_every},
                     {"adapt_swaps", vo.params.adapt_swaps},
                     {"adapt_decay", vo.params.adapt_decay},
                     {"prefill_tokens", r.prefill_tokens},
                     {"decode_tokens", r.decode_tokens},
                     {"prefill", counts(r.prefill)},
                     {"decode", counts(r.decode)},
                     {"cpu_per_layer_round", r.cpu_per_layer_round()}});
      continue;
    }
    fmt::print("{}: {} ({} layers x {} experts, top-{}), {} prompt + {} decode tokens replayed\n", path,
               t.header.arch, t.header.n_moe_layers, t.header.n_expert, t.header.n_expert_used, r.prefill_tokens,
               r.decode_tokens);
    fmt::print("  VRAM tier: {} slots ({:.0f}% of {} experts){}; adaptive every {} rounds, {} swaps, x{:g} ({})\n",
               r.slots, 100.0 * static_cast<double>(r.slots) / static_cast<double>(total), total,
               o.cache_experts > 0 ? std::string()
                                   : fmt::format(" of about {} bytes (each part from a 256-byte boundary)", slot),
               vo.params.adapt_every, vo.params.adapt_swaps, vo.params.adapt_decay, d.reason);
    for (const auto& [name, c] : {std::pair{"prefill", r.prefill}, std::pair{"decode", r.decode}}) {
      fmt::print("  {}: {} lookups, hit rate {:.1f}%: {} hits, {} fills (copied into a slot), {} computed by the "
                 "CPU; {} swap-ins landed ({:.1f} MiB)\n",
                 name, c.lookups, 100.0 * c.hit_rate(), c.hits, c.fills, c.misses_slow, c.swaps_landed,
                 static_cast<double>(c.swap_bytes) / kMiB);
    }
    fmt::print("  decode misses computed by the CPU per layer and round: {:.3f}\n", r.cpu_per_layer_round());
  }
  if (o.json) fmt::print("{}\n", (all.size() == 1 ? all[0] : all).dump(2));
}

void run_replay(const Opts& o, const CLI::App& cmd) {
  if ((o.cache_mb > 0) == (o.cache_experts > 0)) fail("replay: give exactly one of --cache-mb and --cache-experts (> 0)");
  if (o.tier == "vram") return run_replay_vram(o, cmd);
  sim::ReplayOptions ro;
  ro.policy = o.policy;
  ro.cache_bytes = static_cast<uint64_t>(o.cache_mb * kMiB);
  ro.cache_entries = o.cache_experts;
  ro.decode_only = o.phase == "decode";
  ro.cliff_guard = o.cliff_guard;
  ro.strict = o.strict;
  if (o.adapt_tuned) {
    const moe::PolicyParams t = moe::PolicyParams::adaptive_tuned();
    ro.params.adapt_every = t.adapt_every;
    ro.params.adapt_swaps = t.adapt_swaps;
    ro.params.adapt_decay = t.adapt_decay;
  }
  if (cmd.count("--adapt-every")) ro.params.adapt_every = o.adapt_every;
  if (cmd.count("--adapt-swaps")) ro.params.adapt_swaps = o.adapt_swaps;
  if (cmd.count("--adapt-decay")) ro.params.adapt_decay = o.adapt_decay;
  if (cmd.count("--lfu-decay")) ro.params.lfu_decay = o.lfu_decay;
  const bool is_static = o.policy == "static";
  if (is_static && o.profile.empty() && o.static_warm < 0) {
    fail("replay: --policy static needs --profile TRACE or --static-warm N");
  }
  if (!is_static && (!o.profile.empty() || o.static_warm >= 0)) {
    fail("replay: --profile and --static-warm apply to --policy static only");
  }
  std::optional<moe::HeatProfile> warm;
  if (!o.cache_warm.empty()) warm = moe::HeatProfile::load(o.cache_warm);
  if (!o.write_heat.empty() && o.traces.size() != 1) {
    fail("replay: --write-heat takes the counts of one trace, got {}", o.traces.size());
  }
  if (std::error_code ec; !o.write_heat.empty() && std::filesystem::is_directory(o.write_heat, ec)) {
    fail("--write-heat {}: is a directory, not a file", o.write_heat);
  }
  std::vector<moe::ExpertKey> profile_hot;
  if (!o.profile.empty()) profile_hot = sim::hot_list(sim::make_batches(trace::read_route_trace(o.profile)));

  json all = json::array();
  for (const std::string& path : o.traces) {
    const sim::BatchedTrace t = sim::make_batches(trace::read_route_trace(path));
    sim::ReplayOptions per = ro;
    if (is_static) {
      per.params.static_hot = o.profile.empty() ? sim::hot_list(t, o.static_warm) : profile_hot;
      for (const moe::ExpertKey& k : per.params.static_hot) {
        if (k.layer >= t.header.n_moe_layers || k.expert >= t.header.n_expert) {
          fail("replay: profile {} does not match trace {} (layer {} expert {} out of its {} x {})", o.profile, path,
               k.layer, k.expert, t.header.n_moe_layers, t.header.n_expert);
        }
      }
    }
    if (warm) {
      const moe::HeatModel m{"", t.header.arch, 0, t.header.n_moe_layers, t.header.n_expert};
      if (const std::string why = warm->mismatch(m); !why.empty()) {
        fail("replay: --cache-warm {} does not fit trace {}: {}", o.cache_warm, path, why);
      }
      per.warm = warm->hottest();
    }
    per.count_heat = !o.write_heat.empty();
    const sim::ReplayResult r = sim::replay(t, per);
    if (r.heat) r.heat->save(o.write_heat);
    const bool swaps = o.policy.starts_with("adaptive");
    if (o.json) {
      all.push_back(to_json(path, r, swaps));
    } else {
      print_text(path, t, r, swaps);
    }
  }
  if (o.json) fmt::print("{}\n", (all.size() == 1 ? all[0] : all).dump(2));
}

}  // namespace

void register_replay(CLI::App& app) {
  auto* cmd = app.add_subcommand("replay", "replay route traces through an expert-cache policy (hit rates, bytes read)");
  auto o = std::make_shared<Opts>();
  // Every online policy of the engine, and the offline optimum only the simulator has.
  std::vector<std::string> names(moe::policy_names().begin(), moe::policy_names().end());
  names.emplace_back("belady");
  std::string policies;
  for (const std::string& n : names) policies += (policies.empty() ? "" : ", ") + n;
  cmd->add_option("TRACE", o->traces, "route_trace v1 files (../shared/traces/...)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--cache-mb", o->cache_mb,
                  "expert cache budget in MiB (entries weigh their layer's expert_bytes; a trace moetier recorded: "
                  "whole slots of its slot_bytes, strict, its cliff guard and prefill chunks, as the engine ran)")
      ->check(real<double>(0.0, static_cast<double>(engine::kMaxMib), Ends::open_low));
  cmd->add_option("--cache-experts", o->cache_experts, "expert cache size in slots (entries weigh 1)")
      ->transform(whole<int64_t>(1));
  cmd->add_option("--policy", o->policy, "cache policy: " + policies + " (belady: the offline optimum)")
      ->capture_default_str()
      ->check(one_of(names));
  cmd->add_option("--phase", o->phase, "all: replay prefill then decode; decode: replay decode only (cold start)")
      ->capture_default_str()
      ->check(one_of({"all", "decode"}));
  cmd->add_flag("--json", o->json, "print one JSON object per trace (an array for several traces)");
  cmd->add_option("--profile", o->profile, "static: take the hot list from this trace's decode steps")
      ->check(CLI::ExistingFile);
  cmd->add_option("--static-warm", o->static_warm, "static: take the hot list from the first N decode steps")
      ->transform(whole<int64_t>(0));
  cmd->add_option("--adapt-every", o->adapt_every, "adaptive: decode steps (rounds) between swap passes [4]")
      ->transform(whole<int32_t>(1));
  cmd->add_option("--adapt-swaps", o->adapt_swaps, "adaptive: most swap-ins per pass [96]")
      ->transform(whole<int32_t>(0));
  cmd->add_option("--adapt-decay", o->adapt_decay, "adaptive: count multiplier after each pass, in (0, 1] [0.7]")
      ->check(real<double>(0.0, 1.0, Ends::open_low));
  cmd->add_flag("--adapt-tuned", o->adapt_tuned, "adaptive: the tuned parameters (2, 192, 0.92)");
  cmd->add_option("--lfu-decay", o->lfu_decay, "lfu-decay: count fade per step, in (0, 1] [0.9]")
      ->check(real<double>(0.0, 1.0, Ends::open_low));
  cmd->add_flag("--cliff-guard", o->cliff_guard,
                "protect a per-layer quota when the cache is below one token's working set (the engine's default)");
  cmd->add_option("--cache-warm", o->cache_warm,
                  "start with the hottest experts of this heat profile resident (as `run --cache-warm FILE`): judge "
                  "a profile on a trace by the decode hit rate of the first 8/16/32 tokens")
      ->check(CLI::ExistingFile);
  cmd->add_option("--write-heat", o->write_heat,
                  "write the heat profile of the trace's decode steps (as a streamed run counts them) to this file");
  cmd->add_flag("--strict", o->strict, "strict capacity (fixed slots) instead of the recording engine's budget rule");
  cmd->add_option("--tier", o->tier,
                  "ram: the RAM expert cache (--policy); vram: the VRAM expert tier as `run --experts-vram` runs it "
                  "(fills into free slots, misses computed by the CPU, the adaptive tier's spread swaps; its "
                  "parameters decided as the engine decides them, --adapt-* win)")
      ->capture_default_str()
      ->check(one_of({"ram", "vram"}));
  cmd->callback([o, cmd] { run_replay(*o, *cmd); });
}

}  // namespace moetier::cli
