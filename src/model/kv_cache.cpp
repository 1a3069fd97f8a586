#include "model/kv_cache.h"

#include <cassert>

#include "quant/fp16.h"
#include "quant/kernels/vec_kernels.h"
#include "util/error.h"

namespace moetier::model {

std::string_view kv_type_name(KvType t) { return t == KvType::f16 ? "f16" : "f32"; }

KvType parse_kv_type(std::string_view s) {
  if (s == "f16") return KvType::f16;
  if (s == "f32") return KvType::f32;
  fail("KV cache type '{}' is not one of f16, f32", s);
}

KvCache::KvCache(int64_t n_layer, int64_t n_ctx, int64_t n_kv, KvType type)
    : KvCache(std::vector<int64_t>(static_cast<size_t>(n_layer), n_kv), n_ctx, type) {}

KvCache::KvCache(const std::vector<int64_t>& n_kv, int64_t n_ctx, KvType type)
    : n_ctx_(n_ctx), n_kv_(n_kv), base_(n_kv.size()), type_(type) {
  size_t n = 0;
  for (size_t l = 0; l < n_kv.size(); ++l) {
    assert(n_kv[l] >= 1);
    base_[l] = n;
    n += static_cast<size_t>(2 * n_ctx * n_kv[l]);
  }
  if (type == KvType::f16) {
    f16_.assign(n, 0);
  } else {
    f32_.assign(n, 0.0f);
  }
}

void KvCache::store(int64_t layer, int64_t pos, const float* k, const float* v) {
  assert(layer < n_layer() && pos < n_ctx_);
  const int64_t nkv = n_kv_[static_cast<size_t>(layer)];
  if (type_ == KvType::f16) {
    uint16_t* kd = &f16_[index(layer, pos, 0, 0)];
    uint16_t* vd = &f16_[index(layer, pos, 0, 1)];
    for (int64_t i = 0; i < nkv; ++i) {
      kd[i] = quant::fp32_to_fp16(k[i]);
      vd[i] = quant::fp32_to_fp16(v[i]);
    }
  } else {
    float* kd = &f32_[index(layer, pos, 0, 0)];
    float* vd = &f32_[index(layer, pos, 0, 1)];
    for (int64_t i = 0; i < nkv; ++i) {
      kd[i] = k[i];
      vd[i] = v[i];
    }
  }
}

void KvCache::scores(int64_t layer, int64_t off, const float* q, int64_t group, int64_t n, int64_t j0, int64_t j1,
                     float scale, float* scores, int64_t ld_s) const {
  const int64_t nkv = n_kv_[static_cast<size_t>(layer)];
  assert(layer < n_layer() && j1 <= n_ctx_ && off + n <= nkv);
  if (type_ == KvType::f16) {
    quant::kernels::attn_scores_f16(q, group, n, &f16_[index(layer, 0, off, 0)], nkv, j0, j1, scale, scores, ld_s);
  } else {
    quant::kernels::attn_scores_f32(q, group, n, &f32_[index(layer, 0, off, 0)], nkv, j0, j1, scale, scores, ld_s);
  }
}

void KvCache::values(int64_t layer, int64_t off, const float* p, int64_t group, int64_t ld_s, int64_t j0, int64_t j1,
                     int64_t n, float* o) const {
  const int64_t nkv = n_kv_[static_cast<size_t>(layer)];
  assert(layer < n_layer() && j1 <= n_ctx_ && off + n <= nkv);
  if (type_ == KvType::f16) {
    quant::kernels::attn_values_f16(p, group, ld_s, &f16_[index(layer, 0, off, 1)], nkv, j0, j1, n, o);
  } else {
    quant::kernels::attn_values_f32(p, group, ld_s, &f32_[index(layer, 0, off, 1)], nkv, j0, j1, n, o);
  }
}

}  // namespace moetier::model
