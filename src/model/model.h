// Loading a GGUF model for inference and running its forward pass.
//
//   gguf::GgufModel file = gguf::GgufModel::open(path);
//   std::unique_ptr<Model> m = load_model(file, ModelOptions{.n_ctx = 2048});
//   m->forward(prompt_tokens, 0, logits, LogitsMode::all);      // prefill: all tokens through each layer at once
//   m->forward({&next, 1}, n_prompt, last_logits, LogitsMode::last);  // decode
//
// The architecture is chosen by general.architecture through the registry (model/registry.h); supported:
// llama (dense, and Mixtral-style MoE when blk.*.ffn_gate_inp exists), qwen3moe, qwen35moe, gpt-oss, gemma4 (MoE
// form). Hyperparameters are validated at load (a missing or out-of-range key throws moetier::Error naming it),
// and checked against the tensors present before anything is sized by them (block_count against the blk.N names,
// widths, head counts, head sizes, expert counts and FFN widths against the first block's shapes, the error naming
// the key, its value and the tensor); every tensor is then bound with a shape check. All activation buffers, the
// KV cache and the recurrent state are allocated by load_model; forward() allocates nothing. A Model is not
// thread-safe: one forward at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "compute/backend.h"
#include "gguf/gguf.h"
#include "model/kv_cache.h"
#include "moe/cache_policy.h"
#include "moe/expert_source.h"
#include "moe/tier_costs.h"
#include "quant/matmul.h"

namespace moetier::moe {
class VramTier;
}

