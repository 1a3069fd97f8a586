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
// Repacked in the slot (pack_rows16): a cached expert's matrices of a type with a rows16 kernel on this CPU
// (quant/repack.h; Q8_0, Q4_K-Q6_K, MXFP4, IQ4_XS with AVX512-VNNI) can be rewritten in place, group of 16 rows by
// group, into the rows16 layout, which then starts at the slice's region (page-aligned) instead of inside the
// read window. view(..., rows16) views them there. The kernels give the GGUF layout's results bit for bit, so a
// packed expert computes the same products faster where the kernels, not memory, bound them.
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
#include "quant/repack.h"

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
  // Views of (layer, expert) in a slot that its slices were read into (gguf) or that pack_rows16 then rewrote
  // (rows16: the packed matrices as WeightLayout::rows16, the rest as read).
  ExpertWeights view(int64_t layer, int32_t expert, const uint8_t* slot,
                     quant::WeightLayout layout = quant::WeightLayout::gguf) const;

  // Whether slice s of `layer` is a matrix that pack_rows16 rewrites: a weight (not a bias) of a type with a
  // rows16 kernel on this CPU (kernels::has_rows16_kernel) whose matrices have whole groups of 16 rows (the merged
  // gate_up: n_ff a multiple of 16, so that gate and up stay apart).
  bool packs(int64_t layer, int s) const { return layers_[static_cast<size_t>(layer)].packs[static_cast<size_t>(s)]; }
  // Whether some slice of `layer` packs.
  bool layer_packs(int64_t layer) const { return layers_[static_cast<size_t>(layer)].any_packs; }
  // Weight slices (one per stacked weight tensor of each MoE layer) that pack, and all of them.
  int64_t packing_slices() const { return n_packing_; }
  int64_t weight_slices() const { return n_weight_slices_; }
  // Bytes of scratch pack_rows16 needs: one group (16 rows) of the widest packing matrix; 0 when nothing packs.
  size_t pack_scratch_bytes() const { return pack_scratch_; }
  // Groups of 16 rows in slice s of `layer` when it packs (a merged gate_up's two matrices together), else 0; and the
  // bytes of one.
  int64_t pack_groups(int64_t layer, int s) const;
  size_t pack_group_bytes(int64_t layer, int s) const;
  // Rewrites, in place, groups [g0, g1) of packing slice s (packs()) of (layer, expert) in `slot`, whose reads have
  // all landed, into the rows16 layout at the slice's region start: each group of 16 rows is copied to `scratch`
  // (pack_scratch_bytes() bytes) and repacked from there (kernels::repack_rows16). Calls must cover the slice's
  // groups in ascending order: a group's new bytes start at most the window's skip below its old ones, so they
  // overwrite only groups already copied. Once every group of every packing slice is done, the slot's GGUF bytes
  // are gone: only view(..., rows16) reads it.
  void pack_rows16(int64_t layer, int32_t expert, uint8_t* slot, int s, int64_t g0, int64_t g1,
                   uint8_t* scratch) const;
  // Every group of every packing slice of (layer, expert); returns the bytes rewritten.
  uint64_t pack_rows16(int64_t layer, int32_t expert, uint8_t* slot, uint8_t* scratch) const;

 private:
  enum class Role : uint8_t { gate, up, down, gate_bias, up_bias, down_bias, gate_up };
  struct Layer {
    std::vector<Role> roles;                        // one per slice, file order
    std::vector<const gguf::TensorInfo*> tensors;   // the stacked tensors, file order
    std::vector<uint64_t> region;                   // offset of each slice's region in a slot
    std::vector<uint8_t> packs;                     // 1 where the slice packs (packs())
    std::vector<int64_t> cols;                      // a weight slice's matrix columns: n_ff for down, else n_embd
    bool any_packs = false;
    uint64_t expert_bytes = 0;
  };
  // Absolute file offset of expert `expert`'s slice of stacked tensor t.
  uint64_t slice_offset(const gguf::TensorInfo* t, int32_t expert) const {
    return t->file_offset + t->n_bytes / static_cast<uint64_t>(shape_.n_expert) * static_cast<uint64_t>(expert);
  }
  const gguf::GgufModel& model_;
  ExpertLayout layout_;
  ExpertShape shape_;
  std::vector<Layer> layers_;  // [n_moe_layers]
  uint64_t slot_bytes_ = 0;
  int64_t n_packing_ = 0;        // weight slices that pack, all layers
  int64_t n_weight_slices_ = 0;  // weight slices, all layers
  size_t pack_scratch_ = 0;
};

}  // namespace moetier::moe
