#include "synth/random_blocks.h"

#include <cmath>
#include <cstring>

#include "quant/fp16.h"
#include "util/error.h"

namespace moetier::synth {
namespace {

using quant::GgmlType;

void fill_bytes(uint8_t* dst, size_t n, Rng& rng) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const uint64_t r = rng.next();
    std::memcpy(dst + i, &r, 8);
  }
  if (i < n) {
    const uint64_t r = rng.next();
    std::memcpy(dst + i, &r, n - i);
  }
}

void put_f16(uint8_t* p, float v) {
  const uint16_t h = quant::fp32_to_fp16(v);
  std::memcpy(p, &h, 2);
}

// One block scale with +-25% jitter, so blocks differ as they do in real models.
float jitter(float d, Rng& rng) { return d * (1.0f + 0.25f * rng.uniform_pm1()); }

// Per-format constants: `spread` is the approximate standard deviation of the dequantized value in units of the
// block scale d when quant bits and sub-block scales are uniform random (derived from each format's formula);
// d = std / spread. `min_ratio` sets the offset term (dmin or m) so the values are centred on zero.
struct Layout {
  size_t d_off;     // byte offset of the fp16 super-block scale d
  int64_t min_off;  // byte offset of the fp16 offset term (dmin or m), -1 if none
  float spread;
  float min_ratio;  // offset term = min_ratio * d (sign as the format applies it)
};

bool layout_of(GgmlType t, Layout& l) {
  switch (t) {
    case GgmlType::Q4_0: l = {0, -1, 4.6f, 0.0f}; return true;      // d * (q - 8), q in 0..15
    case GgmlType::Q4_1: l = {0, 2, 4.6f, -7.5f}; return true;      // d * q + m
    case GgmlType::Q5_0: l = {0, -1, 9.2f, 0.0f}; return true;      // d * (q - 16), q in 0..31
    case GgmlType::Q5_1: l = {0, 2, 9.2f, -15.5f}; return true;     // d * q + m
    case GgmlType::Q8_0: l = {0, -1, 73.9f, 0.0f}; return true;     // d * q, q int8
    case GgmlType::Q2_K: l = {80, 82, 10.0f, 1.5f}; return true;    // d*sc*q - dmin*m, sc/m 4-bit, q 2-bit
    case GgmlType::Q3_K: l = {108, -1, 42.0f, 0.0f}; return true;   // d*(sc-32)*q, q in -4..3
    case GgmlType::Q4_K: l = {0, 2, 250.0f, 7.5f}; return true;     // d*sc*q - dmin*m, sc/m 6-bit, q 4-bit
    case GgmlType::Q5_K: l = {0, 2, 500.0f, 15.5f}; return true;    // as Q4_K with 5-bit q
    case GgmlType::Q6_K: l = {208, -1, 1370.0f, 0.0f}; return true;  // d*sc*(q-32), sc int8, q 6-bit
    case GgmlType::IQ4_NL: l = {0, -1, 70.0f, 0.0f}; return true;   // d * kvalues[q], |kvalues| <= 127
    case GgmlType::IQ4_XS: l = {0, -1, 1300.0f, 0.0f}; return true;  // d*(ls-32)*kvalues[q]
    default: return false;
  }
}

}  // namespace

bool can_fill(GgmlType t) {
  Layout l;
  return layout_of(t, l) || t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16 ||
         t == GgmlType::MXFP4;
}

void fill_random(GgmlType t, uint8_t* dst, int64_t n_elems, float std, Rng& rng) {
  const auto& tr = quant::traits(t);
  const size_t n_bytes = quant::row_bytes(t, n_elems);
  const int64_t n_blocks = n_elems / tr.block_size;
  const float amp = std * std::sqrt(3.0f);  // uniform in [-amp, amp) has standard deviation std
  switch (t) {
    case GgmlType::F32:
      for (int64_t i = 0; i < n_elems; ++i) {
        const float v = amp * rng.uniform_pm1();
        std::memcpy(dst + 4 * i, &v, 4);
      }
      return;
    case GgmlType::F16:
    case GgmlType::BF16:
      for (int64_t i = 0; i < n_elems; ++i) {
        const float v = amp * rng.uniform_pm1();
        const uint16_t h = t == GgmlType::F16 ? quant::fp32_to_fp16(v) : quant::fp32_to_bf16(v);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      return;
    case GgmlType::MXFP4: {
      // value = E2M1(q) * 2^(e - 127); E2M1 magnitudes {0, .5, 1, 1.5, 2, 3, 4, 6} have an RMS near 2.9.
      fill_bytes(dst, n_bytes, rng);
      const int base = 127 + static_cast<int>(std::lround(std::log2(std / 2.9f)));
      for (int64_t b = 0; b < n_blocks; ++b) {
        const int e = base + static_cast<int>(rng.next() % 3) - 1;
        dst[static_cast<size_t>(b) * tr.type_size] = static_cast<uint8_t>(e < 1 ? 1 : (e > 254 ? 254 : e));
      }
      return;
    }
    default:
      break;
  }
  Layout l;
  if (!layout_of(t, l)) fail("synth cannot generate tensors of type {}", quant::type_name(t));
  fill_bytes(dst, n_bytes, rng);
  const float d0 = std / l.spread;
  for (int64_t b = 0; b < n_blocks; ++b) {
    uint8_t* blk = dst + static_cast<size_t>(b) * tr.type_size;
    const float d = jitter(d0, rng);
    put_f16(blk + l.d_off, d);
    if (l.min_off >= 0) put_f16(blk + l.min_off, l.min_ratio * d);
  }
}

}  // namespace moetier::synth
