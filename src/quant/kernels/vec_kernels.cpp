// Attention vector kernels (vec_kernels.h), compiled once per Highway target and dispatched at run time.
#include "quant/kernels/hwy_targets.h"  // must precede the Highway headers

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "quant/kernels/vec_kernels.cpp"
#include "hwy/foreach_target.h"  // must precede highway.h
#include "hwy/highway.h"
#include "hwy/cache_control.h"
#include "hwy/contrib/math/math-inl.h"

#include <cmath>
#include <cstdint>
#include <limits>

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

// Rows are strided (a position's row holds every KV head), which the hardware prefetchers follow poorly once a
// layer's cache outgrows L2: the kernels ask for the row kAhead on as they start one. bench_matvec
// Attention/qwen3-30b-a3b/ctx/N, GB/s of K and V, without -> with: 4096 2.0-2.5 -> 4.4-4.6, 32768 0.8-1.0 ->
// 2.4-2.7.
inline constexpr int64_t kAhead = 8;
// Row j's n elements from rows at `base`, ld elements apart. The address is formed as an integer: past the cache's
// end it is harmless to a prefetch but would not be a valid pointer.
template <class T>
HWY_INLINE void PrefetchRow(const T* base, int64_t j, int64_t ld, int64_t n) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(base) + static_cast<uintptr_t>(j * ld) * sizeof(T);
  for (uintptr_t off = 0; off < static_cast<uintptr_t>(n) * sizeof(T); off += 64)
    hwy::Prefetch(reinterpret_cast<const uint8_t*>(a + off));
}

// Scores of G heads (G <= 4: 8 accumulators, two chains per head so the multiply-add latency does not bound the
// loop) against rows j0 .. j1 - 1; each row's vectors are converted once for the G heads.
template <size_t G, class T>
HWY_INLINE void ScoresHeads(const float* HWY_RESTRICT q, int64_t n, const T* HWY_RESTRICT k, int64_t ld_kv,
                            int64_t j0, int64_t j1, float scale, float* HWY_RESTRICT scores, int64_t ld_s) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  for (int64_t j = j0; j < j1; ++j) {
    const T* kr = k + j * ld_kv;
    PrefetchRow(k, j + kAhead, ld_kv, n);
    hn::Vec<DF> a0[G], a1[G];
    for (size_t g = 0; g < G; ++g) a0[g] = hn::Zero(df), a1[g] = hn::Zero(df);
    int64_t i = 0;
    for (; i + 2 * N <= n; i += 2 * N) {
      const auto k0 = LoadRow(kr + i), k1 = LoadRow(kr + i + N);
      for (size_t g = 0; g < G; ++g) {
        const float* qg = q + static_cast<int64_t>(g) * n;
        a0[g] = hn::MulAdd(hn::LoadU(df, qg + i), k0, a0[g]);
        a1[g] = hn::MulAdd(hn::LoadU(df, qg + i + N), k1, a1[g]);
      }
    }
    if (i + N <= n) {
      const auto k0 = LoadRow(kr + i);
      for (size_t g = 0; g < G; ++g) a0[g] = hn::MulAdd(hn::LoadU(df, q + static_cast<int64_t>(g) * n + i), k0, a0[g]);
      i += N;
    }
    for (size_t g = 0; g < G; ++g) {
      const float* qg = q + static_cast<int64_t>(g) * n;
      float s = hn::GetLane(hn::SumOfLanes(df, hn::Add(a0[g], a1[g])));
      for (int64_t e = i; e < n; ++e) s += qg[e] * Elem(kr, e);
      scores[static_cast<int64_t>(g) * ld_s + j] = s * scale;
    }
  }
}

// Rows in tiles of kTileRows (16 KiB of F16 rows at n = 128: they stay in L1 while each block of 4 heads goes
// over them, so a row comes from L2 / L3 / DRAM once for all the heads).
inline constexpr int64_t kTileRows = 64;

template <class T>
HWY_INLINE void Scores(const float* q, int64_t group, int64_t n, const T* k, int64_t ld_kv, int64_t j0, int64_t j1,
                       float scale, float* scores, int64_t ld_s) {
  for (int64_t t0 = j0; t0 < j1; t0 += kTileRows) {
    const int64_t t1 = t0 + kTileRows < j1 ? t0 + kTileRows : j1;
    int64_t g = 0;
    for (; g + 4 <= group; g += 4) ScoresHeads<4>(q + g * n, n, k, ld_kv, t0, t1, scale, scores + g * ld_s, ld_s);
    switch (group - g) {
      case 3: ScoresHeads<3>(q + g * n, n, k, ld_kv, t0, t1, scale, scores + g * ld_s, ld_s); break;
      case 2: ScoresHeads<2>(q + g * n, n, k, ld_kv, t0, t1, scale, scores + g * ld_s, ld_s); break;
      case 1: ScoresHeads<1>(q + g * n, n, k, ld_kv, t0, t1, scale, scores + g * ld_s, ld_s); break;
      default: break;
    }
  }
}

