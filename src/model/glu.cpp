// GLU activations (glu.h), compiled once per Highway target and dispatched at run time.
//
// Vectorised because at decode the whole layer waits for them on the calling thread (they run between the
// experts' gate/up and down products, 8 x 768 elements per layer for Qwen3-30B-A3B): with std::exp they took
// 19% of the decode profile on a 2.1 GHz Xeon (perf, cpu-clock, 64 tokens at -t 2) while the other thread idled.
#include "quant/kernels/hwy_targets.h"  // must precede the Highway headers

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "model/glu.cpp"
#include "hwy/foreach_target.h"  // must precede highway.h
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"

#include <cstdint>
#include <cstring>

#include "model/glu.h"

HWY_BEFORE_NAMESPACE();
namespace moetier::model {
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

template <bool kOai>
HWY_INLINE hn::Vec<DF> GluLanes(DF df, const GluConfig& cfg, hn::Vec<DF> gate, hn::Vec<DF> up) {
  if constexpr (!kOai) {
    return hn::Mul(Silu(df, gate, hn::Set(df, -1.0f)), up);
  } else {
    const auto limit = hn::Set(df, cfg.limit);
    const auto g = hn::Min(gate, limit);
    const auto u = hn::Min(hn::Max(up, hn::Neg(limit)), limit);
    return hn::Mul(Silu(df, g, hn::Set(df, -cfg.alpha)), hn::Add(u, hn::Set(df, 1.0f)));
  }
}

// Whole vectors, then the last n % lanes elements through a zero-padded vector, so every element goes through
// the same lane operations wherever it sits.
template <bool kOai>
HWY_INLINE void GluT(const GluConfig& cfg, const float* gate, const float* up, float* h, int64_t n) {
  const DF df;
  const auto N = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  for (; i + N <= n; i += N) {
    hn::StoreU(GluLanes<kOai>(df, cfg, hn::LoadU(df, gate + i), hn::LoadU(df, up + i)), df, h + i);
  }
  if (i == n) return;
  HWY_ALIGN float g[hn::MaxLanes(df)] = {}, u[hn::MaxLanes(df)] = {};
  const auto rest = static_cast<size_t>(n - i);
  std::memcpy(g, gate + i, sizeof(float) * rest);
  std::memcpy(u, up + i, sizeof(float) * rest);
  hn::Store(GluLanes<kOai>(df, cfg, hn::Load(df, g), hn::Load(df, u)), df, g);
  std::memcpy(h + i, g, sizeof(float) * rest);
}

void Glu(const GluConfig& cfg, const float* gate, const float* up, float* h, int64_t n) {
  if (cfg.kind == GluConfig::Kind::swiglu) {
    GluT<false>(cfg, gate, up, h, n);
  } else {
    GluT<true>(cfg, gate, up, h, n);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace moetier::model
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace moetier::model {

HWY_EXPORT(Glu);

void glu(const GluConfig& cfg, const float* gate, const float* up, float* h, int64_t n) {
  HWY_DYNAMIC_DISPATCH(Glu)(cfg, gate, up, h, n);
}

}  // namespace moetier::model
#endif  // HWY_ONCE
