#include "cli/model_flags.h"

#include <cstdlib>
#include <filesystem>

#include "cli/flag_checks.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "moe/dense_weights.h"
#include "moe/placement.h"
#include "moe/tier_costs.h"
#include "util/error.h"

namespace moetier::cli {
namespace {

// parse(value), or an error that names the flag and the value before the parser's own sentence.
template <typename Parse>
auto parse_flag(const char* flag, const std::string& value, Parse parse) {
  try {
    return parse(value);
  } catch (const Error& e) {
    fail("{} '{}': {}", flag, value, e.what());
  }
}

}  // namespace

void ModelFlags::add_to(CLI::App& cmd, const char* ctx_help) {
  cmd.add_option("-m,--model", model, "GGUF model file (for a split model, its first shard)")->required();
  cmd.add_option("-c,--ctx-size", n_ctx,
                 ctx_help != nullptr ? ctx_help
                                     : "context size in tokens (KV cache positions); 0: the model's training context, "
                                       "at most 4096")
      ->capture_default_str()
      ->transform(whole<int64_t>(0));
  cmd.add_option("-b,--batch-size", n_batch, "most prompt tokens per forward pass (prefill chunk)")
      ->capture_default_str()
      ->transform(whole<int64_t>(1));
  cmd.add_option("-t,--threads", threads, "threads for the matrix products (0: one per hardware thread)")
      ->capture_default_str()
      ->transform(whole<int>(0, 1024));
  cmd.add_option("--kv-type", kv_type, "KV cache element type: f16 (as the reference engine) or f32")
      ->capture_default_str();
  cmd.add_option("--n-expert-used", n_expert_used,
                 "override the model's top-k experts per token (lossy: changes the model's output; at most the "
                 "model's experts per layer)")
      ->transform(whole<int64_t>(1));
  cmd.add_flag("--no-repack", no_repack,
               "keep the Q8_0, Q4_K-Q6_K, MXFP4 and IQ4_XS matrices (dense, resident routed experts, streamed "
               "experts in the cache) as the file stores them instead of repacked for the AVX512-VNNI kernels (the "
               "same results, slower; as llama.cpp)");
  cmd.add_flag("--no-repack-experts", no_repack_experts,
               "repack only the dense matrices: keep the resident routed experts mapped as the file stores them "
               "(loads faster; they are repacked only where the model fits in RAM anyway) and streamed experts "
               "in the cache as read");
  const char* gg = "GPU (Vulkan)";
  cmd.add_option("--n-gpu-layers,--gpu-layers", n_gpu_layers,
                 "-ngl: blocks on the GPU, counted from the last block (as llama.cpp); more than the model's "
                 "block count (99) also puts the output head there. llama, Mixtral, qwen3moe and gpt-oss run "
                 "those blocks whole on the GPU, other architectures their weight products; 0: CPU only")
      ->capture_default_str()
      ->transform(whole<int>(0, 1 << 20))
      ->group(gg);
  cmd.add_option("--n-cpu-moe", n_cpu_moe,
                 "keep the routed experts of the first N blocks in RAM, computed by the CPU, with -ngl (as llama.cpp)")
      ->capture_default_str()
      ->transform(whole<int>(0, 1 << 20))
      ->group(gg);
  cmd.add_option("--device", gpu_device, "the Vulkan device for -ngl, an index that `moetier devices` lists")
      ->capture_default_str()
      ->transform(whole<int>(0, 1024))
      ->group(gg);
  cmd.add_option("--experts-vram", experts_vram,
                 "the VRAM expert tier, with -ngl 99: MiB of GPU memory for slots of routed experts, P% (slots for "
                 "that share of the experts), or auto (the device's memory minus --vram-reserve-mib, the weights "
                 "and the KV cache); experts outside VRAM stay in RAM, computed by the CPU or copied for their "
                 "layer (--vram-misses); the adaptive tier (--adapt-*) swaps the most-routed in; off: none")
      ->capture_default_str()
      ->type_name("off|auto|MIB|P%")
      ->group(gg);
  cmd.add_option("--vram-misses", vram_misses,
                 "where the VRAM tier's misses run: auto (the CPU pool or over PCIe into a staging slot, as the "
                 "measured costs say), cpu (all on the CPU pool), pcie (over PCIe while staging slots last); cpu and "
                 "pcie fix where every expert runs, so a run repeats its bits")
      ->capture_default_str()
      ->group(gg);
  cmd.add_option("--vram-reserve-mib", vram_reserve_mib, "GPU memory --experts-vram auto leaves free, MiB")
      ->capture_default_str()
      ->transform(whole<int64_t>(0, static_cast<int64_t>(engine::kMaxMib)))
      ->group(gg);
  const char* g = "Expert streaming";
  cmd.add_option("--experts", experts,
                 "resident: every expert in RAM (mapped; Q8_0, Q4_K-Q6_K, MXFP4 and IQ4_XS ones repacked where the "
                 "model fits, see --no-repack-experts); stream: read routed experts from the file into the expert "
                 "cache; auto: stream when the model does not fit in available RAM")
      ->capture_default_str()
      ->group(g);
  cmd.add_option("--cache-mb", cache_mb,
                 "expert cache budget in MiB when streaming: auto (available RAM minus --cache-floor-mb, dense "
                 "weights and KV cache), 0 (no cache: every expert read at every use) or N")
      ->capture_default_str()
      ->transform(word_or_whole<uint64_t>("auto", 0, engine::kMaxMib))
      ->group(g);
  const auto mib_range = whole<uint64_t>(0, engine::kMaxMib);
  cmd.add_option("--cache-floor-mb", cache_floor_mb, "RAM left to the system by --cache-mb auto, MiB")
      ->capture_default_str()
      ->transform(mib_range)
      ->group(g);
  cmd.add_option("--cache-ceil-mb", cache_ceil_mb, "upper bound of --cache-mb auto, MiB (0: none)")
      ->capture_default_str()
      ->transform(mib_range)
      ->group(g);
  std::string policies;
  for (const std::string_view n : engine::run_policy_names()) policies += (policies.empty() ? "" : ", ") + std::string(n);
  cmd.add_option("--cache-policy", cache_policy,
                 "expert cache policy: " + policies + " (adaptive: background swaps, see --adapt-*)")
      ->capture_default_str()
      ->group(g);
  cmd.add_option("--adapt-every", adapt_every,
                 "adaptive (the RAM cache, and the VRAM tier): decode steps (rounds) between swap passes [4, tuned 2]")
      ->transform(whole<int32_t>(1))
      ->group(g);
  cmd.add_option("--adapt-swaps", adapt_swaps,
                 "adaptive (the RAM cache, and the VRAM tier): most swap-ins per pass [96, tuned 192]")
      ->transform(whole<int32_t>(0))
      ->group(g);
  cmd.add_option("--adapt-decay", adapt_decay,
                 "adaptive (the RAM cache, and the VRAM tier): count multiplier after each pass, in (0, 1] [0.7, "
                 "tuned 0.92]")
      ->check(real<double>(0.0, 1.0, Ends::open_low))
      ->group(g);
  cmd.add_flag("--adapt-tuned", adapt_tuned,
               "adaptive (the RAM cache, and the VRAM tier): force the tuned parameters (every 2 rounds, 192 swaps, "
               "x0.92); by default they apply only when the cache holds 20-60% of the experts and swaps would not "
               "read the drive")
      ->group(g);
  cmd.add_option("--route-replay", route_replay,
                 "take every MoE layer's experts from this route_trace v1 file instead of the router (prompt tokens "
                 "replay its prefill rows, generated tokens its decode steps): lossy, for benchmarks")
      ->check(CLI::ExistingFile);
  cmd.add_option("--io-threads", io_threads, "parallel read lanes for expert reads")
      ->capture_default_str()
      ->transform(whole<int>(1, 64))
      ->group(g);
  cmd.add_option("--io-engine", io_engine,
                 "expert read engine: pread (a thread pool; measured faster here) or io_uring")
      ->group(g);
  cmd.add_flag("--overlap,!--no-overlap", overlap,
               "compute cached experts while missing ones are read, each as its read lands")
      ->capture_default_str()
      ->group(g);
  cmd.add_option("--expert-prefetch", expert_prefetch,
                 "next: in decode, start reading the experts the next MoE layer's router names on each layer's "
                 "output before that layer routes (streamed experts; an experiment, slower where measured: "
                 "docs/design.md); off")
      ->capture_default_str()
      ->check(CLI::IsMember({"next", "off"}))
      ->group(g);
  cmd.add_flag("--no-odirect", no_odirect, "read experts through the page cache instead of direct I/O")->group(g);
  cmd.add_option("--dense-weights", dense_weights,
                 "non-expert weights when streaming: mmap (page cache), warm (one sequential read at load), anon "
                 "(direct I/O into memory the kernel cannot drop)")
      ->capture_default_str()
      ->group(g);
  cmd.add_option("--heat", heat,
                 "heat profile (decayed decode routing counts per expert) of a streamed run, written at its end and "
                 "every 5 min of chat or serve, for the next run's --cache-warm: auto (in $MOETIER_CACHE_DIR, "
                 "$XDG_CACHE_HOME/moetier or ~/.cache/moetier, per model file), off, or a file")
      ->capture_default_str()
      ->envname("MOETIER_HEAT")
      ->check(CLI::Validator([](std::string& v) { return v.empty() ? std::string("an empty path") : std::string(); },
                             ""))
      ->type_name("auto|off|FILE")
      ->group(g);
  cmd.add_option("--cache-warm", cache_warm,
                 "fill the expert cache with the hottest experts of a heat profile before the first token, read in "
                 "file order: auto (the --heat profile when there is one that fits the model), off (a cold start), "
                 "or a profile file")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](std::string& v) {
            std::error_code ec;
            if (v == "auto" || v == "off" || std::filesystem::is_regular_file(v, ec)) return std::string();
            return "not auto, off or an existing file: " + v;
          },
          ""))
      ->type_name("auto|off|FILE")
      ->group(g);
}

