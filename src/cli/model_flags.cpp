#include "cli/model_flags.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include <fmt/format.h>

#include "moe/adapt_rule.h"
#include "moe/dense_weights.h"
#include "moe/expert_layout.h"
#include "moe/expert_store.h"
#include "moe/placement.h"
#include "telemetry/route_trace.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace moetier::cli {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr int64_t kMaxDefaultCtx = 4096;  // default context cap: KV memory grows with it

void log_line(std::string_view s) { fmt::print(stderr, "{}\n", s); }

int64_t resolve_ctx(const ModelFlags& f, const gguf::Metadata& md) {
  if (f.n_ctx > 0) return f.n_ctx;
  const std::string arch = md.get_string_or("general.architecture", "");
  const auto trained = static_cast<int64_t>(md.get_uint_or(arch + ".context_length", kMaxDefaultCtx));
  return std::min(trained, kMaxDefaultCtx);
}

// Memory that grows with the context, for n_ctx positions: the KV cache (K and V per layer of n_head_kv x
// head_dim elements of the KV type) and the attention's score rows (model/attention.h: per compute thread, a KV
// head's n_head / n_head_kv query heads' scores over n_ctx positions, floats). The placement and the cache budget
// count both.
struct ContextBytes {
  uint64_t kv = 0, scores = 0;
  uint64_t total() const { return kv + scores; }
};
ContextBytes context_bytes_estimate(const gguf::Metadata& md, int64_t n_ctx, const std::string& kv_type,
                                    int threads) {
  const std::string a = md.get_string_or("general.architecture", "");
  const uint64_t n_layer = md.get_uint_or(a + ".block_count", 0);
  const uint64_t n_head = md.get_uint_or(a + ".attention.head_count", 1);
  const uint64_t n_head_kv = std::max<uint64_t>(1, md.get_uint_or(a + ".attention.head_count_kv", n_head));
  const uint64_t n_embd = md.get_uint_or(a + ".embedding_length", 0);
  const uint64_t head_dim = md.get_uint_or(a + ".attention.key_length", n_head ? n_embd / n_head : 0);
  const uint64_t elem = kv_type == "f32" ? 4 : 2;
  const auto ctx = static_cast<uint64_t>(n_ctx);
  return {2 * n_layer * ctx * n_head_kv * head_dim * elem,
          ctx * (n_head / n_head_kv) * static_cast<uint64_t>(std::max(threads, 1)) * sizeof(float)};
}

// The adaptive tier's parameters: the rule over tiers (moe::decide_adapt), then explicit --adapt-* values.
// Logs which set applies and why.
moe::PolicyParams adapt_params(const ModelFlags& f, int64_t cache_slots, int64_t total_experts) {
  moe::AdaptTierInputs in;
  in.fast_entries = cache_slots;
  in.total_entries = total_experts;
  in.slow = moe::SlowTier::Drive;  // the RAM cache over the model file: every swap-in is a drive read
  in.force_tuned = f.adapt_tuned || f.cache_policy == "adaptive-tuned";
  const moe::AdaptDecision d = moe::decide_adapt(in);
  moe::PolicyParams p = d.params;
  log_line(fmt::format("adapt-tuned: {}", d.reason));
  if (f.adapt_every) p.adapt_every = *f.adapt_every;
  if (f.adapt_swaps) p.adapt_swaps = *f.adapt_swaps;
  if (f.adapt_decay) p.adapt_decay = *f.adapt_decay;
  if (f.adapt_every || f.adapt_swaps || f.adapt_decay) {
    log_line(fmt::format("adaptive: every {} rounds, {} swaps, x{:g} (explicit --adapt-* values win)", p.adapt_every,
                         p.adapt_swaps, p.adapt_decay));
  }
  return p;
}

}  // namespace

