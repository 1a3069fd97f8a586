// Attention vector kernels (vec_kernels.h), compiled once per Highway target and dispatched at run time.
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_AVX3_DL)
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "quant/kernels/vec_kernels.cpp"
#include "hwy/foreach_target.h"  // must precede highway.h
#include "hwy/highway.h"

#include <cstdint>

#include "quant/fp16.h"
#include "quant/kernels/vec_kernels.h"

HWY_BEFORE_NAMESPACE();
namespace moetier::quant::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using DH = hn::Rebind<hwy::float16_t, DF>;

// Element i of a row as float: binary16 bits or float.
HWY_INLINE float Elem(const uint16_t* p, int64_t i) { return fp16_to_fp32(p[i]); }
HWY_INLINE float Elem(const float* p, int64_t i) { return p[i]; }
HWY_INLINE hn::Vec<DF> LoadRow(const uint16_t* p) {
  return hn::PromoteTo(DF(), hn::LoadU(DH(), reinterpret_cast<const hwy::float16_t*>(p)));
}
HWY_INLINE hn::Vec<DF> LoadRow(const float* p) { return hn::LoadU(DF(), p); }

template <class T>
HWY_INLINE float Dot(const float* HWY_RESTRICT q, const T* HWY_RESTRICT k, int64_t n) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  auto a0 = hn::Zero(df), a1 = hn::Zero(df);  // two chains: not bound by the FMA latency
  int64_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    a0 = hn::MulAdd(hn::LoadU(df, q + i), LoadRow(k + i), a0);
    a1 = hn::MulAdd(hn::LoadU(df, q + i + N), LoadRow(k + i + N), a1);
  }
  for (; i + N <= n; i += N) a0 = hn::MulAdd(hn::LoadU(df, q + i), LoadRow(k + i), a0);
  float s = hn::GetLane(hn::SumOfLanes(df, hn::Add(a0, a1)));
  for (; i < n; ++i) s += q[i] * Elem(k, i);
  return s;
}

template <class T>
HWY_INLINE void Axpy(float a, const T* HWY_RESTRICT v, float* HWY_RESTRICT acc, int64_t n) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const auto va = hn::Set(df, a);
  int64_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(hn::MulAdd(va, LoadRow(v + i), hn::LoadU(df, acc + i)), df, acc + i);
  for (; i < n; ++i) acc[i] += a * Elem(v, i);
}

float DotF16(const float* q, const uint16_t* k, int64_t n) { return Dot(q, k, n); }
float DotF32(const float* q, const float* k, int64_t n) { return Dot(q, k, n); }
void AxpyF16(float a, const uint16_t* v, float* acc, int64_t n) { Axpy(a, v, acc, n); }
void AxpyF32(float a, const float* v, float* acc, int64_t n) { Axpy(a, v, acc, n); }

}  // namespace HWY_NAMESPACE
}  // namespace moetier::quant::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace moetier::quant::kernels {

HWY_EXPORT(DotF16);
HWY_EXPORT(DotF32);
HWY_EXPORT(AxpyF16);
HWY_EXPORT(AxpyF32);

float dot_f16(const float* q, const uint16_t* k, int64_t n) { return HWY_DYNAMIC_DISPATCH(DotF16)(q, k, n); }
float dot_f32(const float* q, const float* k, int64_t n) { return HWY_DYNAMIC_DISPATCH(DotF32)(q, k, n); }
void axpy_f16(float a, const uint16_t* v, float* acc, int64_t n) { HWY_DYNAMIC_DISPATCH(AxpyF16)(a, v, acc, n); }
void axpy_f32(float a, const float* v, float* acc, int64_t n) { HWY_DYNAMIC_DISPATCH(AxpyF32)(a, v, acc, n); }

}  // namespace moetier::quant::kernels
#endif  // HWY_ONCE
