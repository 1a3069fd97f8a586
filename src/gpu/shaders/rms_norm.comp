// y[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * w (model/rmsnorm.h; w absent: a gain of 1). One workgroup per
// row: each invocation sums the squares of every 64th element (in four interleaved sums), a fixed tree adds the 64
// sums (the same order on every run).
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "ops.glsl"

layout(push_constant) uniform Push {
  uint rows;
  uint n;
  uint x_off;
  uint w_off;  // 0xffffffff: no gain
  uint y_off;
  float eps;
} p;

shared float part[64];

void main() {
  const uint r = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  const uint lid = gl_LocalInvocationID.x;
  if (r >= p.rows) return;  // uniform per workgroup: the barriers below are reached by all or none
  const uint x0 = p.x_off + r * p.n;
  // Four independent loads in flight per invocation (a loop of one load each waited out the memory latency
  // n / 64 times: ~12 us for a row of 2048 on an H200).
  float s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
  uint i = lid;
  for (; i + 192u < p.n; i += 256u) {
    const float a = A[x0 + i], b = A[x0 + i + 64u], c = A[x0 + i + 128u], d = A[x0 + i + 192u];
    s0 += a * a;
    s1 += b * b;
    s2 += c * c;
    s3 += d * d;
  }
  for (; i < p.n; i += 64u) s0 += A[x0 + i] * A[x0 + i];
  part[lid] = (s0 + s1) + (s2 + s3);
  barrier();
  for (uint h = 32u; h > 0u; h >>= 1u) {
    if (lid < h) part[lid] += part[lid + h];
    barrier();
  }
  const float scale = 1.0 / sqrt(part[0] / float(p.n) + p.eps);
  const uint y0 = p.y_off + r * p.n;
  // Four elements per iteration here too, their loads issued together.
  for (uint i = lid; i < p.n; i += 256u) {
    float v[4], g[4];
    [[unroll]] for (uint k = 0u; k < 4u; ++k) {
      const uint j = i + 64u * k;
      v[k] = j < p.n ? A[x0 + j] : 0.0;
      g[k] = j < p.n && p.w_off != 0xffffffffu ? A[p.w_off + j] : 1.0;
    }
    [[unroll]] for (uint k = 0u; k < 4u; ++k)
      if (i + 64u * k < p.n) A[y0 + i + 64u * k] = v[k] * scale * g[k];
  }
}
