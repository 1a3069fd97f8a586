// Rotates pair i of every head of x[n_tok, n_heads, head_dim] by the (cos, sin) of table[t, i] (model/rope.h:
// the host computes the angles as the CPU does, so both rotate by the same numbers). One invocation per
// (token, head, pair).
#version 450
#extension GL_GOOGLE_include_directive : require
#include "ops.glsl"

layout(push_constant) uniform Push {
  uint n_tok;
  uint n_heads;
  uint head_dim;
  uint half_rot;  // n_rot / 2
  uint neox;      // 1: pairs (i, i + n_rot / 2); 0: (2i, 2i + 1)
  uint x_off;
  uint table_off;
} p;

void main() {
  const uint id = flat_id();
  if (id >= p.n_tok * p.n_heads * p.half_rot) return;
  const uint i = id % p.half_rot;
  const uint th = id / p.half_rot;  // token * n_heads + head
  const uint t = th / p.n_heads;
  const uint base = p.x_off + th * p.head_dim;
  const uint a = base + (p.neox != 0u ? i : 2u * i);
  const uint b = base + (p.neox != 0u ? i + p.half_rot : 2u * i + 1u);
  const float c = A[p.table_off + (t * p.half_rot + i) * 2u];
  const float s = A[p.table_off + (t * p.half_rot + i) * 2u + 1u];
  const float x0 = A[a], x1 = A[b];
  A[a] = x0 * c - x1 * s;
  A[b] = x0 * s + x1 * c;
}
