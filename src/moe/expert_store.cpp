#include "moe/expert_store.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <string_view>

#include "moe/io/anon_buffer.h"
#include "quant/ggml_type.h"
#include "quant/kernels/int8_kernels.h"
#include "util/error.h"

namespace moetier::moe {

namespace {

// Indexed by Role.
constexpr std::string_view kRoleSuffix[] = {"ffn_gate_exps.weight",   "ffn_up_exps.weight", "ffn_down_exps.weight",
                                            "ffn_gate_exps.bias",     "ffn_up_exps.bias",   "ffn_down_exps.bias",
                                            "ffn_gate_up_exps.weight"};
constexpr int kRoles = 7;
constexpr int kGateUp = 6;  // Role::gate_up

}  // namespace

ExpertStore::ExpertStore(const gguf::GgufModel& model) : model_(model), layout_(ExpertLayout::from_model(model)) {
  const std::string file = model.path().string();
  const auto& ls = layout_.layers();
  if (ls.empty()) fail("{}: the model has no routed experts (blk.N.ffn_*_exps tensors) to stream", file);
  const gguf::TensorInfo* gate0 = nullptr;
  bool merged = false;
  for (const auto* t : ls[0].stacked) {
    if (t->name.ends_with(kRoleSuffix[0])) gate0 = t;
    if (t->name.ends_with(kRoleSuffix[kGateUp])) {
      gate0 = t;
      merged = true;
    }
  }
  if (gate0 == nullptr || gate0->n_dims != 3 || (merged && gate0->ne[1] % 2 != 0)) {
    fail("{}: blk.{} has no 3-D ffn_gate_exps.weight (or ffn_gate_up_exps.weight of an even row count)", file,
         ls[0].layer);
  }
  shape_.n_moe_layers = static_cast<int64_t>(ls.size());
  shape_.n_expert = ls[0].n_expert;
  shape_.n_embd = gate0->ne[0];
  shape_.n_ff = merged ? gate0->ne[1] / 2 : gate0->ne[1];
  shape_.merged_gate_up = merged;
  const int64_t D = shape_.n_embd, F = shape_.n_ff, E = shape_.n_expert;
  const std::array<std::array<int64_t, 3>, kRoles> want = {
      {{D, F, E}, {D, F, E}, {F, D, E}, {F, E, 1}, {F, E, 1}, {D, E, 1}, {D, 2 * F, E}}};

  layers_.resize(ls.size());
  shape_.moe_layers.reserve(ls.size());
  for (size_t m = 0; m < ls.size(); ++m) {
    const LayerExperts& le = ls[m];
    shape_.moe_layers.push_back(le.layer);
    if (le.n_expert != E) {
      fail("{}: blk.{} has {} experts, blk.{} (the first MoE layer) has {}", file, le.layer, le.n_expert, ls[0].layer,
           E);
    }
    Layer& l = layers_[m];
    l.expert_bytes = le.expert_bytes;
    uint64_t at = 0;
    unsigned seen = 0;
    for (const auto* t : le.stacked) {
      int role = -1;
      for (int r = 0; r < kRoles; ++r) {
        if (t->name.ends_with(kRoleSuffix[r])) role = r;
      }
      if (role < 0) fail("{}: tensor '{}' is a routed-expert tensor moetier does not know", file, t->name);
      const auto& w = want[static_cast<size_t>(role)];
      const bool is_bias = role >= 3 && role < kGateUp;
      const uint32_t nd = is_bias ? 2u : 3u;
      bool ok = t->n_dims == nd;
      for (uint32_t d = 0; d < nd; ++d) ok = ok && t->ne[d] == w[d];
      if (!ok) {
        fail("{}: tensor '{}' has shape {}, expected [{}, {}{}]", file, t->name, t->shape_string(), w[0], w[1],
             nd == 3 ? ", " + std::to_string(w[2]) : std::string());
      }
      if (is_bias && t->type != quant::GgmlType::F32) {
        fail("{}: tensor '{}' has type {}, expected F32", file, t->name, quant::type_name(t->type));
      }
      if ((seen >> role) & 1u) fail("{}: tensor '{}' appears twice", file, t->name);
      seen |= 1u << role;
      l.roles.push_back(static_cast<Role>(role));
      l.tensors.push_back(t);
      l.region.push_back(at);
      // A packing matrix: gate, up and the merged gate_up's halves are [n_ff, n_embd], down [n_embd, n_ff].
      const bool down = role == static_cast<int>(Role::down);
      const int64_t rows = down ? D : F, cols = down ? F : D;
      const bool packs = !is_bias && quant::rows16_layout_fits(t->type, rows, cols) &&
                         quant::kernels::has_rows16_kernel(t->type);
      l.packs.push_back(packs ? 1 : 0);
      l.cols.push_back(cols);
      l.any_packs = l.any_packs || packs;
      n_weight_slices_ += is_bias ? 0 : 1;
      n_packing_ += packs ? 1 : 0;
      if (packs) {
        pack_scratch_ = std::max(pack_scratch_, static_cast<size_t>(quant::kRows16) * quant::row_bytes(t->type, cols));
      }
      at += io::round_up(t->n_bytes / static_cast<uint64_t>(E) + io::kPage - 1, io::kPage);
    }
    const unsigned gate_up_bits = merged ? 1u << kGateUp : 3u;  // gate_up, or gate and up
    if ((seen & (gate_up_bits | 4u)) != (gate_up_bits | 4u) || (seen & (merged ? 3u : 1u << kGateUp)) != 0) {
      fail("{}: blk.{} does not have exactly the expert weights {} that blk.{} (the first MoE layer) has", file,
           le.layer, merged ? "ffn_{gate_up,down}_exps.weight" : "ffn_{gate,up,down}_exps.weight", ls[0].layer);
    }
    const bool bias = (seen & 0x38u) == 0x38u;
    if ((seen & 0x38u) != 0 && !bias) {
      fail("{}: blk.{} has some but not all ffn_*_exps.bias tensors", file, le.layer);
    }
    if (m == 0) shape_.has_bias = bias;
    if (bias != shape_.has_bias) {
      fail("{}: blk.{} differs from blk.{} (the first MoE layer) in having expert biases", file, le.layer,
           ls[0].layer);
    }
    slot_bytes_ = std::max(slot_bytes_, at);
  }
}

uint64_t ExpertStore::max_expert_bytes() const {
  uint64_t m = 0;
  for (const Layer& l : layers_) m = std::max(m, l.expert_bytes);
  return m;
}

SliceRead ExpertStore::slice_read(int64_t layer, int32_t expert, int s) const {
  const Layer& l = layers_[static_cast<size_t>(layer)];
  const gguf::TensorInfo* t = l.tensors[static_cast<size_t>(s)];
  const uint64_t per = t->n_bytes / static_cast<uint64_t>(shape_.n_expert);
  const uint64_t off = slice_offset(t, expert);
  SliceRead r;
  r.shard = t->shard;
  r.file_offset = io::round_down(off, io::kPage);
  // Clipped at the end of the file: the last expert of a file that ends mid-page has no whole last page.
  const uint64_t file_size = model_.shards()[t->shard].file_size;
  r.length = std::min(io::round_up(off + per, io::kPage), file_size) - r.file_offset;
  r.region = l.region[static_cast<size_t>(s)];
  r.skip = off - r.file_offset;
  r.need = r.skip + per;
  return r;
}

int64_t ExpertStore::pack_groups(int64_t layer, int s) const {
  const Layer& l = layers_[static_cast<size_t>(layer)];
  if (l.packs[static_cast<size_t>(s)] == 0) return 0;
  const gguf::TensorInfo* t = l.tensors[static_cast<size_t>(s)];
  return static_cast<int64_t>(t->n_bytes / static_cast<uint64_t>(shape_.n_expert) / pack_group_bytes(layer, s));
}

size_t ExpertStore::pack_group_bytes(int64_t layer, int s) const {
  const Layer& l = layers_[static_cast<size_t>(layer)];
  const auto si = static_cast<size_t>(s);
  return static_cast<size_t>(quant::kRows16) * quant::row_bytes(l.tensors[si]->type, l.cols[si]);
}

void ExpertStore::pack_rows16(int64_t layer, int32_t expert, uint8_t* slot, int s, int64_t g0, int64_t g1,
                              uint8_t* scratch) const {
  const Layer& l = layers_[static_cast<size_t>(layer)];
  const auto si = static_cast<size_t>(s);
  assert(l.packs[si] != 0 && 0 <= g0 && g0 <= g1 && g1 <= pack_groups(layer, s));
  const gguf::TensorInfo* t = l.tensors[si];
  const int64_t cols = l.cols[si];
  const size_t rb = quant::row_bytes(t->type, cols);
  const size_t group = static_cast<size_t>(quant::kRows16) * rb;
  const uint64_t off = slice_offset(t, expert);
  uint8_t* to = slot + l.region[si];
  const uint8_t* from = to + (off - io::round_down(off, io::kPage));
  assert(group <= pack_scratch_);
  for (auto g = static_cast<uint64_t>(g0); g < static_cast<uint64_t>(g1); ++g) {
    std::memcpy(scratch, from + g * group, group);
    quant::kernels::repack_rows16(t->type, scratch, rb, cols, 0, 1, to + g * group);
  }
}

uint64_t ExpertStore::pack_rows16(int64_t layer, int32_t expert, uint8_t* slot, uint8_t* scratch) const {
  uint64_t packed = 0;
  for (int s = 0; s < n_slices(layer); ++s) {
    const int64_t n = pack_groups(layer, s);
    if (n == 0) continue;
    pack_rows16(layer, expert, slot, s, 0, n, scratch);
    packed += static_cast<uint64_t>(n) * pack_group_bytes(layer, s);
  }
  return packed;
}

ExpertWeights ExpertStore::view(int64_t layer, int32_t expert, const uint8_t* slot, quant::WeightLayout layout) const {
  const Layer& l = layers_[static_cast<size_t>(layer)];
  const int64_t D = shape_.n_embd, F = shape_.n_ff;
  const bool rows16 = layout == quant::WeightLayout::rows16;
  ExpertWeights w;
  for (size_t s = 0; s < l.roles.size(); ++s) {
    const gguf::TensorInfo* t = l.tensors[s];
    const uint64_t off = slice_offset(t, expert);
    const bool packed = rows16 && l.packs[s] != 0;
    const uint8_t* p = slot + l.region[s] + (packed ? 0 : off - io::round_down(off, io::kPage));
    const quant::WeightLayout lay = packed ? quant::WeightLayout::rows16 : quant::WeightLayout::gguf;
    const auto matrix = [&](const uint8_t* at, int64_t rows, int64_t cols) {
      return quant::WeightView{t->type, at, rows, cols, quant::row_bytes(t->type, cols), quant::Memory::host, lay};
    };
    switch (l.roles[s]) {
      case Role::gate: w.gate = matrix(p, F, D); break;
      case Role::up: w.up = matrix(p, F, D); break;
      case Role::gate_up:
        w.gate = matrix(p, F, D);
        w.up = matrix(p + static_cast<size_t>(F) * quant::row_bytes(t->type, D), F, D);
        break;
      case Role::down: w.down = matrix(p, D, F); break;
      // Biases are F32 at 4-byte aligned file offsets, so the in-window pointer is float-aligned.
      case Role::gate_bias: w.gate_bias = reinterpret_cast<const float*>(p); break;
      case Role::up_bias: w.up_bias = reinterpret_cast<const float*>(p); break;
      case Role::down_bias: w.down_bias = reinterpret_cast<const float*>(p); break;
    }
  }
  return w;
}

}  // namespace moetier::moe
