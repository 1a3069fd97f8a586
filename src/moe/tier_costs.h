// The measured costs the VRAM tier splits a layer's misses by (moe/vram_tier.h): a miss is either computed by the
// CPU pool from RAM, or its bytes cross PCIe into a staging slot and the GPU computes it (the "PCIe share"). The
// two run side by side (the copies on the transfer queue while the pool computes), so the split minimises the
// later of the two to finish.
//
// Costs, refreshed from every measurement (exponential averages, so a model that warms up or a bus that gets busy
// moves them within a few layers):
//   - the CPU pool: ms = a * experts + b * positions (a: reading an expert's weights, b: one token's products over
//     them), a least-squares fit of decayed sums over the calls; a decode's calls have one position per expert, so
//     only a + b is seen until a prefill tells them apart;
//   - a copy: ms = bytes / (GB/s measured over the copies into slots, fills and swaps: each timed to its landing).
// The GPU's own time for a staged expert is not counted: it runs beside the CPU pool, and its time for the tier's
// hits is there anyway.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace moetier::moe {

// Where a layer's misses run (--vram-misses): as the measured costs say (the default), all on the CPU pool, or
// all that find a staging slot over PCIe (the largest first). The last two fix the placement of every expert, so
// a run gives the same bits each time; the measured split follows timings.
enum class MissRoute : uint8_t { measured, cpu, pcie };
// "auto", "cpu", "pcie"; throws moetier::Error naming the value otherwise.
MissRoute parse_miss_route(std::string_view s);
std::string_view miss_route_name(MissRoute r);


class TierCosts {
 public:
  // One call of the CPU pool: `experts` experts over `positions` (token, slot) pairs in `ms`.
  void observe_cpu(int64_t experts, int64_t positions, double ms);
  // One copy of `bytes` into slots that took `ms` to land.
  void observe_copy(uint64_t bytes, double ms);
  bool ready() const { return cpu_seen_ && copy_seen_; }

  // Predicted ms of the CPU pool for one expert over `positions` pairs, and of copying `bytes`.
  double cpu_ms(int64_t positions) const;
  double copy_ms(uint64_t bytes) const;
  double copy_gbps() const { return copy_gbps_; }

  // Which misses to copy: positions[i] and bytes[i] of miss i; at most `capacity` copies. Sets copy[i] (resized to
  // the misses' count). Misses are taken by their CPU cost, largest first, each to the side (copy or CPU) that
  // finishes it first given what that side already has. Nothing is copied before both costs were measured.
  void split(std::span<const int32_t> positions, std::span<const uint64_t> bytes, int64_t capacity,
             std::vector<uint8_t>& copy) const;

 private:
  static constexpr double kDecay = 0.9;  // weight of the sums before each new measurement
  // Decayed sums of the CPU fit: experts (e), positions (p), ms (t).
  double see_ = 0, sep_ = 0, spp_ = 0, set_ = 0, spt_ = 0;
  double a_ = 0, b_ = 0;  // ms per expert, ms per position
  bool cpu_seen_ = false;
  double copy_gbps_ = 0;
  bool copy_seen_ = false;
  mutable std::vector<int32_t> order_;  // split()'s scratch
};

}  // namespace moetier::moe
