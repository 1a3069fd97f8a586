// A forward step recorded on the GPU: the activations, the KV cache and the small constants (norm gains, biases,
// sinks) live in device memory, and the kernels of a step (RMSNorm, RoPE, the KV store, attention, the GLUs,
// residual adds, the weight products, the routed experts' gather and combine) are recorded one after another
// into one command buffer that runs at submit(). A step submits where the host must see a result: a MoE layer's
// router logits (the host routes, src/model/gpu_blocks.h), the CPU experts' input, the logits.
//
// Free of Vulkan types, as gpu/gpu.h. Obtained from GpuBackend::step(); its arrays are allocated at setup
// (alloc/constant/kv_cache, then finish_setup) and never in the forward pass. Every recorded op reads what the ops
// before it wrote (a memory barrier separates them), except that consecutive product() calls run together: they
// must not read each other's outputs (Q, K and V; an expert's gate and up; different experts' downs).
//
// Shapes are row-major [rows, cols] floats in the step's arena; offsets and sizes are in floats.
#pragma once

#include <cassert>
#include <cstdint>
#include <span>

#include "quant/ggml_type.h"
#include "quant/matmul.h"

namespace moetier::gpu {

// Floats [offset, offset + size) of the step's device arena.
struct DevArray {
  uint32_t offset = 0;
  uint32_t size = 0;
  bool empty() const { return size == 0; }
  // Floats [off, off + n) of this array.
  DevArray sub(int64_t off, int64_t n) const {
    assert(off >= 0 && n >= 0 && off + n <= size);
    return {static_cast<uint32_t>(offset + off), static_cast<uint32_t>(n)};
  }
};

// The gated linear units of model/glu.h, by the same formulas.
enum class GluKind : uint32_t { swiglu = 0, swiglu_oai = 1, geglu = 2 };

// Attention of n_tok queries at positions pos0 .. pos0 + n_tok - 1 over KV cache `kv` (model/attention.h's
// softmax(scale q.k) v with GQA, sinks and a sliding window; keys at positions <= the query's).
struct AttentionOp {
  int kv = -1;             // a kv_cache() index
  int64_t pos0 = 0;
  int64_t n_tok = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;   // divides n_head
  int64_t head_dim = 0;    // at most 256, even
  float scale = 1.0f;      // on the scores
  int64_t window = 0;      // keys per query including itself; 0 unlimited
  DevArray sinks;          // [n_head] sink logits, or empty
};

// The grid a product's activations are rounded to for weights of type t (quant::round_activations_like_ggml):
// 0 none (F32), 1 binary16, 2 bfloat16, 3 ggml's Q8_0 blocks of 32, 4 ggml's Q8_K blocks of 256. Products whose
// weight types share a grid can read one rounded copy.
inline int activation_grid(quant::GgmlType t) {
  using T = quant::GgmlType;
  switch (t) {
    case T::F16: return 1;
    case T::BF16: return 2;
    case T::Q4_0: case T::Q4_1: case T::Q5_0: case T::Q5_1: case T::Q8_0: case T::IQ4_NL: case T::MXFP4: return 3;
    case T::Q2_K: case T::Q3_K: case T::Q4_K: case T::Q5_K: case T::Q6_K: case T::IQ4_XS: return 4;
    default: return 0;
  }
}

// One product of products_grouped(): y[n_tok, w.rows] = w x[n_tok, w.cols].
struct GroupedProduct {
  quant::WeightView w;
  DevArray x;
  DevArray y;
  int64_t n_tok = 0;
};

class DeviceStep {
 public:
  virtual ~DeviceStep() = default;

  // --- setup (before finish_setup) ---
  // n floats of scratch (zeroed).
  virtual DevArray alloc(int64_t n) = 0;
  // A device copy of v (uploaded by finish_setup). v must stay alive until then; the same span given again returns
  // the same copy.
  virtual DevArray constant(std::span<const float> v) = 0;
  // A KV cache of n_ctx positions of n_kv (even) elements each, binary16: K [n_ctx, n_kv] then V [n_ctx, n_kv].
  // Returns its index. Throws moetier::Error when it exceeds the device's storage buffer range.
  virtual int kv_cache(int64_t n_ctx, int64_t n_kv) = 0;
  // Creates the arena and the KV caches and uploads the constants; uploads and downloads then pass through
  // staging buffers of staging_floats each (0: the arena's size; a transfer larger than one is refused, a
  // submission whose transfers exceed one is split). Throws moetier::Error when they do not fit the device (the
  // arena is one storage buffer: at most maxStorageBufferRange bytes).
  virtual void finish_setup(int64_t staging_floats = 0) = 0;
  // Throws moetier::Error unless product() can run over w: its weights placed, its rows divisible into the
  // blocks of its activation grid. For a caller's setup, before it relies on the step.
  virtual void check_product(const quant::WeightView& w) const = 0;
  // Bytes of device memory the step holds (arena and KV caches).
  virtual uint64_t bytes() const = 0;

