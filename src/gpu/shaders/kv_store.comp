// Stores k[n_tok, n_kv] and v[n_tok, n_kv] as binary16 (rounded as the CPU's KV cache rounds them) at positions pos0 .. pos0 + n_tok - 1 of a KV cache
// (binding 0: K [n_ctx, n_kv] then V [n_ctx, n_kv], two halves per word; n_kv even). One invocation per word.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "ops.glsl"
#include "half.glsl"

layout(std430, set = 0, binding = 0) buffer KvBuf { uint KV[]; };

layout(push_constant) uniform Push {
  uint n_tok;
  uint n_kv;
  uint pos0;
  uint n_ctx;
  uint k_off;
  uint v_off;
} p;

void main() {
  const uint id = flat_id();
  const uint words = p.n_kv / 2u;
  if (id >= 2u * p.n_tok * words) return;
  const uint which = id / (p.n_tok * words);  // 0: K, 1: V
  const uint rest = id % (p.n_tok * words);
  const uint t = rest / words, w = rest % words;
  const uint src = (which == 0u ? p.k_off : p.v_off) + t * p.n_kv + 2u * w;
  KV[((which * p.n_ctx + p.pos0 + t) * p.n_kv) / 2u + w] = f16_bits(A[src]) | (f16_bits(A[src + 1u]) << 16);
}
