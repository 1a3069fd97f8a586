#include "compute/cpu_backend.h"

#include <cassert>

#include "util/error.h"

namespace moetier::compute {

CpuBackend::CpuBackend(const CpuBackendOptions& o)
    : mm_(o.max_cols, o.max_tok, o.rounding, o.max_group_rows) {
  if (o.threads < 1 || o.threads > 1024) fail("thread count {} is out of range, expected 1..1024", o.threads);
  if (o.threads > 1) {
    pool_ = std::make_unique<util::ThreadPool>(o.threads);
    mm_.set_pool(pool_.get());
  }
}

void CpuBackend::matmul(const quant::WeightView& w, const float* x, float* y, int64_t n_tok) {
  assert(w.memory == quant::Memory::host);
  quant::matmul(w, x, y, n_tok, mm_);
}

void CpuBackend::matmul_shared_x(std::span<const quant::Product> products, const float* x, int64_t n_tok) {
  for ([[maybe_unused]] const auto& p : products) assert(p.w.memory == quant::Memory::host);
  quant::matmul_shared_x(products, x, n_tok, mm_);
}

void CpuBackend::matmul_groups(std::span<const quant::ProductGroup> groups) {
  for ([[maybe_unused]] const auto& g : groups)
    for ([[maybe_unused]] const auto& p : g.products) assert(p.w.memory == quant::Memory::host);
  quant::matmul_groups(groups, mm_);
}

}  // namespace moetier::compute
