// The key/value cache of every attention layer, allocated once for n_ctx positions.
//
// Layout per layer: K [n_ctx, n_kv] and V [n_ctx, n_kv] where n_kv = n_head_kv * head_dim, a position's row
// holding its heads one after another. n_kv may differ between layers (Gemma 4: 2 x 64 on its sliding-window
// layers, 1 x 128 on its global ones); each layer's K and V then have that layer's width. Elements are binary16 by
// default, as the reference engine keeps them (rounding K and V to F16 is part of the function it computes), or
// float32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace moetier::model {

enum class KvType { f16, f32 };
std::string_view kv_type_name(KvType t);  // "f16", "f32"
// "f16" / "f32"; throws moetier::Error naming the value and the choices otherwise.
KvType parse_kv_type(std::string_view s);

class KvCache {
 public:
  KvCache() = default;
  KvCache(int64_t n_layer, int64_t n_ctx, int64_t n_kv, KvType type);
  // Layer l's rows hold n_kv[l] elements (n_kv.size() layers, each width >= 1).
  KvCache(const std::vector<int64_t>& n_kv, int64_t n_ctx, KvType type);

  int64_t n_layer() const { return static_cast<int64_t>(n_kv_.size()); }
  int64_t n_ctx() const { return n_ctx_; }
  int64_t n_kv(int64_t layer) const { return n_kv_[static_cast<size_t>(layer)]; }
  KvType type() const { return type_; }
  size_t bytes() const { return f16_.size() * 2 + f32_.size() * 4; }

  // Store k[n_kv(layer)], v[n_kv(layer)] for `pos` of `layer`.
  void store(int64_t layer, int64_t pos, const float* k, const float* v);
  // For the `group` query heads that share the KV head at element `off` (kernels in quant/kernels/vec_kernels.h):
  // scores[g * ld_s + j] = scale * q[g * n : (g + 1) * n] . K[layer, j, off : off + n], g < group, j0 <= j < j1.
  void scores(int64_t layer, int64_t off, const float* q, int64_t group, int64_t n, int64_t j0, int64_t j1,
              float scale, float* scores, int64_t ld_s) const;
  // o[g * n + i] = sum_{j0 <= j < j1} p[g * ld_s + j] * V[layer, j, off + i], g < group, i < n (o overwritten).
  void values(int64_t layer, int64_t off, const float* p, int64_t group, int64_t ld_s, int64_t j0, int64_t j1,
              int64_t n, float* o) const;

 private:
  size_t index(int64_t layer, int64_t pos, int64_t off, int which) const {
    const auto l = static_cast<size_t>(layer);
    return base_[l] + static_cast<size_t>((which * n_ctx_ + pos) * n_kv_[l] + off);
  }
  int64_t n_ctx_ = 0;
  std::vector<int64_t> n_kv_;  // [n_layer]: elements of one K (or V) row of each layer
  std::vector<size_t> base_;   // [n_layer]: element offset of each layer's K block; its V block follows
  KvType type_ = KvType::f16;
  std::vector<uint16_t> f16_;  // per layer [2 (K, V), n_ctx, n_kv(layer)], layers one after another, when f16
  std::vector<float> f32_;     // same, when type f32
};

}  // namespace moetier::model
