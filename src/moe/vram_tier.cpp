#include "moe/vram_tier.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <utility>

#include "util/error.h"

namespace moetier::moe {

namespace {

constexpr uint64_t kPartAlign = 256;  // each part of a slot starts here: aligned for any of the kernels' loads

uint64_t align(uint64_t n) { return (n + kPartAlign - 1) / kPartAlign * kPartAlign; }

uint64_t view_bytes(const quant::WeightView& w) { return static_cast<uint64_t>(w.rows) * w.row_bytes; }

// Keeps the views of the one expert a fetch delivers.
struct Grab final : ExpertConsumer {
  ExpertWeights w;
  void on_experts(std::span<const int32_t>, std::span<const ExpertWeights> weights) override { w = weights[0]; }
};

}  // namespace

VramTier::Layout VramTier::scan(ExpertSource& source) {
  Layout out;
  const ExpertShape& sh = source.shape();
  for (int64_t l = 0; l < sh.n_moe_layers; ++l) {
    Grab g;
    const int32_t e0 = 0;
    source.fetch(l, {&e0, 1}, g);
    LayerLayout ll;
    ll.gate = g.w.gate;
    ll.up = g.w.up;
    ll.down = g.w.down;
    for (quant::WeightView* v : {&ll.gate, &ll.up, &ll.down}) v->data = nullptr;
    ll.gate_at = 0;
    ll.up_at = align(view_bytes(g.w.gate));
    ll.down_at = ll.up_at + align(view_bytes(g.w.up));
    ll.bytes = view_bytes(g.w.gate) + view_bytes(g.w.up) + view_bytes(g.w.down);
    out.slot_bytes = std::max(out.slot_bytes, ll.down_at + align(view_bytes(g.w.down)));
    out.layers.push_back(ll);
  }
  return out;
}

uint64_t VramTier::slot_bytes_for(ExpertSource& source) { return scan(source).slot_bytes; }

VramTier::VramTier(gpu::GpuBackend& gpu, ExpertSource& source, int32_t n_expert_used, int64_t n_slots,
                   int64_t n_stage, const PolicyParams& params, MissRoute route)
    : VramTier(gpu, source, scan(source), n_expert_used, n_slots, n_stage, params, route) {}

VramTier::VramTier(gpu::GpuBackend& gpu, ExpertSource& source, Layout layout, int32_t n_expert_used,
                   int64_t n_slots, int64_t n_stage, const PolicyParams& params, MissRoute route)
    : gpu_(gpu),
      source_(source),
      slot_bytes_(layout.slot_bytes),
      layers_(std::move(layout.layers)),
      book_(static_cast<int32_t>(source.shape().n_moe_layers), static_cast<int32_t>(source.shape().n_expert),
            n_expert_used,
            [&] {
              std::vector<uint64_t> b;
              for (const LayerLayout& l : layers_) b.push_back(l.bytes);
              return b;
            }(),
            n_slots, params) {
  std::vector<quant::GgmlType> types;
  for (const LayerLayout& l : layers_) {
    for (const quant::WeightView* v : {&l.gate, &l.up, &l.down}) {
      if (std::find(types.begin(), types.end(), v->type) == types.end()) types.push_back(v->type);
    }
  }
  if (n_stage < 0) fail("expert tier: {} staging slots", n_stage);
  n_stage_ = n_stage;
  route_ = route;
  // The staging slots follow the cache's: slots n_slots .. n_slots + n_stage - 1.
  base_ = gpu_.reserve_slots(slot_bytes_, n_slots + n_stage, types);
  biases_.resize(static_cast<size_t>(n_slots + n_stage));
  const auto E = static_cast<size_t>(source.shape().n_expert);
  writes_.reserve(3 * E);
  keys_.reserve(E);
  stage_of_.assign(E, -1);
  copy_.assign(E, 0);
  for (auto* v : {&miss_i_, &miss_pos_, &staged_ids_, &staged_order_}) v->reserve(E);
  miss_bytes_.reserve(E);
  miss_copy_.reserve(E);
}

ExpertWeights VramTier::weights(int32_t layer, int32_t expert) const {
  const int32_t s = slot_of(layer, expert);
  assert(s >= 0);
  const LayerLayout& l = layers_[static_cast<size_t>(layer)];
  const uint8_t* slot = base_ + static_cast<uint64_t>(s) * slot_bytes_;
  ExpertWeights w;
  w.gate = l.gate;
  w.gate.data = slot + l.gate_at;
  w.up = l.up;
  w.up.data = slot + l.up_at;
  w.down = l.down;
  w.down.data = slot + l.down_at;
  const Biases& b = biases_[static_cast<size_t>(s)];
  w.gate_bias = b.gate;
  w.up_bias = b.up;
  w.down_bias = b.down;
  return w;
}

void VramTier::lookup(int32_t layer, std::span<const int32_t> experts) {
  for (const int32_t e : staged_ids_) stage_of_[static_cast<size_t>(e)] = -1;  // the last layer's staging
  staged_ids_.clear();
  std::fill(copy_.begin(), copy_.begin() + static_cast<std::ptrdiff_t>(experts.size()), 0);
  book_.lookup(layer, experts);
  if (!book_.fills().empty()) copy(layer, book_.fills());
}

void VramTier::share(int32_t layer, std::span<const int32_t> experts, std::span<const int32_t> tokens) {
  assert(experts.size() == tokens.size());
  if (n_stage_ == 0 || route_ == MissRoute::cpu) return;
  miss_i_.clear();
  miss_pos_.clear();
  miss_bytes_.clear();
  const uint64_t bytes = layers_[static_cast<size_t>(layer)].bytes;
  for (size_t i = 0; i < experts.size(); ++i) {
    if (book_.on_slot(i)) continue;
    miss_i_.push_back(static_cast<int32_t>(i));
    miss_pos_.push_back(tokens[i]);
    miss_bytes_.push_back(bytes);
  }
  if (route_ == MissRoute::measured) {
    costs_.split(miss_pos_, miss_bytes_, n_stage_, miss_copy_);
  } else {  // pcie: every miss a staging slot takes, the most tokens first (ties: the lower id)
    staged_order_.resize(miss_i_.size());
    for (size_t k = 0; k < miss_i_.size(); ++k) staged_order_[k] = static_cast<int32_t>(k);
    std::stable_sort(staged_order_.begin(), staged_order_.end(), [&](int32_t a, int32_t b) {
      return miss_pos_[static_cast<size_t>(a)] > miss_pos_[static_cast<size_t>(b)];
    });
    miss_copy_.assign(miss_i_.size(), 0);
    for (size_t k = 0; k < staged_order_.size() && static_cast<int64_t>(k) < n_stage_; ++k)
      miss_copy_[static_cast<size_t>(staged_order_[k])] = 1;
  }
  for (size_t k = 0; k < miss_i_.size(); ++k) {
    if (miss_copy_[k] == 0) continue;
    const auto i = static_cast<size_t>(miss_i_[k]);
    copy_[i] = 1;
    stage_of_[static_cast<size_t>(experts[i])] = static_cast<int32_t>(book_.n_slots()) +
                                                 static_cast<int32_t>(staged_ids_.size());
    staged_ids_.push_back(experts[i]);
  }
  if (staged_ids_.empty()) return;
  copy(layer, staged_ids_, /*stage=*/true);
  stats_.staged += staged_ids_.size();
  stats_.staged_bytes += staged_ids_.size() * bytes;
}

void VramTier::end_step() {
  const std::span<const ExpertKey> loads = book_.end_step();
  // Consecutive loads of one layer in one fetch (a pass's loads come in gain order, layers mixed).
  for (size_t i = 0; i < loads.size();) {
    keys_.clear();
    const int32_t layer = loads[i].layer;
    size_t j = i;
    for (; j < loads.size() && loads[j].layer == layer; ++j) keys_.push_back(loads[j].expert);
    std::sort(keys_.begin(), keys_.end());
    keys_.erase(std::unique(keys_.begin(), keys_.end()), keys_.end());
    copy(layer, keys_);
    for (size_t k = i; k < j; ++k) book_.landed(loads[k]);
    i = j;
  }
}

void VramTier::copy(int32_t layer, std::span<const int32_t> experts, bool stage) {
  const auto t0 = std::chrono::steady_clock::now();
  copying_layer_ = layer;
  staging_ = stage;
  copy_bytes_ = 0;
  source_.fetch(layer, experts, *this);
  if (stage) return;  // not waited for: the time to its landing is not seen here
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  stats_.copy_ms += ms;
  costs_.observe_copy(copy_bytes_, ms);
}

void VramTier::on_experts(std::span<const int32_t> experts, std::span<const ExpertWeights> weights) {
  const LayerLayout& l = layers_[static_cast<size_t>(copying_layer_)];
  writes_.clear();
  for (size_t i = 0; i < experts.size(); ++i) {
    const int32_t s = staging_ ? stage_of_[static_cast<size_t>(experts[i])] : book_.slot(copying_layer_, experts[i]);
    assert(s >= 0);
    const uint8_t* slot = base_ + static_cast<uint64_t>(s) * slot_bytes_;
    const ExpertWeights& w = weights[i];
    writes_.push_back({slot + l.gate_at, w.gate.data, view_bytes(w.gate)});
    writes_.push_back({slot + l.up_at, w.up.data, view_bytes(w.up)});
    writes_.push_back({slot + l.down_at, w.down.data, view_bytes(w.down)});
    biases_[static_cast<size_t>(s)] = {w.gate_bias, w.up_bias, w.down_bias};
    copy_bytes_ += view_bytes(w.gate) + view_bytes(w.up) + view_bytes(w.down);
  }
  gpu_.write_slots(writes_, /*wait=*/!staging_);
}

}  // namespace moetier::moe
