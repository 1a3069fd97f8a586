// The VRAM expert tier's device half: n slots of GPU memory (gpu::GpuBackend::reserve_slots), each holding one
// routed expert's gate, up and down (and, for gpt-oss, the addresses of its biases in the file), filled from the
// expert source by copies on the transfer queue (write_slots), and SlotTier's bookkeeping (moe/slot_tier.h: which
// expert holds which slot, fills, the adaptive tier's spread swaps). A MoE block on the GPU step looks its chosen
// experts up here, computes the ones in slots from their slot views (weights()) and the others where they live
// (model/gpu_blocks.h). The tier spans every MoE layer; a slot holds an expert of any layer.
//
// The PCIe share: of a layer's misses, those that the measured costs (moe/tier_costs.h) say finish sooner by
// crossing PCIe than on the CPU pool are copied into one of n_stage staging slots (outside the cache, reused by
// every layer) and computed by the GPU; the copies run on the transfer queue while the CPU pool computes the rest.
//
// A slot: gate, then up, then down, each starting on a 256-byte boundary; slot_bytes is the largest over the
// layers (a Q4_K_M file's layers differ: some downs are Q6_K).
//
// Copies happen between the step's submissions only (lookup() before the layer's products are recorded,
// end_step() between steps), so a slot never changes under a product that reads it. The source must keep the
// biases it delivers at fixed addresses (the mapping's: the resident source).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "gpu/gpu.h"
#include "moe/expert_source.h"
#include "moe/slot_tier.h"
#include "moe/tier_costs.h"

namespace moetier::moe {

struct VramTierStats {
  double copy_ms = 0.0;  // host wall time of the copies into slots (fills and swaps), each to its landing
  double cpu_ms = 0.0;   // host wall time of the CPU pool computing the misses (observe_cpu)
  uint64_t staged = 0;        // misses copied into a staging slot and computed by the GPU (the PCIe share)
  uint64_t staged_bytes = 0;  // their bytes
};

class VramTier final : private ExpertConsumer {
 public:
  // One slot's bytes for the experts of `source` (reads expert 0 of every layer).
  static uint64_t slot_bytes_for(ExpertSource& source);

  // Reserves n_slots cache slots and n_stage staging slots on gpu (setup, before its step is made). Throws
  // moetier::Error when they do not fit.
  VramTier(gpu::GpuBackend& gpu, ExpertSource& source, int32_t n_expert_used, int64_t n_slots, int64_t n_stage,
           const PolicyParams& params, MissRoute route = MissRoute::measured);

  int64_t n_slots() const { return book_.n_slots(); }
  uint64_t slot_bytes() const { return slot_bytes_; }
  void set_phase(Phase p) { book_.set_phase(p); }

  // Looks a MoE layer's distinct chosen experts up and copies the fills into their slots; then on_slot(i) says
  // whether experts[i] is computed from its slot (weights()).
  void lookup(int32_t layer, std::span<const int32_t> experts);
  bool on_slot(size_t i) const { return book_.on_slot(i); }
  // After lookup(), the same experts and each one's token count: the PCIe share of the misses, chosen from the
  // measured costs and copied into staging slots (the copies run on while the host goes on). Then staged(i) says
  // whether experts[i] (a miss) is computed by the GPU from a staging slot.
  void share(int32_t layer, std::span<const int32_t> experts, std::span<const int32_t> tokens);
  bool staged(size_t i) const { return copy_[i] != 0; }
  // The views of an expert that lookup() put on a slot or share() on a staging slot: valid until the next lookup().
  ExpertWeights weights(int32_t layer, int32_t expert) const;
  int64_t n_stage() const { return n_stage_; }
  // Ends a step: the adaptive pass (decode) and this round's swap-ins, copied now.
  void end_step();

  const SlotTier& book() const { return book_; }
  const VramTierStats& stats() const { return stats_; }
  const TierCosts& costs() const { return costs_; }
  // The MoE block reports its CPU pool's time on a layer's misses: `experts` experts over `positions` pairs.
  void observe_cpu(int64_t experts, int64_t positions, double ms) {
    stats_.cpu_ms += ms;
    costs_.observe_cpu(experts, positions, ms);
  }

 private:
  void on_experts(std::span<const int32_t> experts, std::span<const ExpertWeights> weights) override;
  // Copies experts of `layer` into their cache slots (stage: their staging slots, not waiting for the copies).
  void copy(int32_t layer, std::span<const int32_t> experts, bool stage = false);
  int32_t slot_of(int32_t layer, int32_t expert) const {
    const int32_t s = stage_of_[static_cast<size_t>(expert)];
    return s >= 0 ? s : book_.slot(layer, expert);
  }

  // The shape of one layer's experts and where each part sits in a slot.
  struct LayerLayout {
    quant::WeightView gate, up, down;  // data: null; the parts' offsets in a slot are below
    uint64_t gate_at = 0, up_at = 0, down_at = 0;  // bytes from the slot's start, multiples of 256
    uint64_t bytes = 0;                             // one expert's bytes (gate + up + down)
  };
  struct Layout {
    std::vector<LayerLayout> layers;  // [n_moe_layers]
    uint64_t slot_bytes = 0;
  };
  static Layout scan(ExpertSource& source);
  VramTier(gpu::GpuBackend& gpu, ExpertSource& source, Layout layout, int32_t n_expert_used, int64_t n_slots,
           int64_t n_stage, const PolicyParams& params, MissRoute route);
  struct Biases {
    const float* gate = nullptr;  // [n_ff] or null
    const float* up = nullptr;    // [n_ff] or null
    const float* down = nullptr;  // [n_embd] or null
  };

  gpu::GpuBackend& gpu_;
  ExpertSource& source_;
  uint64_t slot_bytes_ = 0;
  std::vector<LayerLayout> layers_;  // [n_moe_layers]
  SlotTier book_;
  const uint8_t* base_ = nullptr;    // the slots' reserved addresses (GpuBackend::reserve_slots)
  std::vector<Biases> biases_;       // [n_slots]
  int32_t copying_layer_ = 0;        // the layer on_experts is delivering
  bool staging_ = false;             // on_experts copies into staging slots
  int64_t n_stage_ = 0;
  MissRoute route_ = MissRoute::measured;
  TierCosts costs_;
  std::vector<int32_t> stage_of_;    // [n_expert]: this layer's staging slot of each expert, or -1
  std::vector<uint8_t> copy_;        // [n_expert]: share()'s choice per looked-up expert
  std::vector<int32_t> miss_i_, miss_pos_, staged_ids_, staged_order_;  // [n_expert] each: share()'s scratch
  std::vector<uint64_t> miss_bytes_;                     // [n_expert]
  std::vector<uint8_t> miss_copy_;                       // [n_expert]
  std::vector<gpu::GpuBackend::SlotWrite> writes_;  // [3 n_expert]: one delivery's copies
  std::vector<int32_t> keys_;        // [n_expert]: one layer's swap-ins
  VramTierStats stats_;
  uint64_t copy_bytes_ = 0;  // bytes the current copy() writes
};

}  // namespace moetier::moe
