#include "moe/tier_costs.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"

namespace moetier::moe {

MissRoute parse_miss_route(std::string_view s) {
  if (s == "auto") return MissRoute::measured;
  if (s == "cpu") return MissRoute::cpu;
  if (s == "pcie") return MissRoute::pcie;
  fail("'{}' is not auto, cpu or pcie", s);
}

std::string_view miss_route_name(MissRoute r) {
  switch (r) {
    case MissRoute::measured: return "auto";
    case MissRoute::cpu: return "cpu";
    case MissRoute::pcie: return "pcie";
  }
  return "auto";
}


void TierCosts::observe_cpu(int64_t experts, int64_t positions, double ms) {
  if (experts <= 0 || positions <= 0 || !(ms >= 0)) return;
  const auto e = static_cast<double>(experts), p = static_cast<double>(positions);
  see_ = kDecay * see_ + e * e;
  sep_ = kDecay * sep_ + e * p;
  spp_ = kDecay * spp_ + p * p;
  set_ = kDecay * set_ + e * ms;
  spt_ = kDecay * spt_ + p * ms;
  cpu_seen_ = true;
  // The normal equations of ms = a e + b p. Calls with one position per expert (a decode) make them singular:
  // then all of the cost is put on the expert (a = ms per expert, b = 0), which is what a decode's split needs.
  const double det = see_ * spp_ - sep_ * sep_;
  if (det > 1e-6 * see_ * spp_) {
    a_ = (set_ * spp_ - spt_ * sep_) / det;
    b_ = (spt_ * see_ - set_ * sep_) / det;
    if (a_ >= 0 && b_ >= 0) return;
  }
  a_ = set_ / see_;
  b_ = 0;
}

void TierCosts::observe_copy(uint64_t bytes, double ms) {
  if (bytes == 0 || !(ms > 0)) return;
  const double gbps = static_cast<double>(bytes) / (ms * 1e6);
  copy_gbps_ = copy_seen_ ? kDecay * copy_gbps_ + (1 - kDecay) * gbps : gbps;
  copy_seen_ = true;
}

double TierCosts::cpu_ms(int64_t positions) const { return a_ + b_ * static_cast<double>(positions); }

double TierCosts::copy_ms(uint64_t bytes) const {
  return copy_gbps_ > 0 ? static_cast<double>(bytes) / (copy_gbps_ * 1e6) : INFINITY;
}

void TierCosts::split(std::span<const int32_t> positions, std::span<const uint64_t> bytes, int64_t capacity,
                      std::vector<uint8_t>& copy) const {
  const size_t n = positions.size();
  copy.assign(n, 0);
  if (!ready() || capacity <= 0) return;
  order_.resize(n);
  for (size_t i = 0; i < n; ++i) order_[i] = static_cast<int32_t>(i);
  std::stable_sort(order_.begin(), order_.end(), [&](int32_t x, int32_t y) {
    return positions[static_cast<size_t>(x)] > positions[static_cast<size_t>(y)];
  });
  double cpu_done = 0, copy_done = 0;
  int64_t copies = 0;
  for (const int32_t i : order_) {
    const auto k = static_cast<size_t>(i);
    const double by_cpu = cpu_done + cpu_ms(positions[k]);
    const double by_copy = copy_done + copy_ms(bytes[k]);
    if (copies < capacity && by_copy < by_cpu) {
      copy[k] = 1;
      copy_done = by_copy;
      ++copies;
    } else {
      cpu_done = by_cpu;
    }
  }
}

}  // namespace moetier::moe
