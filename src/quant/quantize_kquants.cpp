// Reference quantizers of the 256-element K formats.
//  * Q8_K (activation side) is a port of ggml's quantize_row_q8_K_ref.
//  * Q2_K..Q6_K use a simple scheme for tests and synthetic models (see quantize_ref.h): the fp16 super-block
//    scales and the integer sub-block scales are rounded UP so that each sub-block's range is covered, then every
//    element is rounded to the nearest level. That bounds the error by half a step, which ggml's error-minimising
//    search does not guarantee (it trades a few clipped values for a finer step).
#include <algorithm>
#include <cmath>

#include "quant/blocks.h"
#include "quant/fp16.h"
#include "quant/kquant_scales.h"
#include "quant/quantize_families.h"

namespace moetier::quant::detail {
namespace {

// The smallest fp16 value >= v (v >= 0 and finite); returns its bit pattern.
uint16_t fp16_round_up(float v) {
  uint16_t h = fp32_to_fp16(v);
  if (fp16_to_fp32(h) < v) ++h;  // positive fp16 patterns are ordered like their values
  return h;
}

// Smallest integer k in [0, kmax] with k * step >= need (kmax if none). step > 0.
int ceil_steps(float need, float step, int kmax) {
  int k = std::clamp(static_cast<int>(std::ceil(need / step)), 0, kmax);
  // The division rounds; fix up by one so that the product, computed as the dequantizer computes it, covers need.
  if (k < kmax && step * static_cast<float>(k) < need) ++k;
  return k;
}

int round_clamp(float v, int lo, int hi) { return std::clamp(static_cast<int>(std::lround(v)), lo, hi); }

// value = (d * sc[s]) * q - (dmin * mn[s]) with q in [0, qmax], sc and mn in [0, smax] (Q2_K, Q4_K, Q5_K).
struct AsymmetricQuants {
  uint16_t d = 0, dmin = 0;
  uint8_t sc[16] = {}, mn[16] = {};
  uint8_t q[kQK_K] = {};
};

AsymmetricQuants quantize_asymmetric(const float* x, int n_sub, int qmax, int smax) {
  const int len = kQK_K / n_sub;
  AsymmetricQuants r;
  // Mins: the offset subtracted is dmin * mn >= -min(0, lowest element), so the lowest level is at or below it.
  float neg[16], hi[16];
  float max_neg = 0.0f;
  for (int s = 0; s < n_sub; ++s) {
    const auto [lo_it, hi_it] = std::minmax_element(x + s * len, x + (s + 1) * len);
    neg[s] = -std::min(0.0f, *lo_it);
    hi[s] = *hi_it;
    max_neg = std::max(max_neg, neg[s]);
  }
  r.dmin = fp16_round_up(max_neg / static_cast<float>(smax));
  const float dmin = fp16_to_fp32(r.dmin);
  float offset[16], step_needed[16];
  float max_step = 0.0f;
  for (int s = 0; s < n_sub; ++s) {
    r.mn[s] = static_cast<uint8_t>(dmin > 0.0f ? ceil_steps(neg[s], dmin, smax) : 0);
    offset[s] = dmin * static_cast<float>(r.mn[s]);
    step_needed[s] = std::max(0.0f, hi[s] + offset[s]) / static_cast<float>(qmax);
    max_step = std::max(max_step, step_needed[s]);
  }
  r.d = fp16_round_up(max_step / static_cast<float>(smax));
  const float d = fp16_to_fp32(r.d);
  for (int s = 0; s < n_sub; ++s) {
    r.sc[s] = static_cast<uint8_t>(d > 0.0f ? ceil_steps(step_needed[s], d, smax) : 0);
    const float step = d * static_cast<float>(r.sc[s]);
    for (int l = s * len; l < (s + 1) * len; ++l)
      r.q[l] = static_cast<uint8_t>(step > 0.0f ? round_clamp((x[l] + offset[s]) / step, 0, qmax) : 0);
  }
  return r;
}

// value = (d * sc[s]) * q with q in [qmin, qmax] (qmin = -qmax - 1) and sc in [0, smax] (Q3_K, Q6_K). Only
// positive sub-block scales are used; the levels cover [-qmax, qmax] steps.
struct SymmetricQuants {
  uint16_t d = 0;
  int sc[16] = {};
  int q[kQK_K] = {};
};

SymmetricQuants quantize_symmetric(const float* x, int n_sub, int qmax, int smax) {
  const int len = kQK_K / n_sub;
  SymmetricQuants r;
  float step_needed[16];
  float max_step = 0.0f;
  for (int s = 0; s < n_sub; ++s) {
    float amax = 0.0f;
    for (int l = s * len; l < (s + 1) * len; ++l) amax = std::max(amax, std::fabs(x[l]));
    step_needed[s] = amax / static_cast<float>(qmax);
    max_step = std::max(max_step, step_needed[s]);
  }
  r.d = fp16_round_up(max_step / static_cast<float>(smax));
  const float d = fp16_to_fp32(r.d);
  for (int s = 0; s < n_sub; ++s) {
    r.sc[s] = d > 0.0f ? ceil_steps(step_needed[s], d, smax) : 0;
    const float step = d * static_cast<float>(r.sc[s]);
    for (int l = s * len; l < (s + 1) * len; ++l)
      r.q[l] = step > 0.0f ? round_clamp(x[l] / step, -qmax - 1, qmax) : 0;
  }
  return r;
}

}  // namespace

void quantize_q2_k(const float* x, void* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    const AsymmetricQuants r = quantize_asymmetric(x, 16, 3, 15);
    BlockQ2_K b{};
    b.d = r.d;
    b.dmin = r.dmin;
    for (int s = 0; s < 16; ++s) b.scales[s] = static_cast<uint8_t>(r.sc[s] | r.mn[s] << 4);
    for (int half = 0; half < 2; ++half)
      for (int k = 0; k < 4; ++k)
        for (int l = 0; l < 32; ++l)
          b.qs[32 * half + l] |= static_cast<uint8_t>(r.q[128 * half + 32 * k + l] << (2 * k));
    store_block(dst, i, b);
  }
}

