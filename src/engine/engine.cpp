#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "engine/context_memory.h"
#include "engine/expert_setup.h"
#include "engine/run_settings.h"
#include "moe/expert_layout.h"
#include "moe/placement.h"
#include "quant/kernels/int8_kernels.h"
#include "trace/route_trace.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace moetier::engine {
namespace {

constexpr double kMiB = 1048576.0;

// Every weight stays mapped: map all its pages now (one sequential pass, with the page cache warm only page-table
// work), so the first tokens do not take a page fault per 4 KiB of weights touched. Returns the log line.
std::string prefault_resident(const gguf::GgufModel& file) {
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
  return fmt::format("{:.1f} MiB mapped and prefaulted in {:.2f} s", static_cast<double>(bytes) / kMiB, seconds);
}

// The recorder's view of the model and, for a route trace, the trace's header (MoE layers and their bytes).
std::unique_ptr<telemetry::RunRecorder> make_recorder(const Engine& e, const moe::ExpertLayout& layout,
                                                      model::StepHooks* inner, const moe::StreamingExperts* stream) {
  const EngineConfig& cfg = e.config();
  const TelemetryConfig& t = cfg.telemetry;
  const model::ModelInfo& info = e.info();
  telemetry::ModelDesc md;
  md.file = std::filesystem::path(cfg.model).filename().string();
  md.arch = info.architecture;
  md.n_layer = info.n_layer;
  md.n_moe_layers = info.n_moe_layers;
  md.n_expert = info.n_expert;
  md.n_expert_used = info.n_expert_used;
  telemetry::RecorderOptions ro;
  ro.csv_path = t.csv;
  ro.progress = t.progress;
  ro.route_trace_path = t.route_trace;
  ro.max_steps = info.n_ctx + 1;  // at most one step per context position
  ro.steady_skip = t.steady_skip;
  ro.lanes = stream != nullptr ? stream->engine().lanes() : 0;
  trace::TraceHeader th;
  if (!t.route_trace.empty()) {  // load_engine has checked that the model has routed experts
    th.model = cfg.model;
    th.arch = info.architecture;
    th.n_moe_layers = static_cast<int32_t>(info.n_moe_layers);
    th.n_expert = static_cast<int32_t>(info.n_expert);
    th.n_expert_used = static_cast<int32_t>(info.n_expert_used);
    for (const auto& l : layout.layers()) th.layers.push_back({l.expert_bytes, l.dense_bytes});
    if (stream != nullptr) {  // what replay needs to count as this store does (trace::TraceCache)
      const moe::CachePolicy* pol = stream->policy();
      th.cache = trace::TraceCache{stream->slot_bytes(), info.n_batch, pol != nullptr && pol->config().cliff_guard};
    }
  }
  const auto settings = resolved_settings(e);
  return std::make_unique<telemetry::RunRecorder>(ro, inner, stream, md, settings, th, e.vram_tier());
}

}  // namespace

void StreamStepHooks::begin(bool prefill) {
  const moe::Phase phase = prefill ? moe::Phase::prefill : moe::Phase::decode;
  if (stream_) stream_->set_phase(phase);
  if (tier_) tier_->set_phase(phase);
}

void StreamStepHooks::end(bool, int64_t, double) {
  if (stream_) stream_->end_step();
  if (tier_) tier_->end_step();
  if (heat_) heat_->maybe_save();
}

telemetry::RunSummary Engine::finish() {
  telemetry::RunSummary s = recorder_->finish();
  if (heat_) heat_->save();
  return s;
}

Engine::~Engine() = default;

void Engine::decide(std::string topic, std::string text) {
  const std::string line = topic.empty() ? text : fmt::format("{}: {}", topic, text);
  if (cfg_.log) {
    cfg_.log(line);
  } else {
    fmt::print(stderr, "{}\n", line);
  }
  decisions_.push_back({std::move(topic), std::move(text)});
}

std::string Engine::format_summary(const telemetry::RunSummary& s) const {
  std::string text = telemetry::format_summary(s, stream_ != nullptr ? stream_->engine().lanes() : 0);
  if (!info().gpu.empty()) {
    // Since load: a server's later summaries count every request so far.
    const compute::BackendCounters c = model_->backend_counters();
    const double steps = static_cast<double>(std::max<int64_t>(s.steps, 1));
    text += fmt::format("gpu: {} submissions, {} dispatches since load ({:.1f} and {:.1f} per step; a decode step is "
                        "one token)\n",
                        c.submissions, c.dispatches, static_cast<double>(c.submissions) / steps,
                        static_cast<double>(c.dispatches) / steps);
  }
  return text;
}