void ModelFlags::add_to(CLI::App& cmd) {
  cmd.add_option("-m,--model", model, "GGUF model file (for a split model, its first shard)")->required();
  cmd.add_option("-c,--ctx-size", n_ctx,
                 "context size in tokens (KV cache positions); 0: the model's training context, at most 4096")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd.add_option("-b,--batch-size", n_batch, "most prompt tokens per forward pass (prefill chunk)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd.add_option("-t,--threads", threads, "threads for the matrix products (0: one per hardware thread)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024));
  cmd.add_option("--kv-type", kv_type, "KV cache element type: f16 or f32")->capture_default_str();
  cmd.add_option("--n-expert-used", n_expert_used,
                 "override the model's top-k experts per token (lossy: changes the model's output)")
      ->check(CLI::PositiveNumber);
  const char* g = "Expert streaming";
  cmd.add_option("--experts", experts,
                 "resident: every expert in RAM (mapped); stream: read routed experts from the file into the expert "
                 "cache; auto: stream when the model does not fit in available RAM")
      ->capture_default_str()
      ->group(g);
  cmd.add_option("--cache-mb", cache_mb,
                 "expert cache budget in MiB when streaming: auto (available RAM minus --cache-floor-mb, dense "
                 "weights and KV cache), 0 (no cache: every expert read at every use) or N")
      ->capture_default_str()
      ->group(g);
  cmd.add_option("--cache-floor-mb", cache_floor_mb, "RAM left to the system by --cache-mb auto, MiB")
      ->capture_default_str()
      ->group(g);
  cmd.add_option("--cache-ceil-mb", cache_ceil_mb, "upper bound of --cache-mb auto, MiB (0: none)")
      ->capture_default_str()
      ->group(g);
  cmd.add_option("--cache-policy", cache_policy,
                 "expert cache policy: lru, lfu, lfu-decay, adaptive (background swaps, see --adapt-*), reuse")
      ->capture_default_str()
      ->group(g);
  cmd.add_option("--adapt-every", adapt_every,
                 "adaptive: decode steps (rounds) between swap passes [4, tuned 2]")
      ->check(CLI::PositiveNumber)
      ->group(g);
  cmd.add_option("--adapt-swaps", adapt_swaps, "adaptive: most background swap-ins per pass [96, tuned 192]")
      ->check(CLI::NonNegativeNumber)
      ->group(g);
  cmd.add_option("--adapt-decay", adapt_decay, "adaptive: count multiplier after each pass, in (0, 1] [0.7, tuned 0.92]")
      ->group(g);
  cmd.add_flag("--adapt-tuned", adapt_tuned,
               "adaptive: force the tuned parameters (every 2 rounds, 192 swaps, x0.92); by default they apply only "
               "when the cache holds 20-60% of the experts and swaps would not read the drive")
      ->group(g);
  cmd.add_option("--route-replay", route_replay,
                 "take every MoE layer's experts from this route_trace v1 file instead of the router (prompt tokens "
                 "replay its prefill rows, generated tokens its decode steps): lossy, for benchmarks")
      ->check(CLI::ExistingFile);
  cmd.add_option("--io-threads", io_threads, "parallel read lanes for expert reads")
      ->capture_default_str()
      ->check(CLI::Range(1, 64))
      ->group(g);
  cmd.add_option("--io-engine", io_engine, "expert read engine: pread (a thread pool; measured faster here) or io_uring")
      ->group(g);
  cmd.add_flag("--overlap,!--no-overlap", overlap,
               "compute cached experts while missing ones are read, each as its read lands")
      ->capture_default_str()
      ->group(g);
  cmd.add_flag("--no-odirect", no_odirect, "read experts through the page cache instead of direct I/O")->group(g);
  cmd.add_option("--dense-weights", dense_weights,
                 "non-expert weights when streaming: mmap (page cache), warm (one sequential read at load), anon "
                 "(direct I/O into memory the kernel cannot drop)")
      ->capture_default_str()
      ->group(g);
}

model::ModelOptions ModelFlags::options() const {
  model::ModelOptions o;
  o.n_ctx = n_ctx;
  o.n_batch = n_batch;  // the model caps it at the context size
  o.threads = threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  o.n_expert_used = n_expert_used;
  if (kv_type == "f16")
    o.kv_type = model::KvType::f16;
  else if (kv_type == "f32")
    o.kv_type = model::KvType::f32;
  else
    fail("--kv-type '{}' is not one of f16, f32", kv_type);
  return o;
}

