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

enum class Glu { swiglu, swiglu_oai, geglu };

template <Glu kKind>
HWY_INLINE hn::Vec<DF> GluLanes(DF df, const OaiParams& p, hn::Vec<DF> gate, hn::Vec<DF> up) {
  if constexpr (kKind == Glu::swiglu) {
    return hn::Mul(Silu(df, gate, hn::Set(df, -1.0f)), up);
  } else if constexpr (kKind == Glu::swiglu_oai) {
    const auto limit = hn::Set(df, p.limit);
    const auto g = hn::Min(gate, limit);
    const auto u = hn::Min(hn::Max(up, hn::Neg(limit)), limit);
    return hn::Mul(Silu(df, g, hn::Set(df, -p.alpha)), hn::Add(u, hn::Set(df, 1.0f)));
  } else {
    // The formula's operations in its order, (k x) (1 + (a x) x), then ((x / 2) (1 + t)) up, written as separate
    // products and sums (the compiler may still fuse some: the tests' tolerances allow either).
    const auto x = gate;
    const auto inner = hn::Mul(hn::Mul(hn::Set(df, kSqrt2OverPi), x),
                               hn::Add(hn::Set(df, 1.0f), hn::Mul(hn::Mul(hn::Set(df, kGeluCoefA), x), x)));
    const auto t = hn::Tanh(df, inner);
    return hn::Mul(hn::Mul(hn::Mul(hn::Set(df, 0.5f), x), hn::Add(hn::Set(df, 1.0f), t)), up);
  }
}

// op(a, b) over whole vectors, then the last n % lanes elements through a zero-padded vector, so every element
// goes through the same lane operations wherever it sits. out may alias a or b.
template <class Op>
HWY_INLINE void Elementwise(const float* a, const float* b, float* out, int64_t n, const Op& op) {
  const DF df;
  const auto N = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(op(df, hn::LoadU(df, a + i), hn::LoadU(df, b + i)), df, out + i);
  if (i == n) return;
  HWY_ALIGN float pa[hn::MaxLanes(df)] = {}, pb[hn::MaxLanes(df)] = {};
  const auto rest = static_cast<size_t>(n - i);
  std::memcpy(pa, a + i, sizeof(float) * rest);
  std::memcpy(pb, b + i, sizeof(float) * rest);
  hn::Store(op(df, hn::Load(df, pa), hn::Load(df, pb)), df, pa);
  std::memcpy(out + i, pa, sizeof(float) * rest);
}

template <Glu kKind>
HWY_INLINE void GluT(const OaiParams& p, const float* gate, const float* up, float* h, int64_t n) {
  Elementwise(gate, up, h, n, [&p](DF df, hn::Vec<DF> g, hn::Vec<DF> u) HWY_ATTR {
    return GluLanes<kKind>(df, p, g, u);
  });
}

void Swiglu(const float* gate, const float* up, float* h, int64_t n) { GluT<Glu::swiglu>({}, gate, up, h, n); }

void SwigluOai(const float* gate, const float* up, float* h, int64_t n, float alpha, float limit) {
  GluT<Glu::swiglu_oai>({alpha, limit}, gate, up, h, n);
}

void Geglu(const float* gate, const float* up, float* h, int64_t n) { GluT<Glu::geglu>({}, gate, up, h, n); }

// cap * tanh(v * (1 / cap)) in place; the second operand is unused (v again).
void SoftCap(float* v, int64_t n, float cap) {
  const float inv = 1.0f / cap;
  Elementwise(v, v, v, n, [inv, cap](DF df, hn::Vec<DF> x, hn::Vec<DF>) HWY_ATTR {
    return hn::Mul(hn::Tanh(df, hn::Mul(x, hn::Set(df, inv))), hn::Set(df, cap));
  });
}

}  // namespace HWY_NAMESPACE
}  // namespace moetier::quant::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace moetier::quant::kernels {

HWY_EXPORT(Swiglu);
HWY_EXPORT(SwigluOai);
HWY_EXPORT(Geglu);
HWY_EXPORT(SoftCap);

void swiglu(const float* gate, const float* up, float* h, int64_t n) { HWY_DYNAMIC_DISPATCH(Swiglu)(gate, up, h, n); }

void swiglu_oai(const float* gate, const float* up, float* h, int64_t n, float alpha, float limit) {
  HWY_DYNAMIC_DISPATCH(SwigluOai)(gate, up, h, n, alpha, limit);
}

void geglu(const float* gate, const float* up, float* h, int64_t n) { HWY_DYNAMIC_DISPATCH(Geglu)(gate, up, h, n); }

void soft_cap(float* v, int64_t n, float cap) { HWY_DYNAMIC_DISPATCH(SoftCap)(v, n, cap); }

}  // namespace moetier::quant::kernels
#endif  // HWY_ONCE
