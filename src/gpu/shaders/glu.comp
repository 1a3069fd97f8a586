// h[i] = glu(gate[i], up[i]) (model/glu.h): SwiGLU silu(g) u; gpt-oss's clamped form min(g, limit) sigmoid(alpha
// min(g, limit)) (clamp(u, -limit, limit) + 1); GEGLU gelu_tanh(g) u. One invocation per element.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "ops.glsl"

layout(push_constant) uniform Push {
  uint n;
  uint kind;  // 0 swiglu, 1 swiglu_oai, 2 geglu (gpu::GluKind)
  uint g_off;
  uint u_off;
  uint h_off;
  float alpha;
  float limit;
} p;

void main() {
  const uint i = flat_id();
  if (i >= p.n) return;
  const float g = A[p.g_off + i], u = A[p.u_off + i];
  float h;
  if (p.kind == 0u) {
    h = g / (1.0 + exp(-g)) * u;
  } else if (p.kind == 1u) {
    const float gc = min(g, p.limit);
    const float uc = clamp(u, -p.limit, p.limit);
    h = gc / (1.0 + exp(-p.alpha * gc)) * (uc + 1.0);
  } else {
    const float c = 0.7978845608028654;  // sqrt(2 / pi)
    h = 0.5 * g * (1.0 + tanh(c * g * (1.0 + 0.044715 * g * g))) * u;
  }
  A[p.h_off + i] = h;
}