namespace moetier::model {

class RoutingOverride;  // model/router.h

struct ModelOptions {
  int64_t n_ctx = 0;    // KV cache positions; 0 = default_context()
  int64_t n_batch = 512;  // most tokens per forward() call (prefill chunk); capped at n_ctx
  KvType kv_type = KvType::f16;  // the reference engine's default
  int64_t n_expert_used = 0;     // 0 = the model's expert_used_count; otherwise an override (lossy)
  // match_ggml: 8-bit activations and integer dot products for quantized weights, as GGUF reference engines
  // compute (quant/matmul.h); exact: float activations in every product (slower; for diagnosis).
  quant::ActivationRounding rounding = quant::ActivationRounding::match_ggml;
  // Not owned, must outlive the model: when set, every MoE layer takes its experts from it instead of the router
  // (lossy, for benchmarks: see RoutingOverride in model/router.h and model/route_replay.h).
  RoutingOverride* routing_override = nullptr;
  // Threads for the matrix products (the CLI's -t): the model owns a pool of this many threads, the caller of
  // forward() included, created once at load. 1 = no worker threads.
  int threads = 1;
  // Independent sequences, each with its own KV cache of n_ctx positions (`serve --parallel`): set_sequence()
  // chooses the one forward() runs in. The activation buffers and the experts are shared; sequences run in turn.
  int n_seq = 1;
  // GPU placement in llama.cpp's words (model/gpu_placement.h): the products of the last n_gpu_layers blocks (and
  // of the output head when n_gpu_layers > n_layer) run on Vulkan device gpu_device over device-local copies of
  // their weights, with activations rounded as `rounding` says (as the CPU's, in another summation order); the
  // routed experts of blocks below n_cpu_moe stay on the CPU. 0: everything on the CPU. Throws moetier::Error when the binary has no Vulkan
  // backend, the device does not exist or its memory is too small.
  int n_gpu_layers = 0;
  int n_cpu_moe = 0;
  int gpu_device = 0;
  // The VRAM expert tier (moe/vram_tier.h), with -ngl: 0 off; > 0 MiB of device memory for expert slots; -1
  // (kVramAuto) the device's memory minus vram_reserve_mib, the placed weights and the KV cache. The experts
  // stay in RAM (resident) and no expert stack is placed; the step must run on the GPU.
  int64_t experts_vram_mib = 0;
  // Instead of MiB (experts_vram_mib 0): slots for this percentage (0, 100] of all the routed experts.
  double experts_vram_pct = 0;
  int64_t vram_reserve_mib = 1500;
  moe::MissRoute vram_misses = moe::MissRoute::measured;  // where the tier's misses run (moe/vram_tier.h)
  // The adaptive tier's parameters for `slots` slots over `total` experts (the engine's rule and --adapt-*
  // flags, moe::decide_adapt over RAM); called once at setup, during the model's construction. Null: defaults.
  std::function<moe::PolicyParams(int64_t slots, int64_t total)> vram_policy;
  // Hold the dense matrices whose type has a rows16 kernel on this CPU (Q8_0, Q4_K-Q6_K, MXFP4, IQ4_XS with
  // AVX512-VNNI) repacked with 16 rows in the lanes (quant/repack.h): the same results, bit for bit, from faster
  // kernels, at the cost of a copy in memory the model owns. Only where every product runs on the CPU's integer kernels
  // (no -ngl, match_ggml). Off unless asked: the engine asks for resident experts only (streamed runs are short of
  // memory, and their dense weights are placed by --dense-weights).
  bool repack = false;
  // With repack, the routed experts too when the model reads them from the mapping (no expert source given): each
  // stack whose type has a rows16 kernel becomes a copy, and its pages of the mapping are released (unmapped; see
  // evict_repacked_experts), so the process holds the copy instead of the file's pages (moe::ResidentExperts).
  // Only where the model fits in RAM: the copy is anonymous memory, which the kernel cannot drop and read again as
  // it can a mapping's pages. At load this costs a pass over the experts (the page faults of the copy as much as
  // the rearranging), on `threads` threads.
  bool repack_experts = false;
  // With repack_experts, where RAM cannot hold the copy beside the whole file in the page cache: the copied stacks'
  // file pages are evicted from the page cache as well as unmapped (release_pages), so that the kernel does not
  // reclaim them while the model computes; the next run reads them from the drive again.
  bool evict_repacked_experts = false;
};

inline constexpr int64_t kVramAuto = -1;

struct ModelInfo {
  std::string architecture;  // general.architecture
  int64_t n_vocab = 0;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_ctx = 0;         // as allocated
  int64_t n_batch = 0;       // as allocated
  int64_t n_moe_layers = 0;  // layers with routed experts (0 for dense models)
  std::vector<int64_t> moe_layers;  // [n_moe_layers]: block index of each MoE layer (model/moe_layers.h), ascending
  int64_t n_expert = 0;      // experts per MoE layer (0 for dense models)
  int64_t n_expert_used = 0; // experts chosen per token (after any override)
  int n_seq = 1;             // KV caches (ModelOptions::n_seq)
  // What lives on the GPU, for the start log ("device 0 llvmpipe (...) (cpu): blocks 0..3 of 4 and the output
  // head; the routed experts of blocks 0..3; 8.0 MiB of weights in device memory"); empty when n_gpu_layers is 0.
  std::string gpu;
  // The VRAM expert tier's slots and why ("7542 VRAM slots (30% of 24576) of 2.9 MiB, 21.6 GiB as given; the rest
  // in RAM"); empty without one.
  std::string experts_vram;
  // The next-layer prefetch (model/next_layer_guess.h): how the guesses are made, or why none are; empty when
  // the expert source does not read ahead.
  std::string expert_prefetch;
  // The repacked matrices (ModelOptions::repack): "12 matrices (4 Q8_0, 8 Q4_K), 1234.0 MiB, 16 rows in the lanes,
  // in 1.2 s with up to 2 threads" (", the routed experts' among them: 96 stacks, their pages of the file
  // unmapped" when repack_experts took some), or "off: <why>".
  std::string repack;
};

// What an architecture says about a file before loading it: the sizes that its defaults and memory estimates
// depend on (the engine's context default, the placement's and cache budget's context bytes).
struct ArchSummary {
  int64_t n_ctx_train = 0;  // <arch>.context_length
  int64_t n_layer = 0;
  // K and V elements one position stores over all layers (2 x sum over layers of n_head_kv x head_dim): KV
  // cache bytes per position = this x the KV type's element size.
  int64_t kv_elements_per_position = 0;
  // The most query heads sharing one KV head (n_head / n_head_kv): attention keeps that many score rows of
  // n_ctx floats per compute thread (model/attention.h).
  int64_t max_query_heads_per_kv = 1;
  // Floats of recurrent state one sequence keeps whatever the context (model/recurrent_state.h: the DeltaNet
  // blocks' convolution windows and delta-rule states); 0 for attention-only models.
  int64_t recurrent_floats_per_sequence = 0;
};

// The context a model gets when none is asked for: its training context, at most kMaxDefaultContext positions
// (the KV cache grows with it).
inline constexpr int64_t kMaxDefaultContext = 4096;
// The most sequences (KV caches) a model keeps (ModelOptions::n_seq).
inline constexpr int kMaxSequences = 64;
int64_t default_context(const ArchSummary& s);

enum class LogitsMode { all, last };

class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelInfo& info() const = 0;