std::unique_ptr<Engine> load_engine(const EngineConfig& given) {
  const auto t0 = std::chrono::steady_clock::now();
  EngineConfig cfg = given;
  if (cfg.threads == 0) cfg.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::unique_ptr<Engine> e(new Engine(cfg));
  e->file_ = std::make_unique<gguf::GgufModel>(gguf::GgufModel::open(cfg.model));
  const model::ArchSummary arch = model::summarize(*e->file_);

  model::ModelOptions opts;
  opts.n_ctx = cfg.n_ctx > 0 ? cfg.n_ctx : model::default_context(arch);
  opts.n_batch = cfg.n_batch;  // the model caps it at the context size
  opts.threads = cfg.threads;
  opts.kv_type = cfg.kv_type;
  opts.n_expert_used = cfg.n_expert_used;
  opts.rounding = cfg.rounding;
  opts.n_seq = cfg.n_seq;
  opts.n_gpu_layers = cfg.n_gpu_layers;
  opts.n_cpu_moe = cfg.n_cpu_moe;
  opts.gpu_device = cfg.gpu_device;
  opts.experts_vram_mib = cfg.experts_vram_mib;
  opts.experts_vram_pct = cfg.experts_vram_pct;
  opts.vram_reserve_mib = cfg.vram_reserve_mib;
  opts.vram_misses = cfg.vram_misses;
  const ContextBytes ctx_bytes = context_bytes(arch, opts.n_ctx, cfg.kv_type, cfg.threads, cfg.n_seq);
  const moe::MemoryReading memory = moe::read_memory();
  e->decide("memory", memory.describe());
  if (const uint64_t avail = memory.available(); ctx_bytes.total() > avail) {
    fail("-c {}: the KV cache{} and the attention scores of {} positions need {:.0f} MiB, more than the {:.0f} MiB of "
         "available memory; lower -c{}",
         opts.n_ctx, cfg.n_seq > 1 ? fmt::format("s of {} sequences", cfg.n_seq) : "", opts.n_ctx,
         static_cast<double>(ctx_bytes.total()) / kMiB, static_cast<double>(avail) / kMiB,
         cfg.n_seq > 1 ? " or --parallel" : "");
  }
  // What the settings ask of the routed experts, checked from the headers before anything is read or mapped.
  const auto layout = moe::ExpertLayout::from_model(*e->file_);
  const int64_t n_expert = layout.layers().empty() ? 0 : layout.layers().front().n_expert;
  if (cfg.n_expert_used > 0 && n_expert > 0 && cfg.n_expert_used > n_expert) {
    fail("--n-expert-used {} is more than the model's {} experts per layer", cfg.n_expert_used, n_expert);
  }
  if (!cfg.telemetry.route_trace.empty() && layout.layers().empty()) {
    fail("--route-trace {}: the model has no routed experts to trace", cfg.telemetry.route_trace);
  }

  if (!cfg.route_replay.empty()) {
    e->replay_ = std::make_unique<model::RouteReplay>(trace::read_route_trace(cfg.route_replay), cfg.route_replay);
    const model::RouteReplay& r = *e->replay_;
    const auto& h = r.header();
    if (cfg.n_expert_used == 0) opts.n_expert_used = h.n_expert_used;  // the trace's top-k, checked after loading
    opts.routing_override = e->replay_.get();
    r.check_model(static_cast<int64_t>(layout.layers().size()), n_expert, cfg.n_expert_used);
    e->decide("route replay",
              fmt::format("{} ({} layers x {} experts, top-{}, {} prefill + {} decode tokens{}): lossy, benchmark only",
                          cfg.route_replay, h.n_moe_layers, h.n_expert, h.n_expert_used, r.prefill_tokens(),
                          r.decode_tokens(),
                          r.filled() > 0
                              ? fmt::format(", {} token-layers without rows replay a neighbour's", r.filled())
                              : ""));
  }

  Engine* self = e.get();
  const DecisionLog log = [self](std::string topic, std::string text) {
    self->decide(std::move(topic), std::move(text));
  };
  ExpertSetup experts =
      setup_experts(*e->file_, layout, cfg, opts.n_expert_used, ctx_bytes, memory.available(), log);
  if (experts.source == nullptr) log("weights", prefault_resident(*e->file_));
  e->dense_weights_ = experts.dense_weights;
  e->stream_ = experts.stream;
  if (e->stream_ != nullptr) {
    // Before the model is built over the store: the warm start must come before the first fetch.
    e->heat_ = std::make_unique<HeatKeeper>(*e->stream_, *e->file_, cfg, log, later_log(cfg));
  }
  if (cfg.experts_vram_mib != 0 || cfg.experts_vram_pct > 0) {
    // Called by the model once it knows the slot count (during load_model, while `log` lives).
    opts.vram_policy = [&cfg, &log](int64_t slots, int64_t total) {
      return adapt_params(cfg, slots, total, moe::SlowTier::ram, log);
    };
  }
  // Streamed experts leave the dense weights to --dense-weights (by default a private copy already): a repacked
  // copy beside it would hold those bytes twice where memory is what the run is short of.
  if (!cfg.repack) {
    e->repack_ = "off (--no-repack)";
  } else if (e->stream_ != nullptr) {
    e->repack_ = e->stream_->packs()
                     ? "the routed experts in their cache slots (see expert store); the dense weights are held as "
                       "--dense-weights says"
                     : "off: the experts stream, and the dense weights are held as --dense-weights says";
  }
  opts.repack = e->repack_.empty();
  // Resident experts are repacked too, but only where the whole model fits in RAM: the copy is memory the kernel
  // cannot drop, where a mapping that outgrows RAM (--experts resident as asked, llama.cpp's mmap) only pages.
  const bool resident_experts = experts.source == nullptr && !layout.layers().empty();
  opts.repack_experts = opts.repack && cfg.repack_experts && resident_experts && experts.fits_ram;
  opts.evict_repacked_experts = !experts.fits_beside_file;
  e->model_ = model::load_model(*e->file_, opts, std::move(experts.source));
  const model::ModelInfo& info = e->model_->info();
  if (e->repack_.empty()) {
    e->repack_ = info.repack;
    if (resident_experts && !opts.repack_experts && e->repack_.rfind("off", 0) != 0 &&
        e->repack_.rfind("none", 0) != 0) {
      e->repack_ += cfg.repack_experts ? "; the routed experts stay mapped as the file stores them: the model does "
                                         "not fit in the available memory with placement auto's headroom"
                                       : "; the routed experts stay mapped as the file stores them "
                                         "(--no-repack-experts)";
    }
  }
  e->tier_ = e->model_->vram_tier();
  if (e->replay_) e->replay_->check_model(info.n_moe_layers, info.n_expert, info.n_expert_used);
  e->load_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::string moe_part;
  if (info.n_moe_layers > 0) {
    const int64_t dense = info.n_layer - info.n_moe_layers;
    moe_part = fmt::format(", {} MoE layers{} x {} experts, top-{}", info.n_moe_layers,
                           dense > 0 ? fmt::format(" (from block {})", info.moe_layers.front()) : "", info.n_expert,
                           info.n_expert_used);
  }
  log("model", fmt::format("{} ({}, {} layers, n_embd {}, n_vocab {}{}), context {} tokens{}, KV cache {}{} ({:.1f} "
                           "MiB) + attention scores ({:.1f} MiB){}, loaded in {:.2f} s",
                           cfg.model, info.architecture, info.n_layer, info.n_embd, info.n_vocab, moe_part, info.n_ctx,
                           cfg.n_ctx > 0 ? "" : " (the model's default)", model::kv_type_name(cfg.kv_type),
                           info.n_seq > 1 ? fmt::format(" x {} sequences", info.n_seq) : "",
                           static_cast<double>(ctx_bytes.kv) / kMiB, static_cast<double>(ctx_bytes.scores) / kMiB,
                           ctx_bytes.recurrent > 0 ? fmt::format(" + recurrent state ({:.1f} MiB)",
                                                                 static_cast<double>(ctx_bytes.recurrent) / kMiB)
                                                   : "",
                           e->load_seconds_));
  log("cpu", fmt::format("{} threads, integer kernels {}", cfg.threads, quant::kernels::int8_kernels_name()));
  log("repack", e->repack_);
  if (!info.gpu.empty()) log("gpu", info.gpu);
  if (!info.experts_vram.empty()) log("experts", info.experts_vram);
  if (!info.expert_prefetch.empty()) log("expert prefetch", info.expert_prefetch);
  if (cfg.n_gpu_layers == 0 && (cfg.n_cpu_moe > 0 || cfg.gpu_device > 0)) {
    log("note", fmt::format("{} has no effect without -ngl: everything runs on the CPU",
                            cfg.n_cpu_moe > 0 ? "--n-cpu-moe" : "--device"));
  }
  if (e->stream_ == nullptr && cfg.cache_warm != "off" && cfg.cache_warm != "auto") {
    log("note", fmt::format("--cache-warm {} has no effect: the experts do not stream", cfg.cache_warm));
  }
  if (e->stream_ == nullptr && cfg.expert_prefetch && info.n_moe_layers > 0) {
    log("note", "--expert-prefetch next has no effect: the experts do not stream");
  }
  if (e->stream_ == nullptr && cfg.heat != "off" && cfg.heat != "auto") {
    log("note", fmt::format("--heat {} has no effect: the experts do not stream, so no heat profile is kept",
                            cfg.heat));
  }
  if (cfg.n_expert_used > 0 && info.n_moe_layers == 0) {
    log("note", fmt::format("--n-expert-used {} has no effect: the model has no routed experts", cfg.n_expert_used));
  } else if (cfg.n_expert_used > 0) {
    log("note", fmt::format("--n-expert-used {} overrides the model's top-k: output differs from the model's own",
                            cfg.n_expert_used));
  }

  e->stream_hooks_ = std::make_unique<StreamStepHooks>(e->stream_, e->heat_.get(), e->tier_);
  e->recorder_ = make_recorder(*e, layout, e->stream_hooks_.get(), e->stream_);
  return e;
}

}  // namespace moetier::engine