// Weighted sums of G heads (G <= 4) over elements [i, i + 2N) of rows j0 .. j1 - 1, accumulating into o: 8
// accumulators, each row's two vectors converted once for the G heads.
template <size_t G, class T>
HWY_INLINE void ValuesHeads(const float* HWY_RESTRICT p, int64_t ld_s, const T* HWY_RESTRICT v, int64_t ld_kv,
                            int64_t j0, int64_t j1, int64_t n, int64_t i, float* HWY_RESTRICT o) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  hn::Vec<DF> a0[G], a1[G];
  for (size_t g = 0; g < G; ++g) {
    a0[g] = hn::LoadU(df, o + static_cast<int64_t>(g) * n + i);
    a1[g] = hn::LoadU(df, o + static_cast<int64_t>(g) * n + i + N);
  }
  for (int64_t j = j0; j < j1; ++j) {
    if (i == 0) PrefetchRow(v, j + kAhead, ld_kv, n);  // the tile's first pass brings its rows in
    const auto v0 = LoadRow(v + j * ld_kv + i), v1 = LoadRow(v + j * ld_kv + i + N);
    for (size_t g = 0; g < G; ++g) {
      const auto pg = hn::Set(df, p[static_cast<int64_t>(g) * ld_s + j]);
      a0[g] = hn::MulAdd(pg, v0, a0[g]);
      a1[g] = hn::MulAdd(pg, v1, a1[g]);
    }
  }
  for (size_t g = 0; g < G; ++g) {
    hn::StoreU(a0[g], df, o + static_cast<int64_t>(g) * n + i);
    hn::StoreU(a1[g], df, o + static_cast<int64_t>(g) * n + i + N);
  }
}

// Rows in tiles of kTileRows, as Scores; within a tile, up to 4 heads by 2N elements at a time in registers.
template <class T>
HWY_INLINE void Values(const float* p, int64_t group, int64_t ld_s, const T* v, int64_t ld_kv, int64_t j0,
                       int64_t j1, int64_t n, float* o) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  for (int64_t e = 0; e < group * n; ++e) o[e] = 0.0f;
  for (int64_t t0 = j0; t0 < j1; t0 += kTileRows) {
    const int64_t t1 = t0 + kTileRows < j1 ? t0 + kTileRows : j1;
    int64_t i = 0;
    for (; i + 2 * N <= n; i += 2 * N) {
      int64_t g = 0;
      for (; g + 4 <= group; g += 4) ValuesHeads<4>(p + g * ld_s, ld_s, v, ld_kv, t0, t1, n, i, o + g * n);
      switch (group - g) {
        case 3: ValuesHeads<3>(p + g * ld_s, ld_s, v, ld_kv, t0, t1, n, i, o + g * n); break;
        case 2: ValuesHeads<2>(p + g * ld_s, ld_s, v, ld_kv, t0, t1, n, i, o + g * n); break;
        case 1: ValuesHeads<1>(p + g * ld_s, ld_s, v, ld_kv, t0, t1, n, i, o + g * n); break;
        default: break;
      }
    }
    // The tail below 2N elements: one vector, then scalars, with the same per-element operation.
    for (int64_t g = 0; g < group; ++g) {
      float* og = o + g * n;
      const float* pg = p + g * ld_s;
      for (int64_t j = t0; j < t1; ++j) {
        const auto pj = hn::Set(df, pg[j]);
        int64_t e = i;
        if (e + N <= n) {
          hn::StoreU(hn::MulAdd(pj, LoadRow(v + j * ld_kv + e), hn::LoadU(df, og + e)), df, og + e);
          e += N;
        }
        for (; e < n; ++e) og[e] += pg[j] * Elem(v + j * ld_kv, e);
      }
    }
  }
}

