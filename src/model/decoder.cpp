#include "model/decoder.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "compute/cpu_backend.h"
#include "compute/hybrid_backend.h"
#include "gpu/gpu.h"
#include "model/gpu_placement.h"
#include "model/rmsnorm.h"
#include "quant/kernels/glu_kernels.h"
#include "util/error.h"

namespace moetier::model {

int64_t default_context(const ArchSummary& s) { return std::min(s.n_ctx_train, kMaxDefaultContext); }

DecoderModel::DecoderModel(const gguf::GgufModel& file, const CommonHparams& hp, const ModelOptions& opts)
    : file_(file), repacked_(opts.threads), bind_(file), hp_(hp), opts_(opts) {
  info_.architecture = file.architecture();
  info_.n_vocab = hp.n_vocab;
  info_.n_embd = hp.n_embd;
  info_.n_layer = hp.n_layer;
  if (opts.n_ctx < 0) fail("context size {} is negative", opts.n_ctx);
  if (opts.n_batch < 1) fail("batch size {} must be at least 1", opts.n_batch);
  if (opts.threads < 1 || opts.threads > 1024) fail("thread count {} is out of range, expected 1..1024", opts.threads);
  if (opts.n_seq < 1 || opts.n_seq > kMaxSequences)
    fail("sequence count {} is out of range, expected 1..{}", opts.n_seq, kMaxSequences);
  if (opts.n_gpu_layers < 0) fail("GPU layer count {} is negative", opts.n_gpu_layers);
  if (opts.n_cpu_moe < 0) fail("CPU MoE layer count {} is negative", opts.n_cpu_moe);
  if (opts.gpu_device < 0) fail("GPU device index {} is negative", opts.gpu_device);
  if (opts.experts_vram_mib < kVramAuto) fail("--experts-vram {} MiB is negative", opts.experts_vram_mib);
  if (!(opts.experts_vram_pct >= 0 && opts.experts_vram_pct <= 100))
    fail("--experts-vram {}% is not a percentage in (0, 100]", opts.experts_vram_pct);
  if ((opts.experts_vram_mib != 0 || opts.experts_vram_pct > 0) && opts.n_gpu_layers == 0)
    fail("--experts-vram needs the step on the GPU: add -ngl 99 (every block and the output head)");
  if (opts.vram_reserve_mib < 0) fail("--vram-reserve-mib {} is negative", opts.vram_reserve_mib);
  info_.n_ctx = opts.n_ctx > 0 ? opts.n_ctx : default_context(ArchSummary{.n_ctx_train = hp.n_ctx_train});
  info_.n_batch = std::min(opts.n_batch, info_.n_ctx);
  if (!opts.repack) {
    info_.repack = "off (ModelOptions::repack)";
  } else if (opts.rounding != quant::ActivationRounding::match_ggml) {
    info_.repack = "off: the repacked kernels take 8-bit activations, not --exact-activations";
  } else if (opts.n_gpu_layers > 0) {
    info_.repack = "off: with -ngl the GPU reads the weights as the file stores them";
  } else {
    bind_.repack_into(&repacked_, opts.repack_experts, opts.evict_repacked_experts);
  }
  tok_embd_ = bind_.matrix("token_embd.weight", hp.n_embd, hp.n_vocab);
  out_norm_ = bind_.vector("output_norm.weight", hp.n_embd);
  output_ = bind_.has("output.weight") ? bind_.matrix("output.weight", hp.n_embd, hp.n_vocab) : tok_embd_;
}

void DecoderModel::setup(const DecoderSizes& s) {
  const int64_t B = info_.n_batch, D = hp_.n_embd;
  if (info_.repack.empty()) {
    info_.repack = repacked_.count() == 0
                       ? fmt::format("none: no matrix of a type with a repacked kernel on this CPU ({})",
                                     quant::kernels::int8_kernels_name())
                       : fmt::format("{} matrices ({}), {:.1f} MiB, 16 rows in the lanes, in {:.2f} s with up to {} "
                                     "thread{}{}",
                                     repacked_.count(), repacked_.summary(),
                                     static_cast<double>(repacked_.bytes()) / (1024.0 * 1024.0),
                                     repacked_.seconds(), opts_.threads, opts_.threads == 1 ? "" : "s",
                                     moe_.repacked_expert_stacks() > 0
                                         ? fmt::format(", the routed experts' among them: {} stacks, their pages "
                                                       "of the file unmapped{}",
                                                       moe_.repacked_expert_stacks(),
                                                       opts_.evict_repacked_experts
                                                           ? " and evicted from the page cache (RAM holds no copy "
                                                             "beside the whole file)"
                                                           : ", left to the page cache")
                                         : std::string());
  }
  info_.n_moe_layers = moe_.n_moe_layers();
  info_.moe_layers.assign(moe_.layers().begin(), moe_.layers().end());
  info_.n_expert = info_.n_moe_layers > 0 ? moe_.hparams().n_expert : 0;
  info_.n_expert_used = info_.n_moe_layers > 0 ? moe_.hparams().n_expert_used : 0;
  const int64_t K = std::max<int64_t>(info_.n_expert_used, 1);
  info_.n_seq = opts_.n_seq;
  compute::CpuBackendOptions bo;
  bo.max_cols = std::max(s.max_cols, D);
  bo.max_tok = B;
  bo.max_group_rows = B * K;
  bo.rounding = opts_.rounding;
  bo.threads = opts_.threads;
  auto cpu = std::make_unique<compute::CpuBackend>(bo);
  backend_ = opts_.n_gpu_layers > 0 ? with_gpu(std::move(cpu), bo.max_cols, B * K) : std::move(cpu);
  // Every weight this model binds is in the file's mapping; a backend that cannot read host memory cannot run it.
  if (!backend_->reads(tok_embd_.memory) || !backend_->reads(output_.memory)) {
    fail("the {} backend cannot read the weights of {} where they are", backend_->name(), file_.path().string());
  }
  x_ = backend_->activations(static_cast<size_t>(B * D));
  xn_ = backend_->activations(static_cast<size_t>(B * D));
  tmp_ = backend_->activations(static_cast<size_t>(B * D));
  route_.assign(static_cast<size_t>(B * K), 0);
  if (gpu_ != nullptr && (opts_.experts_vram_mib != 0 || opts_.experts_vram_pct > 0)) setup_vram_tier(s);
  if (gpu_ != nullptr) {
    const std::string step = try_gpu_step(s);
    if (tier_ != nullptr && gpu_blocks_ == nullptr) fail("--experts-vram needs the step on the GPU: {}", step);
    info_.gpu += "; " + step;
  }
  // The KV cache in RAM, unless every block runs on the GPU step, which holds its own.
  kv_.clear();
  if (gpu_blocks_ == nullptr || gpu_first_ > 0) {
    const std::vector<int64_t> kv_widths = s.layer_kv_width.empty()
                                               ? std::vector<int64_t>(static_cast<size_t>(hp_.n_layer), s.kv_width)
                                               : s.layer_kv_width;
    for (int q = 0; q < opts_.n_seq; ++q) kv_.emplace_back(kv_widths, info_.n_ctx, opts_.kv_type);
  }
  setup_prefetch();
}

std::string DecoderModel::try_gpu_step(const DecoderSizes& s) {
  const char* per_product = "the other work of a step on the CPU, each GPU product a submission";
  if (gpu_first_ >= hp_.n_layer) return fmt::format("{} (no block on the GPU)", per_product);
  if (!gpu_kernels_) return fmt::format("{} (tensors without a GPU kernel)", per_product);
  if (!layers_are_shared_blocks())
    return fmt::format("{} (the GPU step does not have {}'s blocks yet)", per_product, info_.architecture);
  if (opts_.kv_type != KvType::f16)
    return fmt::format("{} (the GPU step keeps an F16 KV cache: --kv-type f16)", per_product);
  GpuBlockSizes gs;
  gs.n_embd = hp_.n_embd;
  gs.n_batch = info_.n_batch;
  gs.n_layer = hp_.n_layer;
  gs.first_layer = gpu_first_;
  gs.n_seq = opts_.n_seq;
  gs.n_ctx = info_.n_ctx;
  gs.n_vocab = hp_.n_vocab;
  gs.max_cols = std::max(s.max_cols, hp_.n_embd);
  gs.kv_width = s.layer_kv_width.empty() ? std::vector<int64_t>(static_cast<size_t>(hp_.n_layer), s.kv_width)
                                         : s.layer_kv_width;
  gs.n_expert = info_.n_expert;
  gs.n_expert_used = info_.n_expert_used;
  gs.n_ff_exp = info_.n_moe_layers > 0 ? moe_.hparams().n_ff_exp : 0;
  gs.norm_eps = hp_.norm_eps;
  gs.tiered = tier_ != nullptr;
  try {
    gpu_blocks_ = std::make_unique<GpuBlocks>(gpu_->step(), gs);
    // A dry pass over the layers notes the constants each block reads; the routed experts' biases are found in
    // the file's stacked tensors.
    gpu_blocks_->set_registering(true);
    for (int64_t il = gpu_first_; il < hp_.n_layer; ++il) {
      cur_layer_ = il;
      layer(il, x_.host(), 0, 1, nullptr);
      if (!moe_.is_moe(il)) continue;
      for (const char* name : {"ffn_gate_exps.bias", "ffn_up_exps.bias", "ffn_down_exps.bias"}) {
        const gguf::TensorInfo* t = file_.find(gguf::block_tensor(il, name));
        if (t != nullptr && t->type == quant::GgmlType::F32) {
          gpu_blocks_->register_constant(
              {reinterpret_cast<const float*>(t->data), static_cast<size_t>(t->n_elements())});
        }
      }
    }
    if (gpu_output_) gpu_blocks_->logits(out_norm_, output_, 0, 1, nullptr);
    gpu_blocks_->set_registering(false);
    gpu_blocks_->finish_setup();
  } catch (const std::exception& e) {  // moetier::Error, or std::bad_alloc sizing the host tables
    gpu_blocks_.reset();
    gpu_->release_step();
    return fmt::format("{} (the step does not fit on the GPU: {})", per_product, e.what());
  }
  constexpr double kMiB = 1024.0 * 1024.0;
  const std::string where =
      gpu_first_ == 0 && gpu_output_
          ? std::string("the whole step on the GPU")
          : fmt::format("the step on the GPU from block {}{}{}", gpu_first_,
                        gpu_first_ > 0 ? fmt::format(" (blocks below {} on the CPU)", gpu_first_) : "",
                        gpu_output_ ? "" : ", the output head on the CPU");
  return fmt::format("{} ({:.1f} MiB of activations and KV cache in device memory; one submission per token{})",
                     where, static_cast<double>(gpu_blocks_->bytes()) / kMiB,
                     info_.n_moe_layers > 0 ? " and per MoE layer on the GPU, whose routing the host reads" : "");
}

void DecoderModel::setup_vram_tier(const DecoderSizes& s) {
  constexpr uint64_t kMiB = uint64_t{1} << 20;
  if (info_.n_moe_layers == 0) fail("--experts-vram: {} has no routed experts", file_.path().string());
  if (!moe_.experts_in_file()) {
    fail("--experts-vram keeps the experts outside VRAM in RAM, and these stream from the file: add --experts "
         "resident");
  }
  const uint64_t slot = moe::VramTier::slot_bytes_for(moe_.experts());
  const int64_t total = info_.n_moe_layers * info_.n_expert;
  // The staging slots of the PCIe share (moe/vram_tier.h) take an eighth of the slots (one at least, when there
  // are two), at most four per expert a token uses, and none when every expert has a slot (nothing misses).
  const auto stage_for = [&](int64_t fit) {
    return fit >= total || fit < 2
               ? int64_t{0}
               : std::min<int64_t>({4 * info_.n_expert_used, info_.n_expert, std::max<int64_t>(fit / 8, 1)});
  };
  uint64_t budget = 0;
  std::string why;
  int64_t slots = 0, n_stage = 0;
  if (opts_.experts_vram_pct > 0) {
    // The cache holds this share of the experts; the staging slots come on top.
    slots = std::min<int64_t>(
        static_cast<int64_t>(std::ceil(opts_.experts_vram_pct / 100.0 * static_cast<double>(total))), total);
    n_stage = stage_for(slots < total ? slots + slots / 7 : total);
    budget = static_cast<uint64_t>(slots + n_stage) * slot;
    why = fmt::format("--experts-vram {:g}%", opts_.experts_vram_pct);
  } else if (opts_.experts_vram_mib > 0) {
    budget = static_cast<uint64_t>(opts_.experts_vram_mib) * kMiB;
    why = fmt::format("--experts-vram {}", opts_.experts_vram_mib);
  } else {
    // The device's memory less what else it holds: the reserve, the placed weights, the KV caches (binary16 K
    // and V of every block, every sequence); the step's activations are small beside the reserve.
    uint64_t kv = 0;
    for (int64_t il = 0; il < hp_.n_layer; ++il) {
      const int64_t w = s.layer_kv_width.empty() ? s.kv_width : s.layer_kv_width[static_cast<size_t>(il)];
      kv += 4 * static_cast<uint64_t>(info_.n_ctx) * static_cast<uint64_t>(w) * static_cast<uint64_t>(opts_.n_seq);
    }
    const uint64_t memory = gpu_->device().memory_bytes;
    const uint64_t taken = static_cast<uint64_t>(opts_.vram_reserve_mib) * kMiB + gpu_->placed_bytes() + kv;
    budget = memory > taken ? memory - taken : 0;
    why = fmt::format("auto: {} MiB of device memory - {} reserved (--vram-reserve-mib) - {} of weights - {} of KV "
                      "cache",
                      memory / kMiB, opts_.vram_reserve_mib, gpu_->placed_bytes() / kMiB, kv / kMiB);
  }
  if (opts_.experts_vram_pct <= 0) {
    const auto fit = static_cast<int64_t>(budget / slot);
    n_stage = stage_for(fit);
    slots = std::min<int64_t>(fit - n_stage, total);
  }
  if (slots < 1) {
    fail("--experts-vram: {:.1f} MiB hold no expert slot of {:.2f} MiB ({}); give more MiB",
         static_cast<double>(budget) / kMiB, static_cast<double>(slot) / kMiB, why);
  }
  const moe::PolicyParams params = opts_.vram_policy ? opts_.vram_policy(slots, total) : moe::PolicyParams{};
  opts_.vram_policy = nullptr;  // it may refer to the caller's setup state
  try {
    tier_ = std::make_unique<moe::VramTier>(*gpu_, moe_.experts(), static_cast<int32_t>(info_.n_expert_used), slots,
                                            n_stage, params, opts_.vram_misses);
  } catch (const Error& e) {
    fail("--experts-vram: cannot reserve {} expert slots on the GPU: {}", slots, e.what());
  }
  info_.experts_vram = fmt::format(
      "{} VRAM slots ({:.0f}% of {}) of {:.2f} MiB{}, {:.1f} MiB ({}); the rest in RAM, computed by the CPU or "
      "copied for the layer ({}) until the adaptive tier swaps them in",
      slots, 100.0 * static_cast<double>(slots) / static_cast<double>(total), total,
      static_cast<double>(slot) / kMiB,
      n_stage > 0 ? fmt::format(" and {} staging slots for the PCIe share", n_stage) : std::string(),
      static_cast<double>(slots + n_stage) * static_cast<double>(slot) / kMiB, why,
      opts_.vram_misses == moe::MissRoute::measured ? "as the measured costs say, --vram-misses auto"
      : opts_.vram_misses == moe::MissRoute::cpu    ? "all on the CPU, --vram-misses cpu"
                                                    : "over PCIe while staging slots last, --vram-misses pcie");
}

std::unique_ptr<compute::Backend> DecoderModel::with_gpu(std::unique_ptr<compute::Backend> cpu, int64_t max_cols,
                                                         int64_t max_tok) {
  const GpuPlacementRequest req{hp_.n_layer, opts_.n_gpu_layers, opts_.n_cpu_moe,
                                info_.n_moe_layers == 0 || moe_.experts_in_file(),
                                (opts_.experts_vram_mib != 0 || opts_.experts_vram_pct > 0) &&
                                    info_.n_moe_layers > 0};
  const GpuPlacement plan = plan_gpu_placement(file_, bind_.matrices(), req);
  gpu::GpuOptions go;
  go.device = opts_.gpu_device;
  go.max_cols = max_cols;
  go.max_rows = std::max(plan.max_rows, int64_t{1});
  go.max_tok = max_tok;  // a MoE layer's routed products: every token's top-k rows in one call
  go.rounding = opts_.rounding;
  std::unique_ptr<gpu::GpuBackend> g;
  try {
    g = gpu::make_backend(go);
  } catch (const Error& e) {
    fail("-ngl {}: {}", opts_.n_gpu_layers, e.what());
  }
  const gpu::DeviceInfo& dev = g->device();
  constexpr double kMiB = 1024.0 * 1024.0;
  if (plan.bytes > dev.memory_bytes) {
    fail("-ngl {}: the weights placed on the GPU need {:.0f} MiB, more than the {:.0f} MiB of device {} ({}); lower "
         "-ngl or raise --n-cpu-moe",
         opts_.n_gpu_layers, static_cast<double>(plan.bytes) / kMiB, static_cast<double>(dev.memory_bytes) / kMiB,
         dev.index, dev.name);
  }
  int64_t no_kernel = 0;  // tensors left on the CPU for want of a GPU kernel of their type
  for (const gguf::BoundMatrix& b : plan.weights) {
    if (!gpu::has_kernel(b.view.type)) {
      ++no_kernel;
      continue;
    }
    try {
      g->place(b.view);
    } catch (const Error& e) {
      fail("-ngl {}: cannot place tensor '{}' on device {} ({}): {}", opts_.n_gpu_layers, b.name, dev.index, dev.name,
           e.what());
    }
  }
  gpu_ = g.get();
  cpu_ = cpu.get();
  gpu_first_ = plan.first_layer;
  gpu_output_ = plan.output;
  gpu_kernels_ = no_kernel == 0;
  if (plan.expert_layers > 0) {
    gpu_expert_first_ = plan.first_expert_block;
    gpu_expert_last_ = plan.last_expert_block;
  }
  info_.gpu = fmt::format("device {} {} ({}): {}; {:.1f} MiB of weights in device memory{}", dev.index, dev.name,
                          dev.type, plan.describe(req), static_cast<double>(g->placed_bytes()) / kMiB,
                          no_kernel > 0 ? fmt::format(" ({} tensors of types without a GPU kernel stay on the CPU)",
                                                      no_kernel)
                                        : "");
  return std::make_unique<compute::HybridBackend>(std::move(g), std::move(cpu));
}

void DecoderModel::forward(std::span<const int32_t> tokens, int64_t pos, std::span<float> logits, LogitsMode mode,
                           std::span<int32_t> routing) {
  const auto n = static_cast<int64_t>(tokens.size());
  const int64_t D = hp_.n_embd, V = hp_.n_vocab, K = info_.n_expert_used, L = info_.n_moe_layers;
  if (n < 1 || n > info_.n_batch) fail("forward: {} tokens given, expected 1..{} (the batch size)", n, info_.n_batch);
  if (pos < 0 || pos + n > info_.n_ctx) {
    fail("forward: positions {}..{} do not fit the context of {} tokens", pos, pos + n - 1, info_.n_ctx);
  }
  const int64_t rows = mode == LogitsMode::all ? n : 1;
  if (static_cast<int64_t>(logits.size()) != rows * V) {
    fail("forward: logits span holds {} floats, expected {} ({} x n_vocab {})", logits.size(), rows * V, rows, V);
  }
  if (!routing.empty() && static_cast<int64_t>(routing.size()) != n * L * K) {
    fail("forward: routing span holds {} ids, expected {} (tokens {} x MoE layers {} x experts used {})",
         routing.size(), n * L * K, n, L, K);
  }
  float* x = x_.host();
  for (int64_t t = 0; t < n; ++t) {
    const int32_t id = tokens[static_cast<size_t>(t)];
    if (id < 0 || id >= V) fail("forward: token id {} at index {} is outside the vocabulary (size {})", id, t, V);
    quant::dequantize_row(tok_embd_, id, x + t * D);
    if (embd_scale_ != 1.0f) {
      for (int64_t i = 0; i < D; ++i) x[t * D + i] *= embd_scale_;
    }
  }
  if (gpu_blocks_ != nullptr) {
    try {
      forward_layers(x, pos, n, logits, mode, routing);
    } catch (...) {
      gpu_blocks_->discard();  // the next call starts from a clean step
      throw;
    }
  } else {
    forward_layers(x, pos, n, logits, mode, routing);
  }
  if (logit_softcap_ > 0.0f) {
    // As the reference engine evaluates it: scale by the reciprocal, tanh, scale back.
    quant::kernels::soft_cap(logits.data(), static_cast<int64_t>(logits.size()), logit_softcap_);
  }
}

void DecoderModel::forward_layers(float* x, int64_t pos, int64_t n, std::span<float> logits, LogitsMode mode,
                                  std::span<int32_t> routing) {
  const int64_t D = hp_.n_embd, K = info_.n_expert_used, L = info_.n_moe_layers;
  for (int64_t il = 0; il < hp_.n_layer; ++il) {
    cur_layer_ = il;
    if (gpu_blocks_ != nullptr && il == gpu_first_) gpu_blocks_->begin(x, n);  // the residual stream moves up
    const int64_t m = moe_.ordinal(il);
    const bool record = m >= 0 && !routing.empty();
    layer(il, x, pos, n, record ? route_.data() : nullptr);
    if (record) {
      for (int64_t t = 0; t < n; ++t) std::copy_n(route_.data() + t * K, K, routing.data() + (t * L + m) * K);
    }
  }
  const int64_t first = mode == LogitsMode::all ? 0 : n - 1, rows = mode == LogitsMode::all ? n : 1;
  if (gpu_blocks_ != nullptr && gpu_output_) {
    gpu_blocks_->logits(out_norm_, output_, first, rows, logits.data());
  } else {
    if (gpu_blocks_ != nullptr) gpu_blocks_->end(x + first * D, first, rows);  // the rows the head reads come down
    rms_norm(x + first * D, out_norm_.data(), xn_.host(), rows, D, hp_.norm_eps);
    backend_->matmul(output_, xn_.host(), logits.data(), rows);
  }
}

void DecoderModel::set_sequence(int seq) {
  if (seq < 0 || seq >= info_.n_seq)
    fail("sequence {} does not exist: the model has {} (0..{})", seq, info_.n_seq, info_.n_seq - 1);
  seq_ = seq;
}

void DecoderModel::attention_block(int64_t il, float* x, const std::vector<float>& norm, Attention& attn,
                                   const AttentionWeights& w, int64_t pos0, int64_t n_tok) {
  if (on_gpu_step()) return gpu_blocks_->attention_block(il, seq_, norm, attn, w, pos0, n_tok);
  rms_norm(x, norm.data(), xn_.host(), n_tok, hp_.n_embd, hp_.norm_eps);
  attn.forward(w, kv_[static_cast<size_t>(seq_)], il, xn_.host(), pos0, n_tok, tmp_.host(), *backend_);
  add_residual(x, tmp_.host(), n_tok * hp_.n_embd);
}

void DecoderModel::ffn_block(float* x, const std::vector<float>& norm, DenseFfn& ffn, const FfnWeights& w,
                             int64_t n_tok) {
  if (on_gpu_step()) return gpu_blocks_->ffn_block(norm, w, ffn.glu_config(), n_tok);
  rms_norm(x, norm.data(), xn_.host(), n_tok, hp_.n_embd, hp_.norm_eps);
  ffn.forward(w, xn_.host(), n_tok, tmp_.host(), *backend_);
  add_residual(x, tmp_.host(), n_tok * hp_.n_embd);
}

void DecoderModel::moe_block(int64_t il, float* x, const std::vector<float>& norm, int64_t n_tok, int32_t* routing) {
  if (on_gpu_step()) {
    if (tier_ != nullptr) {
      return gpu_blocks_->moe_block_tiered(il, norm, moe_, moe_.ffn().glu_config(), n_tok, routing,
                                           backend_->host_pool(), *tier_, *cpu_, xn_.host());
    }
    if (il >= gpu_expert_first_ && il <= gpu_expert_last_) {
      return gpu_blocks_->moe_block_gpu(il, norm, moe_, moe_.ffn().glu_config(), n_tok, routing,
                                        backend_->host_pool());
    }
    return gpu_blocks_->moe_block_cpu(il, norm, moe_, n_tok, routing, *cpu_, xn_.host(), tmp_.host());
  }
  const int64_t m = moe_.ordinal(il);
  if (prefetch_) moe_norm_[static_cast<size_t>(m)] = &norm;
  rms_norm(x, norm.data(), xn_.host(), n_tok, hp_.n_embd, hp_.norm_eps);
  moe_.forward(il, xn_.host(), n_tok, tmp_.host(), routing, *backend_);
  add_residual(x, tmp_.host(), n_tok * hp_.n_embd);
  if (prefetch_ && n_tok == 1) guess_next(m, x);
}

void DecoderModel::setup_prefetch() {
  if (info_.n_moe_layers == 0 || !moe_.experts().reads_ahead()) return;
  if (!layers_are_shared_blocks()) {
    info_.expert_prefetch = fmt::format("off: {}'s MoE blocks route an input of their own, which the guess does "
                                        "not make yet", info_.architecture);
  } else if (opts_.routing_override != nullptr) {
    info_.expert_prefetch = "off: the routing is replayed, not the router's, so there is nothing to guess";
  } else if (opts_.n_gpu_layers > 0) {
    info_.expert_prefetch = "off: with -ngl the MoE blocks' inputs live on the GPU";
  } else {
    prefetch_ = true;
    guess_ = NextLayerGuess(moe_.ffn().router());
    moe_norm_.assign(static_cast<size_t>(info_.n_moe_layers), nullptr);
    info_.expert_prefetch = "next layer: after each MoE block of a decode token, the next MoE block's router on its "
                            "output names the experts to read ahead";
  }
}

// x [n_embd]: the residual stream after MoE block m of a one-token step.
void DecoderModel::guess_next(int64_t m, const float* x) {
  const int64_t next = m + 1;
  if (next >= info_.n_moe_layers || moe_norm_[static_cast<size_t>(next)] == nullptr) return;
  float* xn = xn_.host();  // free: block m's products are done
  rms_norm(x, moe_norm_[static_cast<size_t>(next)]->data(), xn, 1, hp_.n_embd, hp_.norm_eps);
  moe_.experts().prefetch(next, guess_.guess(moe_.router(moe_.layers()[static_cast<size_t>(next)]), xn, *backend_));
}

}  // namespace moetier::model
