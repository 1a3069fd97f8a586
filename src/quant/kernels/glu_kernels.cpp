// GLU activation kernels (glu_kernels.h), compiled once per Highway target and dispatched at run time.
#include "quant/kernels/hwy_targets.h"  // must precede the Highway headers

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "quant/kernels/glu_kernels.cpp"
#include "hwy/foreach_target.h"  // must precede highway.h
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"

#include <cstdint>
#include <cstring>

#include "quant/kernels/glu_kernels.h"

HWY_BEFORE_NAMESPACE();
namespace moetier::quant::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;

// gate / (1 + e^(-k * gate)) * factor, lane by lane. hn::Exp is valid up to +104 (hwy/contrib/math): the argument
// is capped at 100, where e^x is already +inf in float (above ~88.7), as std::exp gives, so a very negative gate
// still yields -0.
HWY_INLINE hn::Vec<DF> Silu(DF df, hn::Vec<DF> g, hn::Vec<DF> minus_k) {
  const auto e = hn::Exp(df, hn::Min(hn::Mul(minus_k, g), hn::Set(df, 100.0f)));
  return hn::Div(g, hn::Add(hn::Set(df, 1.0f), e));
}

// swiglu_oai's constants; swiglu ignores them.
struct OaiParams {
  float alpha;
  float limit;
};

template <bool kOai>
HWY_INLINE hn::Vec<DF> GluLanes(DF df, const OaiParams& p, hn::Vec<DF> gate, hn::Vec<DF> up) {
  if constexpr (!kOai) {
    return hn::Mul(Silu(df, gate, hn::Set(df, -1.0f)), up);
  } else {
    const auto limit = hn::Set(df, p.limit);
    const auto g = hn::Min(gate, limit);
    const auto u = hn::Min(hn::Max(up, hn::Neg(limit)), limit);
    return hn::Mul(Silu(df, g, hn::Set(df, -p.alpha)), hn::Add(u, hn::Set(df, 1.0f)));
  }
}

// Whole vectors, then the last n % lanes elements through a zero-padded vector, so every element goes through
// the same lane operations wherever it sits.
template <bool kOai>
HWY_INLINE void GluT(const OaiParams& p, const float* gate, const float* up, float* h, int64_t n) {
  const DF df;
  const auto N = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  for (; i + N <= n; i += N) {
    hn::StoreU(GluLanes<kOai>(df, p, hn::LoadU(df, gate + i), hn::LoadU(df, up + i)), df, h + i);
  }
  if (i == n) return;
  HWY_ALIGN float g[hn::MaxLanes(df)] = {}, u[hn::MaxLanes(df)] = {};
  const auto rest = static_cast<size_t>(n - i);
  std::memcpy(g, gate + i, sizeof(float) * rest);
  std::memcpy(u, up + i, sizeof(float) * rest);
  hn::Store(GluLanes<kOai>(df, p, hn::Load(df, g), hn::Load(df, u)), df, g);
  std::memcpy(h + i, g, sizeof(float) * rest);
}

void Swiglu(const float* gate, const float* up, float* h, int64_t n) { GluT<false>({}, gate, up, h, n); }

void SwigluOai(const float* gate, const float* up, float* h, int64_t n, float alpha, float limit) {
  GluT<true>({alpha, limit}, gate, up, h, n);
}

}  // namespace HWY_NAMESPACE
}  // namespace moetier::quant::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace moetier::quant::kernels {

HWY_EXPORT(Swiglu);
HWY_EXPORT(SwigluOai);

void swiglu(const float* gate, const float* up, float* h, int64_t n) { HWY_DYNAMIC_DISPATCH(Swiglu)(gate, up, h, n); }

void swiglu_oai(const float* gate, const float* up, float* h, int64_t n, float alpha, float limit) {
  HWY_DYNAMIC_DISPATCH(SwigluOai)(gate, up, h, n, alpha, limit);
}

}  // namespace moetier::quant::kernels
#endif  // HWY_ONCE