void quantize_q3_k(const float* x, void* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    const SymmetricQuants r = quantize_symmetric(x, 16, 3, 31);
    BlockQ3_K b{};
    b.d = r.d;
    for (int s = 0; s < 16; ++s) {
      const int s6 = r.sc[s] + 32;  // stored with a +32 bias
      if (s < 8) b.scales[s] |= static_cast<uint8_t>(s6 & 0xf);
      else b.scales[s - 8] |= static_cast<uint8_t>((s6 & 0xf) << 4);
      b.scales[8 + s % 4] |= static_cast<uint8_t>((s6 >> 4) << (2 * (s / 4)));
    }
    for (int half = 0; half < 2; ++half)
      for (int k = 0; k < 4; ++k)
        for (int l = 0; l < 32; ++l) {
          const int u = r.q[128 * half + 32 * k + l] + 4;  // 0..7: low 2 bits in qs, bit 2 in hmask
          b.qs[32 * half + l] |= static_cast<uint8_t>((u & 3) << (2 * k));
          b.hmask[l] |= static_cast<uint8_t>((u >> 2) << (4 * half + k));
        }
    store_block(dst, i, b);
  }
}

void quantize_q4_k(const float* x, void* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    const AsymmetricQuants r = quantize_asymmetric(x, 8, 15, 63);
    BlockQ4_K b{};
    b.d = r.d;
    b.dmin = r.dmin;
    uint8_t sc[8], mn[8];
    std::copy(r.sc, r.sc + 8, sc);
    std::copy(r.mn, r.mn + 8, mn);
    set_scale_min_k4(sc, mn, b.scales);
    for (int s = 0; s < 8; ++s)
      for (int l = 0; l < 32; ++l) b.qs[32 * (s / 2) + l] |= static_cast<uint8_t>(r.q[32 * s + l] << (4 * (s % 2)));
    store_block(dst, i, b);
  }
}

void quantize_q5_k(const float* x, void* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    const AsymmetricQuants r = quantize_asymmetric(x, 8, 31, 63);
    BlockQ5_K b{};
    b.d = r.d;
    b.dmin = r.dmin;
    uint8_t sc[8], mn[8];
    std::copy(r.sc, r.sc + 8, sc);
    std::copy(r.mn, r.mn + 8, mn);
    set_scale_min_k4(sc, mn, b.scales);
    for (int s = 0; s < 8; ++s)
      for (int l = 0; l < 32; ++l) {
        const int q = r.q[32 * s + l];
        b.qs[32 * (s / 2) + l] |= static_cast<uint8_t>((q & 0xf) << (4 * (s % 2)));
        b.qh[l] |= static_cast<uint8_t>((q >> 4) << s);
      }
    store_block(dst, i, b);
  }
}

void quantize_q6_k(const float* x, void* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    const SymmetricQuants r = quantize_symmetric(x, 16, 31, 127);
    BlockQ6_K b{};
    b.d = r.d;
    for (int s = 0; s < 16; ++s) b.scales[s] = static_cast<int8_t>(r.sc[s]);
    for (int half = 0; half < 2; ++half)
      for (int quarter = 0; quarter < 4; ++quarter)
        for (int l = 0; l < 32; ++l) {
          const int u = r.q[128 * half + 32 * quarter + l] + 32;  // 0..63
          b.ql[64 * half + 32 * (quarter % 2) + l] |= static_cast<uint8_t>((u & 0xf) << (4 * (quarter / 2)));
          b.qh[32 * half + l] |= static_cast<uint8_t>((u >> 4) << (2 * quarter));
        }
    store_block(dst, i, b);
  }
}

void quantize_q8_k(const float* x, void* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    BlockQ8_K b{};
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < kQK_K; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    if (amax != 0.0f) {
      // ggml scales by -127/max (not 128): the element of largest magnitude maps to -127, never to -128.
      const float iscale = -127.0f / max;
      for (int j = 0; j < kQK_K; ++j) {
        // nearbyint: round half to even in the default rounding mode, as ggml's nearest_int.
        const int v = static_cast<int>(std::nearbyint(iscale * x[j]));
        b.qs[j] = static_cast<int8_t>(std::min(127, v));
      }
      for (int g = 0; g < kQK_K / 16; ++g) {
        int sum = 0;
        for (int l = 0; l < 16; ++l) sum += b.qs[16 * g + l];
        b.bsums[g] = static_cast<int16_t>(sum);
      }
      b.d = 1.0f / iscale;
    }
    store_block(dst, i, b);
  }
}

}  // namespace moetier::quant::detail
