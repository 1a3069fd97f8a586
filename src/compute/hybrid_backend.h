// Two backends as one: each product runs on the first backend that holds its weights (the GPU backend for the
// weights placed in VRAM by -ngl / --n-cpu-moe), every other product on the second (the CPU backend, which reads
// any host view). The forward pass sees one compute::Backend; the split is per product, so a layer's attention can
// run on the GPU while its experts run on the CPU (docs/design.md, "The compute-backend seam").
#pragma once

#include <array>
#include <memory>

#include "compute/backend.h"

namespace moetier::compute {

class HybridBackend final : public Backend {
 public:
  // `first` is consulted first; `second` must hold every host view (the CPU backend).
  HybridBackend(std::unique_ptr<Backend> first, std::unique_ptr<Backend> second);

  std::string_view name() const override { return name_; }
  bool reads(quant::Memory m) const override { return first_->reads(m) || second_->reads(m); }
  bool holds(const quant::WeightView& w) const override { return first_->holds(w) || second_->holds(w); }
  void matmul(const quant::WeightView& w, const float* x, float* y, int64_t n_tok) override;
  void matmul_shared_x(std::span<const quant::Product> products, const float* x, int64_t n_tok) override;
  void matmul_groups(std::span<const quant::ProductGroup> groups) override;
  util::ThreadPool* host_pool() override { return second_->host_pool(); }
  Activations activations(size_t n) const override { return second_->activations(n); }
  BackendCounters counters() const override { return first_->counters(); }

  Backend& first() { return *first_; }
  Backend& second() { return *second_; }

 private:
  // A group runs on the first backend when it holds all of the group's products.
  bool first_holds(const quant::ProductGroup& g) const;
  std::unique_ptr<Backend> first_;
  std::unique_ptr<Backend> second_;
  std::string name_;
  // Groups of one matmul_groups call sorted by backend, taken kMaxGroups at a time (no allocation per call).
  static constexpr size_t kMaxGroups = 64;
  std::array<quant::ProductGroup, kMaxGroups> on_first_;
  std::array<quant::ProductGroup, kMaxGroups> on_second_;
};

}  // namespace moetier::compute
