// y[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * w (model/rmsnorm.h; w absent: a gain of 1). One workgroup per
// row: each invocation sums the squares of every 64th element, a fixed tree adds the 64 sums (the same order on
// every run).
#version 450
#extension GL_GOOGLE_include_directive : require
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
  float s = 0.0;
  for (uint i = lid; i < p.n; i += 64u) s += A[x0 + i] * A[x0 + i];
  part[lid] = s;
  barrier();
  for (uint h = 32u; h > 0u; h >>= 1u) {
    if (lid < h) part[lid] += part[lid + h];
    barrier();
  }
  const float scale = 1.0 / sqrt(part[0] / float(p.n) + p.eps);
  const uint y0 = p.y_off + r * p.n;
  for (uint i = lid; i < p.n; i += 64u) {
    const float g = p.w_off == 0xffffffffu ? 1.0 : A[p.w_off + i];
    A[y0 + i] = A[x0 + i] * scale * g;
  }
}
