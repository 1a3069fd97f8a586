#include "model/gpu_placement.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

namespace moetier::model {

namespace {

// The stacked routed-expert tensors ([cols, rows, n_expert]) of a block, by suffix.
bool is_expert_stack(const std::string& name) {
  for (const char* s : {".ffn_gate_exps.weight", ".ffn_up_exps.weight", ".ffn_down_exps.weight",
                        ".ffn_gate_up_exps.weight"}) {
    if (name.ends_with(s)) return true;
  }
  return false;
}

std::string block_range(int64_t first, int64_t last) {
  return first == last ? fmt::format("block {}", first) : fmt::format("blocks {}..{}", first, last);
}

}  // namespace

GpuPlacement plan_gpu_placement(const gguf::GgufModel& file, std::span<const gguf::BoundMatrix> bound,
                                const GpuPlacementRequest& r) {
  GpuPlacement p;
  p.n_layer = r.n_layer;
  p.first_layer = std::max<int64_t>(0, r.n_layer - r.n_gpu_layers);
  p.output = r.n_gpu_layers > r.n_layer;
  const bool tied = file.find("output.weight") == nullptr;
  std::set<const uint8_t*> seen;  // a weight bound twice (tied output and embeddings) is placed once
  auto add = [&](const std::string& name, const quant::WeightView& w, int64_t product_rows) {
    if (!seen.insert(w.data).second) return;
    p.weights.push_back({name, w});
    p.max_rows = std::max(p.max_rows, product_rows);
    p.bytes += static_cast<uint64_t>(w.rows) * w.row_bytes;
  };
  for (const gguf::BoundMatrix& b : bound) {
    bool on_gpu = false;
    if (b.name == "output.weight") {
      on_gpu = p.output;
    } else if (b.name == "token_embd.weight") {
      on_gpu = p.output && tied;  // only its products (the tied output head) run on the GPU; lookups read RAM
    } else if (const auto il = gguf::block_index(b.name)) {
      on_gpu = *il >= p.first_layer && *il < r.n_layer;
    }
    if (on_gpu) add(b.name, b.view, b.view.rows);
  }
  std::set<int64_t> layers;
  const int64_t first_expert = std::max<int64_t>(p.first_layer, r.n_cpu_moe);
  for (const gguf::TensorInfo& t : file.tensors()) {
    const auto il = gguf::block_index(t.name);
    if (!il || !is_expert_stack(t.name) || t.n_dims != 3) continue;
    p.has_experts = true;
    if (r.experts_in_file && !r.vram_tier && *il >= first_expert && *il < r.n_layer) {
      const quant::WeightView w{t.type, t.data, t.ne[1] * t.ne[2], t.ne[0], t.row_bytes()};
      add(t.name, w, t.ne[1]);
      layers.insert(*il);
    }
  }
  p.expert_layers = static_cast<int64_t>(layers.size());
  if (!layers.empty()) {
    p.first_expert_block = *layers.begin();
    p.last_expert_block = *layers.rbegin();
  }
  return p;
}

std::string GpuPlacement::describe(const GpuPlacementRequest& r) const {
  std::string s = first_layer >= n_layer ? std::string("no block")
                                         : fmt::format("{} of {}", block_range(first_layer, n_layer - 1), n_layer);
  if (output) s += " and the output head";
  if (!has_experts || first_layer >= n_layer) return s;
  if (expert_layers > 0) {
    s += fmt::format("; the routed experts of {}", block_range(first_expert_block, last_expert_block));
  } else {
    s += "; no routed experts";
  }
  if (r.vram_tier) {
    s += " (the VRAM tier holds experts in slots: see experts)";
  } else if (!r.experts_in_file) {
    s += " (streamed experts are computed on the CPU)";
  } else if (r.n_cpu_moe > first_layer) {
    s += fmt::format(" (--n-cpu-moe {} keeps those of blocks below {} on the CPU)", r.n_cpu_moe, r.n_cpu_moe);
  }
  return s;
}

}  // namespace moetier::model
