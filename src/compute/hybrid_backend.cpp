#include "compute/hybrid_backend.h"

#include <algorithm>
#include <cassert>
#include <string>

namespace moetier::compute {

HybridBackend::HybridBackend(std::unique_ptr<Backend> first, std::unique_ptr<Backend> second)
    : first_(std::move(first)), second_(std::move(second)) {
  name_ = std::string(first_->name()) + "+" + std::string(second_->name());
}

bool HybridBackend::first_holds(const quant::ProductGroup& g) const {
  return std::all_of(g.products.begin(), g.products.end(), [&](const quant::Product& p) { return first_->holds(p.w); });
}

void HybridBackend::matmul(const quant::WeightView& w, const float* x, float* y, int64_t n_tok) {
  (first_->holds(w) ? *first_ : *second_).matmul(w, x, y, n_tok);
}

void HybridBackend::matmul_shared_x(std::span<const quant::Product> products, const float* x, int64_t n_tok) {
  const quant::ProductGroup g{products, x, n_tok, false};
  if (first_holds(g)) {
    first_->matmul_shared_x(products, x, n_tok);
  } else {
    // Mixed or all on the second: the second backend reads every host view, and the results are the same as
    // separate products (quant::matmul_shared_x).
    second_->matmul_shared_x(products, x, n_tok);
  }
}

void HybridBackend::matmul_groups(std::span<const quant::ProductGroup> groups) {
  for (size_t g0 = 0; g0 < groups.size(); g0 += kMaxGroups) {
    const size_t n = std::min(kMaxGroups, groups.size() - g0);
    size_t a = 0, b = 0;
    for (size_t i = g0; i < g0 + n; ++i) {
      if (first_holds(groups[i])) {
        on_first_[a++] = groups[i];
      } else {
        on_second_[b++] = groups[i];
      }
    }
    if (a > 0) first_->matmul_groups({on_first_.data(), a});
    if (b > 0) second_->matmul_groups({on_second_.data(), b});
  }
}

}  // namespace moetier::compute