// Every weight stays mapped: map all its pages now (one sequential pass, with the page cache warm only page-table
// work), so the first tokens do not take a page fault per 4 KiB of weights touched.
void prefault_resident(const gguf::GgufModel& file) {
  uint64_t bytes = 0;
  double seconds = 0.0;
  for (uint32_t s = 0; s < file.shards().size(); ++s) {
    const uint8_t* lo = nullptr;
    const uint8_t* hi = nullptr;
    for (const auto& t : file.tensors()) {
      if (t.shard != s || t.data == nullptr) continue;
      lo = lo == nullptr ? t.data : std::min(lo, t.data);
      hi = std::max(hi, t.data + t.n_bytes);
    }
    if (lo == nullptr) continue;
    bytes += static_cast<uint64_t>(hi - lo);
    seconds += prefault_pages(lo, static_cast<uint64_t>(hi - lo));
  }
  log_line(fmt::format("weights: {:.1f} MiB mapped and prefaulted in {:.2f} s", static_cast<double>(bytes) / kMiB,
                       seconds));
}

LoadedModel load(const ModelFlags& f) {
  const auto t0 = std::chrono::steady_clock::now();
  LoadedModel lm;
  auto opts = f.options();
  const auto placement = moe::parse_placement(f.experts);
  const auto dense_policy = moe::parse_dense_policy(f.dense_weights);
  lm.file = std::make_unique<gguf::GgufModel>(gguf::GgufModel::open(f.model));
  const auto& md = lm.file->metadata();
  opts.n_ctx = resolve_ctx(f, md);
  const ContextBytes ctx_bytes = context_bytes_estimate(md, opts.n_ctx, f.kv_type, opts.threads);
  const auto layout = moe::ExpertLayout::from_model(*lm.file);

  const bool adaptive = f.cache_policy == "adaptive" || f.cache_policy == "adaptive-tuned";
  if (!adaptive && (f.adapt_every || f.adapt_swaps || f.adapt_decay || f.adapt_tuned)) {
    fail("--adapt-every/--adapt-swaps/--adapt-decay/--adapt-tuned apply to --cache-policy adaptive only (got '{}')",
         f.cache_policy);
  }
  if (f.adapt_decay && !(*f.adapt_decay > 0.0 && *f.adapt_decay <= 1.0)) {
    fail("--adapt-decay {} must be in (0, 1]", *f.adapt_decay);
  }
  if (!f.route_replay.empty()) {
    lm.replay = std::make_unique<model::RouteReplay>(telemetry::read_route_trace(f.route_replay), f.route_replay);
    const auto& h = lm.replay->header();
    if (f.n_expert_used == 0) opts.n_expert_used = h.n_expert_used;  // the trace's top-k, checked after loading
    opts.routing_override = lm.replay.get();
    log_line(fmt::format("route replay: {} ({} layers x {} experts, top-{}, {} prefill + {} decode tokens{}): "
                         "lossy, benchmark only",
                         f.route_replay, h.n_layer, h.n_expert, h.n_expert_used, lm.replay->prefill_tokens(),
                         lm.replay->decode_tokens(),
                         lm.replay->filled() > 0
                             ? fmt::format(", {} token-layers without rows replay a neighbour's", lm.replay->filled())
                             : ""));
  }

  std::unique_ptr<moe::ExpertSource> source;
  if (layout.layers().empty()) {
    log_line("experts: none (a dense model): every weight stays mapped");
  } else {
    uint64_t file_bytes = 0;
    for (const auto& s : lm.file->shards()) file_bytes += s.file_size;
    const auto decision = moe::decide_placement(placement, file_bytes, ctx_bytes.total(), moe::mem_available_bytes());
    log_line(fmt::format("experts: {} ({})", decision.stream ? "stream" : "resident", decision.reason));
    if (decision.stream) {
      moe::StreamingOptions so;
      so.policy = adaptive ? "adaptive" : f.cache_policy;  // tuned or not is decided below
      so.lanes = f.io_threads;
      if (!f.io_engine.empty()) so.engine = moe::io::parse_engine(f.io_engine);
      so.overlap = f.overlap;
      so.direct = !f.no_odirect;
      so.log = log_line;
      if (f.cache_mb == "auto") {
        const moe::ExpertStore probe(*lm.file);
        const auto ac = moe::auto_cache(moe::mem_available_bytes(), layout.dense_total_bytes(), ctx_bytes.total(),
                                        probe.slot_bytes(), layout.n_experts_total(), f.cache_floor_mb * kMiB,
                                        f.cache_ceil_mb * kMiB);
        so.cache_bytes = ac.bytes;
        log_line(ac.report);
      } else {
        try {
          size_t used = 0;
          so.cache_bytes = std::stoull(f.cache_mb, &used) * kMiB;
          if (used != f.cache_mb.size()) throw std::invalid_argument(f.cache_mb);
        } catch (const std::exception&) {
          fail("--cache-mb '{}' is not auto or a whole number of MiB", f.cache_mb);
        }
        log_line(fmt::format("cache: {} MiB as given", f.cache_mb));
      }
      if (adaptive) {
        const moe::ExpertStore probe(*lm.file);
        const auto slots = std::min<int64_t>(static_cast<int64_t>(so.cache_bytes / probe.slot_bytes()),
                                             static_cast<int64_t>(layout.n_experts_total()));
        so.policy_params = adapt_params(f, slots, static_cast<int64_t>(layout.n_experts_total()));
      }
      auto stream = std::make_unique<moe::StreamingExperts>(*lm.file, so);
      log_line(fmt::format("expert store: {}", stream->describe()));
      if (const auto* pol = stream->policy(); pol != nullptr && pol->cliff_guard_engaged())
        log_line(fmt::format("cliff guard: the cache's {} slots are fewer than one token's working set of {} experts, "
                             "so plain LRU would evict every expert before its reuse; each layer keeps a protected "
                             "share of {} experts",
                             stream->cache_slots(), pol->working_set(), pol->layer_quota(0)));
      const auto dense = moe::load_dense(*lm.file, stream->files(), dense_policy);
      log_line(fmt::format("dense weights: {}, {:.1f} MiB{}", moe::dense_policy_name(dense.policy),
                           static_cast<double>(dense.dense_bytes) / static_cast<double>(kMiB),
                           dense.loaded_bytes ? fmt::format(", loaded in {:.2f} s", dense.seconds) : ""));
      lm.dense_weights = std::string(moe::dense_policy_name(dense.policy));
      lm.stream = stream.get();
      source = std::move(stream);
    }
  }
  if (source == nullptr) prefault_resident(*lm.file);
  lm.model = model::load_model(*lm.file, opts, std::move(source));
  const auto& info = lm.model->info();
  if (lm.replay) lm.replay->check_model(info.n_moe_layers, info.n_expert, info.n_expert_used);
  lm.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::string moe_part;
  if (info.n_moe_layers > 0)
    moe_part = fmt::format(", {} MoE layers x {} experts, top-{}", info.n_moe_layers, info.n_expert, info.n_expert_used);
  log_line(fmt::format("model: {} ({}, {} layers, n_embd {}, n_vocab {}{}), context {} tokens, KV cache {} ({:.1f} "
                       "MiB) + attention scores ({:.1f} MiB), loaded in {:.2f} s",
                       f.model, info.architecture, info.n_layer, info.n_embd, info.n_vocab, moe_part, info.n_ctx,
                       f.kv_type, static_cast<double>(ctx_bytes.kv) / static_cast<double>(kMiB),
                       static_cast<double>(ctx_bytes.scores) / static_cast<double>(kMiB), lm.load_seconds));
  if (f.n_expert_used > 0)
    log_line(fmt::format("note: --n-expert-used {} overrides the model's top-k: output differs from the model's own",
                         f.n_expert_used));
  return lm;
}

void StreamStepHooks::begin(bool prefill) {
  if (stream_) stream_->set_phase(prefill ? moe::Phase::Prefill : moe::Phase::Decode);
}

void StreamStepHooks::end(bool, int64_t, double) {
  if (stream_) stream_->end_step();
}

}  // namespace moetier::cli
