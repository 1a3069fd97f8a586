// How one routed expert is read from the model file(s) into a slot, and viewed there as ExpertWeights.
//
// An expert is a set of slices, one per stacked tensor of its layer (gate, up, down and, for gpt-oss, their
// biases; for Gemma 4 the merged gate_up and down; see expert_layout.h), each at an arbitrary file offset. Direct I/O
// needs page-aligned windows, so each slice gets a region of round_up(bytes + 4095, 4096) bytes in the slot and the
// page-aligned window of the file containing the slice is read there in place; the view points at the slice's first
// byte inside the window. The window of a slice that ends in the file's last, partial page stops at the end of the file
// (the reads never ask for bytes past it; io::ModelFiles reads that tail buffered). That reads unaligned slices without
// a bounce buffer or a copy, at the cost of at most two extra pages per slice. Regions are laid out identically for
// every expert of a layer (their sizes depend only on the per-expert slice bytes), so a slot holds any expert of any
// layer once it is slot_bytes() large.
//
// Thread-safety: immutable after construction.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "moe/expert_layout.h"
#include "moe/expert_source.h"
#include "moe/io/read_engine.h"

namespace moetier::moe {

// One slice's read: the window [file_offset, file_offset + length) of shard `shard` lands at slot + region.
struct SliceRead {
  uint32_t shard = 0;
  uint64_t file_offset = 0;  // page-aligned window start, bytes
  uint64_t length = 0;       // window length: a multiple of kPage, or less where it is clipped at the file's end
  uint64_t region = 0;       // offset of the window in the slot, bytes
  uint64_t skip = 0;         // offset of the slice's first byte inside the window
  uint64_t need = 0;         // bytes of the window that must be read: skip + the slice's bytes
};

class ExpertStore {
 public:
  static constexpr int kMaxSlices = 6;  // gate, up, down + three biases

  // Derives the expert shape from the stacked tensors (gate [n_embd, n_ff, n_expert], or gate_up [n_embd, 2 n_ff,
  // n_expert]) and the MoE layers from ExpertLayout::from_model (the blocks that have them; dense blocks may come
  // anywhere, e.g. first), and checks that every MoE layer has the same routed experts (gate and up, or the merged
  // gate_up, down, and either all or none of the biases) with consistent shapes; throws moetier::Error naming the
  // tensor otherwise, or when the model has no routed experts. `model` must outlive the store. Every `layer` below is a
  // MoE ordinal in [0, n_moe_layers).
  explicit ExpertStore(const gguf::GgufModel& model);

  const ExpertShape& shape() const { return shape_; }
  const ExpertLayout& layout() const { return layout_; }
  uint64_t slot_bytes() const { return slot_bytes_; }  // bytes, a multiple of kPage
  uint64_t expert_bytes(int64_t layer) const { return layers_[static_cast<size_t>(layer)].expert_bytes; }
  uint64_t max_expert_bytes() const;  // largest expert_bytes over layers
  int n_slices(int64_t layer) const { return static_cast<int>(layers_[static_cast<size_t>(layer)].roles.size()); }

  // The read of slice `s` of (layer, expert).
  SliceRead slice_read(int64_t layer, int32_t expert, int s) const;
  // Views of (layer, expert) in a slot that its slices were read into.
  ExpertWeights view(int64_t layer, int32_t expert, const uint8_t* slot) const;

 private:
  enum class Role : uint8_t { gate, up, down, gate_bias, up_bias, down_bias, gate_up };
  struct Layer {
    std::vector<Role> roles;                        // one per slice, file order
    std::vector<const gguf::TensorInfo*> tensors;   // the stacked tensors, file order
    std::vector<uint64_t> region;                   // offset of each slice's region in a slot
    uint64_t expert_bytes = 0;
  };
  const gguf::GgufModel& model_;
  ExpertLayout layout_;
  ExpertShape shape_;
  std::vector<Layer> layers_;  // [n_moe_layers]
  uint64_t slot_bytes_ = 0;
};

}  // namespace moetier::moe