engine::EngineConfig ModelFlags::config() const {
  engine::EngineConfig c;
  c.model = model;
  c.n_ctx = n_ctx;
  c.n_batch = n_batch;
  c.threads = threads;
  c.repack = !no_repack;
  c.repack_experts = !no_repack_experts;
  c.kv_type = parse_flag("--kv-type", kv_type, model::parse_kv_type);
  c.n_expert_used = n_expert_used;
  c.n_gpu_layers = n_gpu_layers;
  c.n_cpu_moe = n_cpu_moe;
  c.gpu_device = gpu_device;
  if (experts_vram == "auto") {
    c.experts_vram_mib = model::kVramAuto;
  } else if (!experts_vram.empty() && experts_vram.back() == '%') {
    char* end = nullptr;
    const std::string num = experts_vram.substr(0, experts_vram.size() - 1);
    const double pct = std::strtod(num.c_str(), &end);
    if (num.empty() || end != num.c_str() + num.size() || !(pct > 0 && pct <= 100))
      fail("--experts-vram {} is not a percentage in (0, 100]", experts_vram);
    c.experts_vram_pct = pct;
  } else if (experts_vram != "off") {
    const auto mib = parse_whole<int64_t>(experts_vram, 1, static_cast<int64_t>(engine::kMaxMib));
    if (!mib) {
      fail("--experts-vram {} is not off, auto, a percentage (30%) or {}", experts_vram,
           whole_phrase<int64_t>(1, static_cast<int64_t>(engine::kMaxMib)));
    }
    c.experts_vram_mib = *mib;
  }
  c.vram_reserve_mib = vram_reserve_mib;
  c.vram_misses = parse_flag("--vram-misses", vram_misses, moe::parse_miss_route);
  c.placement = parse_flag("--experts", experts, moe::parse_placement);
  if (cache_mb != "auto") {
    c.cache_mib = parse_whole<uint64_t>(cache_mb, 0, engine::kMaxMib);
    if (!c.cache_mib) fail("--cache-mb {} is not auto or {}", cache_mb, whole_phrase<uint64_t>(0, engine::kMaxMib));
  }
  c.cache_floor_mib = cache_floor_mb;
  c.cache_ceil_mib = cache_ceil_mb;
  c.cache_policy = cache_policy;
  c.adapt_every = adapt_every;
  c.adapt_swaps = adapt_swaps;
  c.adapt_decay = adapt_decay;
  c.adapt_tuned = adapt_tuned;
  c.route_replay = route_replay;
  c.io_lanes = io_threads;
  if (!io_engine.empty()) c.io_engine = parse_flag("--io-engine", io_engine, moe::io::parse_engine);
  c.overlap = overlap;
  c.expert_prefetch = expert_prefetch == "next";
  c.direct_io = !no_odirect;
  c.dense_policy = parse_flag("--dense-weights", dense_weights, moe::parse_dense_policy);
  c.heat = heat;
  c.cache_warm = cache_warm;
  return c;
}

