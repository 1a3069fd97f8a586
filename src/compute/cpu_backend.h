// The CPU backend: quant/'s SIMD kernels (dispatched at run time per CPU) with the rows of each product split over
// a thread pool, and the per-thread scratch they need (quantized activations, token tiles). Reads host memory
// only: the mapping, the expert cache's slots and std::vector buffers.
#pragma once

#include <cstdint>
#include <memory>

#include "compute/backend.h"
#include "quant/matmul.h"
#include "util/thread_pool.h"

namespace moetier::compute {

struct CpuBackendOptions {
  int64_t max_cols = 0;        // widest weight matrix input (n_embd, n_ff, n_head * head_dim, ...)
  int64_t max_tok = 1;         // most tokens per product (the batch size)
  int64_t max_group_rows = 0;  // most activation rows of one matmul_groups call (n_batch * n_expert_used)
  quant::ActivationRounding rounding = quant::ActivationRounding::match_ggml;
  int threads = 1;             // threads per product, the calling thread included; 1 = no pool
};

class CpuBackend final : public Backend {
 public:
  // Throws moetier::Error for a thread count outside 1..1024.
  explicit CpuBackend(const CpuBackendOptions& o);

  std::string_view name() const override { return "cpu"; }
  bool reads(quant::Memory m) const override { return m == quant::Memory::host; }
  bool holds(const quant::WeightView& w) const override { return w.memory == quant::Memory::host; }
  void matmul(const quant::WeightView& w, const float* x, float* y, int64_t n_tok) override;
  void matmul_shared_x(std::span<const quant::Product> products, const float* x, int64_t n_tok) override;
  void matmul_groups(std::span<const quant::ProductGroup> groups) override;
  util::ThreadPool* host_pool() override { return pool_.get(); }
  Activations activations(size_t n) const override { return Activations::host_floats(n); }

  quant::MatmulScratch& scratch() { return mm_; }

 private:
  std::unique_ptr<util::ThreadPool> pool_;  // threads - 1 workers; null for one thread
  quant::MatmulScratch mm_;
};

}  // namespace moetier::compute
