// out[t, i] = sum over s < k, in slot order, of table[(t k + s) 2 + 1] * slots[table[(t k + s) 2] n + i]: a MoE
// layer's expert outputs (one row per (token, slot), grouped by expert) weighted and summed per token, as the
// CPU's MoE block sums them (model/moe_ffn.cpp); with accumulate, added to out. One invocation per output element.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "ops.glsl"

layout(push_constant) uniform Push {
  uint n_tok;
  uint k;
  uint n;
  uint slots_off;
  uint table_off;
  uint out_off;
  uint accumulate;  // 1: out += the sum (the residual add in the same dispatch)
} p;

void main() {
  const uint id = flat_id();
  if (id >= p.n_tok * p.n) return;
  const uint t = id / p.n, i = id % p.n;
  // precise: no fused multiply-add, the products and sums rounded one by one as the CPU rounds them.
  precise float o = 0.0;
  for (uint s = 0u; s < p.k; ++s) {
    const uint e = p.table_off + (t * p.k + s) * 2u;
    precise const float v = A[e + 1u] * A[p.slots_off + uint(A[e]) * p.n + i];
    o = s == 0u ? v : o + v;
  }
  A[p.out_off + id] = p.accumulate != 0u ? A[p.out_off + id] + o : o;
}
