// dst[i, c] = src[rows[i], c] for i < n_rows, c < n: a MoE layer's input rows gathered by expert. The row indices
// are 32-bit words in the arena (VulkanStep::gather uploads them; their bounds are checked on the host). One
// invocation per element: a copy with one region per row took an H200 ~7 ms for 4096 rows of 2048 floats.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "ops.glsl"

layout(push_constant) uniform Push {
  uint n_rows;
  uint n;
  uint src_off;
  uint rows_off;
  uint dst_off;
} p;

void main() {
  const uint id = flat_id();
  if (id >= p.n_rows * p.n) return;
  const uint i = id / p.n, c = id % p.n;
  A[p.dst_off + id] = A[p.src_off + floatBitsToUint(A[p.rows_off + i]) * p.n + c];
}
