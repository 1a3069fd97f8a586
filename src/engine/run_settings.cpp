#include "engine/run_settings.h"

#include <fmt/format.h>

#include "engine/engine.h"
#include "moe/placement.h"

namespace moetier::engine {
namespace {

std::string mib(uint64_t bytes) { return fmt::format("{:.2f}", static_cast<double>(bytes) / 1048576.0); }

}  // namespace

std::vector<std::pair<std::string, std::string>> resolved_settings(const Engine& e) {
  const EngineConfig& cfg = e.config();
  const model::ModelInfo& info = e.info();
  const moe::StreamingExperts* st = e.stream();
  std::vector<std::pair<std::string, std::string>> c;
  c.emplace_back("command", cfg.telemetry.command);
  c.emplace_back("experts", info.n_moe_layers == 0 ? "none (dense model)" : st != nullptr ? "stream" : "resident");
  c.emplace_back("experts_flag", std::string(moe::placement_name(cfg.placement)));
  if (st != nullptr) {
    c.emplace_back("cache_mib", mib(st->slot_bytes() * static_cast<uint64_t>(st->cache_slots())));
    c.emplace_back("cache_mb_flag", cfg.cache_mib ? std::to_string(*cfg.cache_mib) : std::string("auto"));
    c.emplace_back("cache_slots", std::to_string(st->cache_slots()));
    c.emplace_back("slot_mib", mib(st->slot_bytes()));
    c.emplace_back("working_slots", std::to_string(st->working_slots()));
    c.emplace_back("policy", st->policy() ? std::string(st->policy()->name()) : std::string("none (no cache)"));
    c.emplace_back("cliff_guard", st->policy() && st->policy()->cliff_guard_engaged() ? "engaged" : "off");
    c.emplace_back("lanes", std::to_string(st->engine().lanes()));
    c.emplace_back("io_engine", std::string(moe::io::engine_name(st->engine().kind())));
    c.emplace_back("overlap", cfg.overlap ? "on" : "off");
    c.emplace_back("expert_prefetch", info.expert_prefetch.empty() ? "off" : info.expert_prefetch);
    c.emplace_back("direct_io", st->files().direct_note());
    c.emplace_back("cache_warm", std::string(e.cache_warm()));
  }
  c.emplace_back("dense_weights", std::string(e.dense_weights()));
  c.emplace_back("ctx", std::to_string(info.n_ctx));
  c.emplace_back("batch", std::to_string(info.n_batch));
  c.emplace_back("kv_type", std::string(model::kv_type_name(cfg.kv_type)));
  c.emplace_back("n_expert_used", std::to_string(info.n_expert_used));
  c.emplace_back("n_expert_used_flag", cfg.n_expert_used > 0 ? std::to_string(cfg.n_expert_used) : "model");
  if (cfg.rounding == quant::ActivationRounding::exact) c.emplace_back("activations", "exact (float)");
  c.emplace_back("repack", std::string(e.repack()));
  if (cfg.n_gpu_layers > 0) {
    c.emplace_back("n_gpu_layers", std::to_string(cfg.n_gpu_layers));
    c.emplace_back("n_cpu_moe", std::to_string(cfg.n_cpu_moe));
    c.emplace_back("gpu", info.gpu);
  }
  if (!info.experts_vram.empty()) {
    c.emplace_back("experts_vram", info.experts_vram);
    c.emplace_back("vram_misses", std::string(moe::miss_route_name(cfg.vram_misses)));
  }
  if (!cfg.route_replay.empty()) c.emplace_back("route_replay", cfg.route_replay);
  for (const auto& kv : cfg.telemetry.settings) c.push_back(kv);
  return c;
}

}  // namespace moetier::engine
