#include "engine/expert_setup.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include <fmt/format.h>

#include "moe/adapt_rule.h"
#include "moe/cache_policy.h"
#include "moe/dense_weights.h"
#include "moe/expert_layout.h"
#include "moe/expert_store.h"
#include "moe/placement.h"
#include "util/error.h"

namespace moetier::engine {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

bool is_adaptive(const EngineConfig& cfg) {
  return cfg.cache_policy == "adaptive" || cfg.cache_policy == "adaptive-tuned";
}

}  // namespace

moe::PolicyParams adapt_params(const EngineConfig& cfg, int64_t cache_slots, int64_t total_experts,
                               moe::SlowTier slow, const DecisionLog& log) {
  moe::AdaptTierInputs in;
  in.fast_entries = cache_slots;
  in.total_entries = total_experts;
  in.slow = slow;
  in.force_tuned = cfg.adapt_tuned || cfg.cache_policy == "adaptive-tuned";
  const moe::AdaptDecision d = moe::decide_adapt(in);
  moe::PolicyParams p = d.params;
  log("adapt-tuned", d.reason);
  if (cfg.adapt_every) p.adapt_every = *cfg.adapt_every;
  if (cfg.adapt_swaps) p.adapt_swaps = *cfg.adapt_swaps;
  if (cfg.adapt_decay) p.adapt_decay = *cfg.adapt_decay;
  if (cfg.adapt_every || cfg.adapt_swaps || cfg.adapt_decay) {
    log("adaptive", fmt::format("every {} rounds, {} swaps, x{:g} (explicit --adapt-* values win)", p.adapt_every,
                                p.adapt_swaps, p.adapt_decay));
  }
  return p;
}

namespace {

// Settings that must be right whether or not the experts end up streaming (a resident run ignores them, but a
// typo should not pass silently).
void check_stream_settings(const EngineConfig& cfg) {
  const auto names = run_policy_names();
  if (std::find(names.begin(), names.end(), cfg.cache_policy) == names.end()) {
    std::string list;
    for (const auto n : names) list += (list.empty() ? "" : ", ") + std::string(n);
    if (cfg.cache_policy == "static") {
      fail("--cache-policy static pins a hot list taken from a profile trace, which only `moetier replay --profile` "
           "reads; a run has none and its cache would never fill (use one of {})",
           list);
    }
    fail("--cache-policy '{}' is not one of {}", cfg.cache_policy, list);
  }
  if (!is_adaptive(cfg) && cfg.experts_vram_mib == 0 && cfg.experts_vram_pct <= 0 &&
      (cfg.adapt_every || cfg.adapt_swaps || cfg.adapt_decay || cfg.adapt_tuned)) {
    fail("--adapt-every/--adapt-swaps/--adapt-decay/--adapt-tuned apply to --cache-policy adaptive and to the VRAM "
         "tier (--experts-vram) only (got '{}')",
         cfg.cache_policy);
  }
  if (cfg.adapt_every && *cfg.adapt_every < 1) fail("--adapt-every {} must be at least 1 round", *cfg.adapt_every);
  if (cfg.adapt_swaps && *cfg.adapt_swaps < 0) fail("--adapt-swaps {} must be at least 0", *cfg.adapt_swaps);
  for (const auto& [flag, mib] : {std::pair{"--experts-vram", cfg.experts_vram_mib},
                                  std::pair{"--vram-reserve-mib", cfg.vram_reserve_mib}}) {
    if (mib > static_cast<int64_t>(kMaxMib)) fail("{} {} is more than {} MiB (1 EiB)", flag, mib, kMaxMib);
  }
  for (const auto& [flag, mib] : {std::pair{"--cache-mb", cfg.cache_mib.value_or(0)},
                                  std::pair{"--cache-floor-mb", cfg.cache_floor_mib},
                                  std::pair{"--cache-ceil-mb", cfg.cache_ceil_mib}}) {
    if (mib > kMaxMib) fail("{} {} is more than {} MiB (1 EiB)", flag, mib, kMaxMib);
  }
  if (cfg.adapt_decay && !(*cfg.adapt_decay > 0.0 && *cfg.adapt_decay <= 1.0)) {
    fail("--adapt-decay {} must be in (0, 1]", *cfg.adapt_decay);
  }
}

}  // namespace

std::function<void(std::string_view)> later_log(const EngineConfig& cfg) {
  return [sink = cfg.log](std::string_view line) {
    if (sink) {
      sink(line);
    } else {
      fmt::print(stderr, "{}\n", line);
    }
  };
}