  // Runs tokens at positions pos .. pos + n - 1 (n = tokens.size(), 1 <= n <= n_batch, pos + n <= n_ctx),
  // storing their keys/values in the cache; positions < pos must have been run before (later positions are
  // overwritten, so restarting at pos 0 begins a new sequence).
  // logits: [n, n_vocab] for LogitsMode::all, [n_vocab] (the last token's) for LogitsMode::last.
  // routing: empty, or [n, n_moe_layers, n_expert_used] receiving each MoE layer's chosen expert ids, by MoE
  // ordinal (info().moe_layers[m] is the block of ordinal m).
  // Throws moetier::Error for a token id outside the vocabulary, a full context or wrongly sized spans.
  virtual void forward(std::span<const int32_t> tokens, int64_t pos, std::span<float> logits, LogitsMode mode,
                       std::span<int32_t> routing = {}) = 0;
  // Makes later forward() calls read and write sequence `seq`'s KV cache, 0 <= seq < info().n_seq (0 at load).
  // Throws moetier::Error for a sequence outside that range.
  virtual void set_sequence(int seq) = 0;
  // Whether the current sequence, having run positions 0 .. n_past - 1, can continue at position n_keep
  // (0 <= n_keep <= n_past) with the first n_keep tokens' state kept. An attention-only model keeps any prefix (its
  // later KV rows are overwritten); a model with recurrent layers (qwen35moe) holds a summary of all n_past tokens
  // and keeps only n_keep == n_past, or 0 (a new sequence). model::Generator::rewind and the server's prefix reuse
  // ask this before keeping a prefix.
  // The device submissions and dispatches of every forward() so far (zero on the CPU).
  virtual compute::BackendCounters backend_counters() const { return {}; }
  // The VRAM expert tier (ModelOptions::experts_vram_mib), or null.
  virtual moe::VramTier* vram_tier() { return nullptr; }
  virtual bool can_keep(int64_t n_keep, int64_t n_past) const {
    (void)n_keep;
    (void)n_past;
    return true;
  }
};

// Builds the model named by the file's general.architecture. `file` must outlive the model. Routed experts come
// from `experts` when given (e.g. a streaming cache), otherwise from a moe::ResidentExperts over the mapping.
// Throws moetier::Error for an unsupported architecture (listing the supported ones), bad metadata or a
// tensor that is missing or mis-shaped.
std::unique_ptr<Model> load_model(const gguf::GgufModel& file, const ModelOptions& opts = {},
                                  std::unique_ptr<moe::ExpertSource> experts = nullptr);

// The file's ArchSummary, from its architecture's hyperparameters (no tensor is read). Throws as load_model does
// for an unsupported architecture or bad metadata.
ArchSummary summarize(const gguf::GgufModel& file);

}  // namespace moetier::model
