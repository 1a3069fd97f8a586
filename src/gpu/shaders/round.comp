// dst = x rounded as the CPU rounds a product's activations for the weight type (quant/matmul.cpp,
// round_activations_like_ggml): mode 1 binary16, 2 bfloat16 (one invocation per element); 3 ggml's Q8_0 grid
// (blocks of 32: scale amax / 127 rounded to bfloat16, quants clamped to +-127), 4 ggml's Q8_K grid (blocks of
// 256: scale max / -127 with max the element of largest magnitude, the first of equal ones, quants clamped to 127
// from above): a workgroup per 256 elements, 4 per invocation, the block's largest magnitude found by a tree over
// shared memory (a serial scan per block was latency-bound on a GPU: ~45 us for a 2048-wide row on an H200).
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "ops.glsl"
#include "half.glsl"

layout(push_constant) uniform Push {
  uint n;     // elements (a multiple of the block for modes 3 and 4)
  uint mode;
  uint x_off;
  uint y_off;
} p;

// Round to nearest even at bfloat16 (quant/fp16.h, fp32_to_bf16), NaN kept quiet.
float to_bf16(float f) {
  uint x = floatBitsToUint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uintBitsToFloat((x | 0x00400000u) & 0xffff0000u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return uintBitsToFloat(x & 0xffff0000u);
}

// a / b rounded to nearest even, as the CPU's IEEE division rounds it: Vulkan lets OpFDiv be 2.5 ulp off (lavapipe's
// is a * (1 / b), 1 ulp off in ~15% of Q8_K blocks), and the grids must be the CPU's to the bit. The quotient of the
// 24-bit significands by restoring long division in 32-bit integers. For finite nonzero normal a and b with a
// normal quotient (every scale below but the degenerate); other inputs fall back to a / b.
float div_rn(float a, float b) {
  const uint ua = floatBitsToUint(a), ub = floatBitsToUint(b);
  const int ea = int((ua >> 23) & 0xffu), eb = int((ub >> 23) & 0xffu);
  if (ea == 0 || eb == 0 || ea == 255 || eb == 255) return a / b;
  uint ma = (ua & 0x7fffffu) | 0x800000u;
  const uint mb = (ub & 0x7fffffu) | 0x800000u;
  int e = ea - eb + 127;  // biased exponent of the quotient for ma >= mb
  if (ma < mb) {
    ma <<= 1;
    e -= 1;
  }
  // q = floor(ma / mb * 2^23) in [2^23, 2^24); r ends as twice the remainder (r < 2 mb <= 2^25 throughout).
  uint q = 0u, r = ma;
  for (int i = 0; i < 24; ++i) {
    const bool bit = r >= mb;
    if (bit) r -= mb;
    q = (q << 1) | (bit ? 1u : 0u);
    r <<= 1;
  }
  if (r > mb || (r == mb && (q & 1u) == 1u)) {
    q += 1u;
    if (q == 0x1000000u) {
      q = 0x800000u;
      e += 1;
    }
  }
  if (e <= 0 || e >= 255) return a / b;  // a subnormal or infinite quotient
  return uintBitsToFloat(((ua ^ ub) & 0x80000000u) | (uint(e) << 23) | (q & 0x7fffffu));
}

shared float s_amax[64];
shared float s_mx[64];
shared uint s_at[64];

void main() {
  const uint id = flat_id();
  if (p.mode == 1u || p.mode == 2u) {
    if (id >= p.n) return;
    const float v = A[p.x_off + id];
    A[p.y_off + id] = p.mode == 1u ? f16_value(f16_bits(v)) : to_bf16(v);
    return;
  }
  const uint lid = gl_LocalInvocationID.x;
  // This invocation's first element; n is a multiple of 32, so all 4 are in or none.
  const uint e0 = (id - lid) * 4u + 4u * lid;
  const bool live = e0 < p.n;
  float x[4];
  float amax = 0.0, mx = 0.0;
  uint at = 0xffffffffu;  // index of mx (the first of equal magnitudes wins, as in the CPU's scan)
  if (live) {
    [[unroll]] for (uint i = 0u; i < 4u; ++i) {
      x[i] = A[p.x_off + e0 + i];
      if (abs(x[i]) > amax) {
        amax = abs(x[i]);
        mx = x[i];
        at = e0 + i;
      }
    }
  }
  s_amax[lid] = amax;
  s_mx[lid] = mx;
  s_at[lid] = at;
  barrier();
  const uint per_block = p.mode == 3u ? 8u : 64u;  // invocations per block of 32 or 256
  for (uint s = per_block / 2u; s > 0u; s >>= 1u) {
    if (lid % per_block < s) {
      const uint o = lid + s;
      if (s_amax[o] > s_amax[lid] || (s_amax[o] == s_amax[lid] && s_at[o] < s_at[lid])) {
        s_amax[lid] = s_amax[o];
        s_mx[lid] = s_mx[o];
        s_at[lid] = s_at[o];
      }
    }
    barrier();
  }
  if (!live) return;
  const uint head = lid - lid % per_block;
  amax = s_amax[head];
  mx = s_mx[head];
  const uint y0 = p.y_off + e0;
  if (p.mode == 3u) {
    const float d = to_bf16(div_rn(amax, 127.0));
    const float id_ = d != 0.0 ? div_rn(1.0, d) : 0.0;
    [[unroll]] for (uint i = 0u; i < 4u; ++i) A[y0 + i] = d * clamp(roundEven(x[i] * id_), -127.0, 127.0);
  } else if (amax == 0.0) {
    [[unroll]] for (uint i = 0u; i < 4u; ++i) A[y0 + i] = 0.0;
  } else {
    const float iscale = div_rn(-127.0, mx);
    const float d = div_rn(1.0, iscale);
    [[unroll]] for (uint i = 0u; i < 4u; ++i) A[y0 + i] = d * min(127.0, roundEven(iscale * x[i]));
  }
}