ExpertSetup setup_experts(const gguf::GgufModel& file, const moe::ExpertLayout& layout, const EngineConfig& cfg,
                          int64_t n_expert_used, const ContextBytes& ctx_bytes, uint64_t mem_available,
                          const DecisionLog& log) {
  check_stream_settings(cfg);
  ExpertSetup out;
  if (layout.layers().empty()) {
    log("experts", "none (a dense model): every weight stays mapped");
    return out;
  }
  uint64_t file_bytes = 0;
  for (const auto& s : file.shards()) file_bytes += s.file_size;
  if (cfg.experts_vram_mib != 0 || cfg.experts_vram_pct > 0) {
    if (cfg.placement == moe::Placement::stream) {
      fail("--experts-vram keeps the experts outside VRAM in RAM: it does not run with --experts stream yet");
    }
    log("experts", "resident (--experts-vram: the experts outside VRAM stay in RAM)");
    return out;
  }
  const auto decision = moe::decide_placement(cfg.placement, file_bytes, ctx_bytes.total(), mem_available);
  log("experts", fmt::format("{} ({})", decision.stream ? "stream" : "resident", decision.reason));
  if (!decision.stream) {
    const auto fits = [&](uint64_t bytes) {
      return !moe::decide_placement(moe::Placement::automatic, bytes, ctx_bytes.total(), mem_available).stream;
    };
    out.fits_ram = fits(file_bytes);
    out.fits_beside_file = out.fits_ram && fits(file_bytes + layout.expert_total_bytes());
    return out;
  }

  moe::StreamingOptions so;
  so.policy = is_adaptive(cfg) ? "adaptive" : cfg.cache_policy;  // tuned or not is decided below
  so.lanes = cfg.io_lanes;
  if (cfg.io_engine) so.engine = *cfg.io_engine;
  so.overlap = cfg.overlap;
  if (cfg.expert_prefetch) {
    // One token's guess for one layer: n_expert_used experts (the override's, else the file's).
    const std::string arch = file.architecture();
    so.ahead_slots = static_cast<int>(
        n_expert_used > 0 ? n_expert_used : file.metadata().get_uint_or(arch + ".expert_used_count", 0));
  }
  so.direct = cfg.direct_io;
  so.n_expert_used = n_expert_used;
  // As the model repacks resident experts (model::ModelOptions::repack_experts): only where the CPU's integer
  // kernels compute every product (the GPU reads the file's layout; exact activations take the float kernels).
  so.pack_rows16 = cfg.repack && cfg.repack_experts && cfg.n_gpu_layers == 0 &&
                   cfg.rounding == quant::ActivationRounding::match_ggml;
  so.log = later_log(cfg);  // the store's own lines (I/O fallbacks), also during the run
  // One cache slot's bytes, which the auto budget and the adaptive rule count in (the store's own layout).
  const uint64_t slot_bytes = !cfg.cache_mib || is_adaptive(cfg) ? moe::ExpertStore(file).slot_bytes() : 0;
  if (!cfg.cache_mib) {
    const auto ac = moe::auto_cache(mem_available, layout.dense_total_bytes(), ctx_bytes.total(),
                                    slot_bytes, layout.n_experts_total(), cfg.cache_floor_mib * kMiB,
                                    cfg.cache_ceil_mib * kMiB);
    so.cache_bytes = ac.bytes;
    log("cache auto", ac.report);
  } else {
    so.cache_bytes = *cfg.cache_mib * kMiB;  // the store caps it at every expert
    log("cache", fmt::format("{} MiB as given", *cfg.cache_mib));
  }
  if (is_adaptive(cfg)) {
    const auto slots = std::min<int64_t>(static_cast<int64_t>(so.cache_bytes / slot_bytes),
                                         static_cast<int64_t>(layout.n_experts_total()));
    // The RAM cache over the model file: every swap-in is a drive read.
    so.policy_params =
        adapt_params(cfg, slots, static_cast<int64_t>(layout.n_experts_total()), moe::SlowTier::drive, log);
  }
  auto stream = std::make_unique<moe::StreamingExperts>(file, so);
  log("expert store", stream->describe());
  if (const auto* pol = stream->policy(); pol != nullptr && pol->cliff_guard_engaged()) {
    log("cliff guard", fmt::format("the cache's {} slots are fewer than one token's working set of {} experts, so "
                                   "plain LRU would evict every expert before its reuse; each layer keeps a protected "
                                   "share of {} experts",
                                   stream->cache_slots(), pol->working_set(), pol->layer_quota(0)));
  }
  const auto dense = moe::load_dense(file, stream->files(), cfg.dense_policy);
  log("dense weights", fmt::format("{}, {:.1f} MiB{}", moe::dense_policy_name(dense.policy),
                                   static_cast<double>(dense.dense_bytes) / static_cast<double>(kMiB),
                                   dense.loaded_bytes ? fmt::format(", loaded in {:.2f} s", dense.seconds) : ""));
  out.dense_weights = std::string(moe::dense_policy_name(dense.policy));
  out.stream = stream.get();
  out.source = std::move(stream);
  return out;
}

}  // namespace moetier::engine
