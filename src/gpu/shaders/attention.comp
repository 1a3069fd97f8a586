// out[t, h, :] = sum_j softmax_j(scale q[t, h] . K[j]) V[j] over the keys a query at position pos0 + t sees
// (j <= its position, within the sliding window), GQA (query head h reads KV head h / (n_head / n_head_kv)), and
// a sink logit per head that joins the softmax denominator (model/attention.h). One workgroup per (head, token):
// the keys are taken 64 at a time (one per invocation), with the running maximum and sum of the streaming
// softmax (Milakov & Gimelshein 2018, "Online normalizer calculation for softmax"); fixed trees reduce each chunk,
// so a fixed placement gives the same bits on every run. The KV cache is binary16 at binding 0 (kv_store.comp).
#version 450
#extension GL_GOOGLE_include_directive : require
#include "ops.glsl"

layout(std430, set = 0, binding = 0) readonly buffer KvBuf { uint KV[]; };

layout(push_constant) uniform Push {
  uint n_head;
  uint n_head_kv;
  uint head_dim;  // at most 256, even
  uint pos0;
  uint n_ctx;
  uint window;    // 0: unlimited
  uint q_off;     // q[n_tok, n_head, head_dim]
  uint o_off;     // out, same shape
  uint sinks_off; // 0xffffffff: no sinks
  float scale;
} p;

shared float qs[256];
shared float ps[64];
shared float red[64];

// Element e of the cache (binary16, two per word, low half first).
float kv_at(uint e) {
  const vec2 w = unpackHalf2x16(KV[e >> 1u]);
  return (e & 1u) == 0u ? w.x : w.y;
}

void main() {
  const uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, lid = gl_LocalInvocationID.x;
  const uint hd = p.head_dim;
  const uint n_kv = p.n_head_kv * hd;
  const uint koff = (h / (p.n_head / p.n_head_kv)) * hd;
  const uint pos = p.pos0 + t;
  const uint first = (p.window > 0u && pos + 1u > p.window) ? pos + 1u - p.window : 0u;
  const uint q0 = p.q_off + (t * p.n_head + h) * hd;
  for (uint d = lid; d < hd; d += 64u) qs[d] = A[q0 + d];
  barrier();

  const float neg_inf = uintBitsToFloat(0xff800000u);
  const bool sinks = p.sinks_off != 0xffffffffu;
  float m = sinks ? A[p.sinks_off + h] : neg_inf;  // running maximum
  float l = sinks ? 1.0 : 0.0;                     // running sum of exp(score - m); the sink's exp(0)
  float o[4] = float[4](0.0, 0.0, 0.0, 0.0);      // dims lid, lid + 64, lid + 128, lid + 192
  for (uint j0 = first; j0 <= pos; j0 += 64u) {
    const uint j = j0 + lid;
    const bool valid = j <= pos;
    float s = neg_inf;
    if (valid) {
      const uint kw = (j * n_kv + koff) >> 1u;
      float dot = 0.0;
      for (uint d = 0u; d < hd; d += 2u) {
        const vec2 k = unpackHalf2x16(KV[kw + (d >> 1u)]);
        dot += qs[d] * k.x + qs[d + 1u] * k.y;
      }
      s = p.scale * dot;
    }
    red[lid] = s;
    barrier();
    for (uint w = 32u; w > 0u; w >>= 1u) {
      if (lid < w) red[lid] = max(red[lid], red[lid + w]);
      barrier();
    }
    const float m_new = max(m, red[0]);  // finite: the chunk has a visible key
    barrier();
    const float e = valid ? exp(s - m_new) : 0.0;
    ps[lid] = e;
    red[lid] = e;
    barrier();
    for (uint w = 32u; w > 0u; w >>= 1u) {
      if (lid < w) red[lid] += red[lid + w];
      barrier();
    }
    const float factor = m == neg_inf ? 0.0 : exp(m - m_new);  // the first chunk without a sink: nothing to rescale
    l = l * factor + red[0];
    const uint n = min(64u, pos + 1u - j0);
    for (uint r = 0u; r < 4u; ++r) {
      const uint d = lid + 64u * r;
      if (d < hd) {
        float acc = o[r] * factor;
        for (uint jj = 0u; jj < n; ++jj) acc += ps[jj] * kv_at((p.n_ctx + j0 + jj) * n_kv + koff + d);
        o[r] = acc;
      }
    }
    m = m_new;
    barrier();
  }
  const uint out0 = p.o_off + (t * p.n_head + h) * hd;
  for (uint r = 0u; r < 4u; ++r) {
    const uint d = lid + 64u * r;
    if (d < hd) A[out0 + d] = o[r] / l;
  }
}
