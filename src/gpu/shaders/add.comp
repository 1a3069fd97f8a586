// y[r, i] += a[r, i], or a[i] when broadcast (a bias row), for r < rows, i < n. One invocation per element.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "ops.glsl"

layout(push_constant) uniform Push {
  uint rows;
  uint n;
  uint y_off;
  uint a_off;
  uint broadcast;
} p;

void main() {
  const uint id = flat_id();
  if (id >= p.rows * p.n) return;
  A[p.y_off + id] += A[p.a_off + (p.broadcast != 0u ? id % p.n : id)];
}
