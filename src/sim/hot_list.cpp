#include "sim/hot_list.h"

#include <algorithm>
#include <numeric>

namespace moetier::sim {

std::vector<moe::ExpertKey> hot_list(const BatchedTrace& t, int64_t max_decode_steps) {
  const int32_t n_expert = t.header.n_expert;
  const size_t n = static_cast<size_t>(t.header.n_moe_layers) * static_cast<size_t>(n_expert);
  std::vector<int64_t> count(n, 0);
  const bool has_decode = t.decode_tokens > 0;
  int64_t decode_seen = 0;
  for (const Step& s : t.steps) {
    if (has_decode && s.phase != moe::Phase::decode) continue;
    if (has_decode && max_decode_steps >= 0 && decode_seen++ >= max_decode_steps) break;
    for (uint32_t b = s.batch_begin; b < s.batch_end; ++b) {
      const Batch& batch = t.batches[b];
      for (uint32_t k = batch.expert_begin; k < batch.expert_end; ++k) {
        ++count[static_cast<size_t>(batch.layer) * n_expert + t.experts[k]];
      }
    }
  }
  std::vector<int32_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return count[a] > count[b]; });
  std::vector<moe::ExpertKey> keys;
  for (int32_t i : idx) {
    if (count[i] == 0) break;
    keys.push_back({i / n_expert, i % n_expert});
  }
  return keys;
}

}  // namespace moetier::sim
