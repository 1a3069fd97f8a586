#include "model/kv_cache.h"

#include <cassert>

#include "quant/fp16.h"
#include "quant/kernels/vec_kernels.h"

namespace moetier::model {

KvCache::KvCache(int64_t n_layer, int64_t n_ctx, int64_t n_kv, KvType type)
    : n_layer_(n_layer), n_ctx_(n_ctx), n_kv_(n_kv), type_(type) {
  const auto n = static_cast<size_t>(n_layer * 2 * n_ctx * n_kv);
  if (type == KvType::f16) {
    f16_.assign(n, 0);
  } else {
    f32_.assign(n, 0.0f);
  }
}

void KvCache::store(int64_t layer, int64_t pos, const float* k, const float* v) {
  assert(layer < n_layer_ && pos < n_ctx_);
  if (type_ == KvType::f16) {
    uint16_t* kd = &f16_[index(layer, pos, 0, 0)];
    uint16_t* vd = &f16_[index(layer, pos, 0, 1)];
    for (int64_t i = 0; i < n_kv_; ++i) {
      kd[i] = quant::fp32_to_fp16(k[i]);
      vd[i] = quant::fp32_to_fp16(v[i]);
    }
  } else {
    float* kd = &f32_[index(layer, pos, 0, 0)];
    float* vd = &f32_[index(layer, pos, 0, 1)];
    for (int64_t i = 0; i < n_kv_; ++i) {
      kd[i] = k[i];
      vd[i] = v[i];
    }
  }
}

float KvCache::dot_k(int64_t layer, int64_t pos, int64_t off, const float* q, int64_t n) const {
  if (type_ == KvType::f16) return quant::kernels::dot_f16(q, &f16_[index(layer, pos, off, 0)], n);
  return quant::kernels::dot_f32(q, &f32_[index(layer, pos, off, 0)], n);
}

void KvCache::axpy_v(int64_t layer, int64_t pos, int64_t off, float a, float* acc, int64_t n) const {
  if (type_ == KvType::f16) return quant::kernels::axpy_f16(a, &f16_[index(layer, pos, off, 1)], acc, n);
  quant::kernels::axpy_f32(a, &f32_[index(layer, pos, off, 1)], acc, n);
}

}  // namespace moetier::model
