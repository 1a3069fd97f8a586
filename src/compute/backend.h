// The compute-backend seam: what a layer asks of the device that runs it. The forward pass (model/) is written
// once against this interface; a backend owns the working memory its products need and says which memory it can
// read. The CPU backend (cpu_backend.h) is the SIMD kernels of quant/ on a thread pool; a GPU backend (the Vulkan
// issue) implements the same calls over device-local buffers, and a hybrid step routes each block to the backend
// whose memory holds its weights (docs/design.md).
//
// Contracts are those of quant/matmul.h: shapes are [tokens, columns] row-major, float32, and a product reads its
// weights once per call. A backend belongs to one thread (the forward pass's); it may use its own threads inside
// a call. Calls allocate nothing: every buffer is sized at construction.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "compute/activations.h"
#include "quant/matmul.h"

namespace moetier::util {
class ThreadPool;
}

namespace moetier::compute {

// What a device backend has done since it was made: queue submissions (each a host wait) and kernel dispatches.
struct BackendCounters {
  uint64_t submissions = 0;
  uint64_t dispatches = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  // Whether this backend's products read weights and activations held in `m`.
  virtual bool reads(quant::Memory m) const = 0;
  // Whether this backend can run a product over w where w is now (the CPU: any host view; the GPU: views inside
  // the weights placed in its memory, gpu/gpu.h).
  virtual bool holds(const quant::WeightView& w) const = 0;

  // y[n_tok, w.rows] = w x[n_tok, w.cols] (quant::matmul).
  virtual void matmul(const quant::WeightView& w, const float* x, float* y, int64_t n_tok) = 0;
  // Several products of the same x[n_tok, cols] in one pass (quant::matmul_shared_x: Q, K and V).
  virtual void matmul_shared_x(std::span<const quant::Product> products, const float* x, int64_t n_tok) = 0;
  // Products with different activations in one pass (quant::matmul_groups: a MoE layer's routed experts).
  virtual void matmul_groups(std::span<const quant::ProductGroup> groups) = 0;

  // Threads that the host-side parts of a layer (attention's heads over the KV cache) may split their work
  // over; null: the calling thread only.
  virtual util::ThreadPool* host_pool() = 0;
  // An activation buffer of n floats in this backend's memory, for setup (never in the forward pass).
  virtual Activations activations(size_t n) const = 0;
  // Submissions and dispatches so far; zero for the CPU backend, which has neither.
  virtual BackendCounters counters() const { return {}; }
};

}  // namespace moetier::compute