// Softmax of one head's scores in place, with an optional sink logit (no value row; -inf without one). Three
// passes over the row: the lanes' maximum, e^(s - max) stored and summed in the lanes, the normalisation. The
// elements past the last whole vector go through a vector-sized buffer padded with -inf (e^-inf is 0), never
// touching memory past the row: Highway's MaskedLoad is a whole, aligned vector load on SSE4, NEON and EMU128.
void Softmax(float* HWY_RESTRICT s, int64_t n, float sink) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const int64_t full = n / N * N;
  const float neg_inf = -std::numeric_limits<float>::infinity();
  HWY_ALIGN float tail[HWY_MAX_BYTES / sizeof(float)];
  for (int64_t j = 0; j < N; ++j) tail[j] = full + j < n ? s[full + j] : neg_inf;
  auto vmax = hn::Max(hn::Set(df, sink), hn::Load(df, tail));
  for (int64_t j = 0; j < full; j += N) vmax = hn::Max(vmax, hn::LoadU(df, s + j));
  const float mx = hn::GetLane(hn::MaxOfLanes(df, vmax));
  const auto vmx = hn::Set(df, mx);
  auto sum0 = hn::Zero(df), sum1 = hn::Zero(df);
  int64_t j = 0;
  for (; j + 2 * N <= full; j += 2 * N) {
    const auto e0 = hn::Exp(df, hn::Sub(hn::LoadU(df, s + j), vmx));
    const auto e1 = hn::Exp(df, hn::Sub(hn::LoadU(df, s + j + N), vmx));
    hn::StoreU(e0, df, s + j);
    hn::StoreU(e1, df, s + j + N);
    sum0 = hn::Add(sum0, e0), sum1 = hn::Add(sum1, e1);
  }
  if (j < full) {
    const auto e = hn::Exp(df, hn::Sub(hn::LoadU(df, s + j), vmx));
    hn::StoreU(e, df, s + j);
    sum0 = hn::Add(sum0, e);
  }
  const auto et = hn::Exp(df, hn::Sub(hn::Load(df, tail), vmx));
  sum1 = hn::Add(sum1, et);
  double sum = hn::GetLane(hn::SumOfLanes(df, hn::Add(sum0, sum1)));
  if (sink > neg_inf) sum += std::exp(static_cast<double>(sink) - mx);
  const auto inv = hn::Set(df, static_cast<float>(1.0 / sum));
  for (j = 0; j < full; j += N) hn::StoreU(hn::Mul(hn::LoadU(df, s + j), inv), df, s + j);
  hn::Store(hn::Mul(et, inv), df, tail);
  for (j = full; j < n; ++j) s[j] = tail[j - full];
}

void ScoresF16(const float* q, int64_t group, int64_t n, const uint16_t* k, int64_t ld_kv, int64_t j0, int64_t j1,
               float scale, float* scores, int64_t ld_s) {
  Scores(q, group, n, k, ld_kv, j0, j1, scale, scores, ld_s);
}
void ScoresF32(const float* q, int64_t group, int64_t n, const float* k, int64_t ld_kv, int64_t j0, int64_t j1,
               float scale, float* scores, int64_t ld_s) {
  Scores(q, group, n, k, ld_kv, j0, j1, scale, scores, ld_s);
}
void ValuesF16(const float* p, int64_t group, int64_t ld_s, const uint16_t* v, int64_t ld_kv, int64_t j0, int64_t j1,
               int64_t n, float* o) {
  Values(p, group, ld_s, v, ld_kv, j0, j1, n, o);
}
void ValuesF32(const float* p, int64_t group, int64_t ld_s, const float* v, int64_t ld_kv, int64_t j0, int64_t j1,
               int64_t n, float* o) {
  Values(p, group, ld_s, v, ld_kv, j0, j1, n, o);
}

}  // namespace HWY_NAMESPACE
}  // namespace moetier::quant::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace moetier::quant::kernels {

HWY_EXPORT(ScoresF16);
HWY_EXPORT(ScoresF32);
HWY_EXPORT(ValuesF16);
HWY_EXPORT(ValuesF32);
HWY_EXPORT(Softmax);

void attn_scores_f16(const float* q, int64_t group, int64_t n, const uint16_t* k, int64_t ld_kv, int64_t j0,
                     int64_t j1, float scale, float* scores, int64_t ld_s) {
  HWY_DYNAMIC_DISPATCH(ScoresF16)(q, group, n, k, ld_kv, j0, j1, scale, scores, ld_s);
}
void attn_scores_f32(const float* q, int64_t group, int64_t n, const float* k, int64_t ld_kv, int64_t j0, int64_t j1,
                     float scale, float* scores, int64_t ld_s) {
  HWY_DYNAMIC_DISPATCH(ScoresF32)(q, group, n, k, ld_kv, j0, j1, scale, scores, ld_s);
}
void attn_values_f16(const float* p, int64_t group, int64_t ld_s, const uint16_t* v, int64_t ld_kv, int64_t j0,
                     int64_t j1, int64_t n, float* o) {
  HWY_DYNAMIC_DISPATCH(ValuesF16)(p, group, ld_s, v, ld_kv, j0, j1, n, o);
}
void attn_values_f32(const float* p, int64_t group, int64_t ld_s, const float* v, int64_t ld_kv, int64_t j0,
                     int64_t j1, int64_t n, float* o) {
  HWY_DYNAMIC_DISPATCH(ValuesF32)(p, group, ld_s, v, ld_kv, j0, j1, n, o);
}
void attn_softmax(float* s, int64_t n, float sink) { HWY_DYNAMIC_DISPATCH(Softmax)(s, n, sink); }

}  // namespace moetier::quant::kernels
#endif  // HWY_ONCE