void TelemetryFlags::add_to(CLI::App& cmd) {
  const char* g = "Telemetry";
  cmd.add_option("--csv", csv,
                 "write per-step metrics (one row per decode token, one for each prefill) and the run's "
                 "configuration and totals to this CSV file (moetier_metrics v1; `moetier report` draws it)")
      ->group(g);
  cmd.add_flag("--progress{text}", progress,
               "one line per step on stderr: tok/s, hit rate, MiB read, stall; --progress=json for JSON lines")
      ->group(g);
  cmd.add_option("--route-trace", route_trace,
                 "write every routed (step, layer, slot) to this file (route_trace v1, the input of `moetier replay`)")
      ->group(g);
  cmd.add_option("--steady-skip", steady_skip,
                 "decode tokens of warm-up left out of the steady tok/s (default: until the running hit rate stays "
                 "within 1 point for 8 tokens)")
      ->transform(whole<int64_t>(0))
      ->group(g);
}

void TelemetryFlags::apply(engine::EngineConfig& cfg, std::string command) const {
  // Before the model loads, not at the first write after it.
  for (const auto& [flag, path] : {std::pair{"--csv", &csv}, std::pair{"--route-trace", &route_trace}}) {
    if (!path->empty() && std::filesystem::is_directory(*path)) fail("{} {}: is a directory, not a file", flag, *path);
  }
  cfg.telemetry.csv = csv;
  cfg.telemetry.progress = progress;
  cfg.telemetry.route_trace = route_trace;
  cfg.telemetry.steady_skip = steady_skip;
  cfg.telemetry.command = std::move(command);
}

}  // namespace moetier::cli