  // --- recording ---
  // Copies src[dst.size] to the staging memory now; the copy to dst is recorded here, in order with the ops.
  virtual void upload(const float* src, DevArray dst) = 0;
  // dst[src.size] receives src as the ops of this submission left it, at submit().
  virtual void download(DevArray src, float* dst) = 0;
  // y[rows, n] = rmsnorm(x[rows, n]) * w[n] (w empty: a gain of 1); y may be x.
  virtual void rms_norm(DevArray x, DevArray w, DevArray y, int64_t rows, int64_t n, float eps) = 0;
  // Rotates x[n_tok, n_heads, head_dim] in place by table[n_tok, n_rot / 2, 2] ((cos, sin) of each pair's angle
  // at the token's position, with YaRN's mscale: model::Rope::table). Pairs (2i, 2i + 1), or (i, i + n_rot / 2)
  // with neox.
  virtual void rope(DevArray x, DevArray table, int64_t n_tok, int64_t n_heads, int64_t head_dim, int64_t n_rot,
                    bool neox) = 0;
  // Stores k[n_tok, n_kv] and v[n_tok, n_kv] at positions pos0 .. pos0 + n_tok - 1 of cache kv, as binary16.
  virtual void kv_store(int kv, DevArray k, DevArray v, int64_t pos0, int64_t n_tok) = 0;
  // out[n_tok, n_head, head_dim] = attention of q[n_tok, n_head, head_dim] (AttentionOp).
  virtual void attention(const AttentionOp& op, DevArray q, DevArray out) = 0;
  // h[n] = glu(gate[n], up[n]) (model/glu.h); h may be gate.
  virtual void glu(GluKind kind, float alpha, float limit, DevArray gate, DevArray up, DevArray h, int64_t n) = 0;
  // y[r, i] += a[r, i] (or a[i] with broadcast: a bias row) for r < rows, i < n.
  virtual void add(DevArray y, DevArray a, int64_t rows, int64_t n, bool broadcast) = 0;
  // dst[i] = x[rows, cols] rounded as the CPU rounds the activations of a product over weights of type t
  // (quant::round_activations_like_ggml); returns dst, or x itself when the type needs no rounding.
  virtual DevArray round_for(quant::GgmlType t, DevArray x, DevArray dst, int64_t rows, int64_t cols) = 0;
  // y[n_tok, w.rows] = w x[n_tok, w.cols] for weights the backend placed (GpuBackend::place); x already rounded
  // (round_for). accumulate: y += w x instead (a residual add in the same dispatch, the same bits as an add()
  // of the product).
  virtual void product(const quant::WeightView& w, DevArray x, DevArray y, int64_t n_tok, bool accumulate = false) = 0;
  // The products ps (inputs already rounded), as few dispatches as their weights allow: one per weight type, shape
  // and placed buffer (a MoE layer's chosen experts: one for their gates, one for their ups). `table` is scratch
  // of at least 4 floats per product that the step fills (an upload recorded before the dispatches).
  virtual void products_grouped(std::span<const GroupedProduct> ps, DevArray table) = 0;
  // dst[i] = src[rows[i]] for rows of n floats: a MoE layer's input rows gathered by expert. `index` is scratch of
  // at least rows.size() floats that the step fills with the rows (an upload recorded before the kernel).
  virtual void gather(DevArray src, std::span<const int32_t> rows, int64_t n, DevArray dst, DevArray index) = 0;
  // out[t, i] = sum over s < k of table[(t k + s) 2 + 1] * slots[table[(t k + s) 2] n + i], slots summed in order
  // (the slot index stored as a float, exact below 2^24): a MoE layer's weighted expert outputs per token.
  // accumulate: out[t, i] += that sum (the residual add in the same dispatch, the same bits as an add()).
  virtual void combine(DevArray slots, DevArray table, DevArray out, int64_t n_tok, int64_t k, int64_t n,
                       bool accumulate = false) = 0;
  // Runs what was recorded, waits for it, and fills the download() destinations. On an error (a lost device)
  // what was recorded is discarded, as by discard(), before the exception leaves.
  virtual void submit() = 0;
  // Submits what was recorded without waiting for it: the host works on (a MoE layer's CPU experts) while the GPU
  // runs it, and the ops recorded next run after it and see its results. The next submit() waits for both and
  // fills the downloads of both. Uploads recorded after it must not overwrite what it reads (they take other
  // staging space; the arrays they write must be ones it does not read or write).
  virtual void submit_async() = 0;
  // Drops what was recorded since the last submit() and the pending downloads: after an error in the middle of a
  // step, so that the next one starts clean.
  virtual void discard() = 0;
};

}  // namespace moetier::gpu
