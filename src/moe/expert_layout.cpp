#include "moe/expert_layout.h"

#include <map>
#include <optional>

#include "gguf/tensor_binder.h"
#include "util/error.h"

namespace moetier::moe {

bool ExpertLayout::is_routed_expert_tensor(const std::string& name) {
  if (!gguf::block_index(name)) return false;
  const auto pos = name.find("_exps.");
  return pos != std::string::npos && name.find(".ffn_") != std::string::npos &&
         (name.ends_with(".weight") || name.ends_with(".bias"));
}

std::vector<ExpertSlice> LayerExperts::slices(int64_t e) const {
  std::vector<ExpertSlice> out;
  out.reserve(stacked.size());
  for (const auto* t : stacked) {
    const uint64_t per = t->n_bytes / static_cast<uint64_t>(n_expert);
    out.push_back({t, t->shard, t->file_offset + per * static_cast<uint64_t>(e), per});
  }
  return out;
}

ExpertLayout ExpertLayout::from_model(const gguf::GgufModel& model) {
  ExpertLayout lay;
  std::map<int64_t, LayerExperts> by_layer;
  std::map<int64_t, uint64_t> dense_by_layer;
  for (const auto& t : model.tensors()) {
    const auto layer = gguf::block_index(t.name);
    if (layer && is_routed_expert_tensor(t.name)) {
      auto& le = by_layer[*layer];
      le.layer = *layer;
      const int64_t n_exp = t.ne[t.n_dims - 1];
      if (n_exp <= 0) fail("{}: tensor '{}' has no experts (shape {})", model.path().string(), t.name, t.shape_string());
      if (le.n_expert == 0) le.n_expert = n_exp;
      if (le.n_expert != n_exp)
        fail("{}: tensor '{}' stacks {} experts but other expert tensors of layer {} stack {}", model.path().string(),
             t.name, n_exp, *layer, le.n_expert);
      le.stacked.push_back(&t);
      le.expert_bytes += t.n_bytes / static_cast<uint64_t>(n_exp);
      lay.expert_total_ += t.n_bytes;
    } else {
      if (layer) dense_by_layer[*layer] += t.n_bytes;
      lay.dense_total_ += t.n_bytes;
    }
  }
  for (auto& [l, le] : by_layer) {
    le.dense_bytes = dense_by_layer[l];
    lay.layers_.push_back(std::move(le));
  }
  return lay;
}

int64_t ExpertLayout::n_experts_total() const {
  int64_t n = 0;
  for (const auto& l : layers_) n += l.n_expert;
  return n;
}

std::pair<uint64_t, uint64_t> ExpertLayout::aligned_slices(uint64_t alignment) const {
  uint64_t aligned = 0, all = 0;
  for (const auto& l : layers_)
    for (int64_t e = 0; e < l.n_expert; ++e)
      for (const auto& s : l.slices(e)) {
        ++all;
        if (s.file_offset % alignment == 0) ++aligned;
      }
  return {aligned, all};
}

}  // namespace moetier::moe
