// y[t, r] = sum_c W[r, c] * x[t, c] for one weight type (compute/backend.h's product, float activations).
//
// A row is computed by L invocations for a tile of up to NT tokens, L the power of two (at most 64) that covers the
// row's 32-element segments: they take the segments in turn, dequantize each element once (the type file's dq())
// and accumulate it against every token of the tile; a fixed tree over shared memory then sums the L partial
// dots. L depends on cols only, so a fixed placement gives the same bits on every run. A workgroup of 64 takes
// 64 / L rows (short rows would otherwise leave most invocations idle: on a CPU driver such as lavapipe, where a
// workgroup costs microseconds, that cost dominates). Workgroups beyond 65535 continue in the z dimension
// (maxComputeWorkGroupCount[0] is at least 65535 by the Vulkan spec). The host counts workgroups with the same
// formula (gpu/vulkan/pipelines.h, Pipelines::rows_per_group).
//
// Grouped form (the step's products_grouped, a MoE layer's chosen experts in one dispatch): with table_off set,
// workgroup z picks entry z of a table in X (4 words each: w_offset in bytes, x_offset, y_offset, n_tok), the
// products sharing rows, cols, row_bytes and y_stride.
//
// Built once per weight type with -DTYPE_<T> (cmake/shaders.cmake); the type file defines QK (elements per block,
// a multiple of SEG), BLOCK_BYTES and float dq(uint block_byte_offset, uint j): element j of the block there.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x = 64) in;

layout(std430, set = 0, binding = 0) readonly buffer WBuf { uint W[]; };   // weight rows as little-endian words
layout(std430, set = 0, binding = 1) readonly buffer XBuf { float X[]; };  // activations [.., n_tok, cols]
layout(std430, set = 0, binding = 2) writeonly buffer YBuf { float Y[]; }; // results [.., n_tok, y_stride]

layout(push_constant) uniform Push {
  uint rows;       // rows of this dispatch
  uint cols;       // elements per row
  uint row_bytes;  // bytes per row
  uint w_offset;   // byte offset of the dispatch's first row in W
  uint x_offset;   // float offset of token 0's activations in X
  uint y_offset;   // float offset of (token 0, row 0) in Y
  uint y_stride;   // floats from one token's results to the next in Y
  uint n_tok;      // tokens of this dispatch
  uint table_off;  // float offset in X of the grouped form's table; 0xffffffff: one product
} p;

#include "common.glsl"
#if defined(TYPE_F32)
#include "type_f32.glsl"
#elif defined(TYPE_F16)
#include "type_f16.glsl"
#elif defined(TYPE_BF16)
#include "type_bf16.glsl"
#elif defined(TYPE_Q4_0)
#include "type_q4_0.glsl"
#elif defined(TYPE_Q4_1)
#include "type_q4_1.glsl"
#elif defined(TYPE_Q5_0)
#include "type_q5_0.glsl"
#elif defined(TYPE_Q5_1)
#include "type_q5_1.glsl"
#elif defined(TYPE_Q8_0)
#include "type_q8_0.glsl"
#elif defined(TYPE_Q2_K)
#include "type_q2_k.glsl"
#elif defined(TYPE_Q3_K)
#include "type_q3_k.glsl"
#elif defined(TYPE_Q4_K)
#include "type_q4_k.glsl"
#elif defined(TYPE_Q5_K)
#include "type_q5_k.glsl"
#elif defined(TYPE_Q6_K)
#include "type_q6_k.glsl"
#elif defined(TYPE_IQ4_NL)
#include "type_iq4_nl.glsl"
#elif defined(TYPE_IQ4_XS)
#include "type_iq4_xs.glsl"
#elif defined(TYPE_MXFP4)
#include "type_mxfp4.glsl"
#else
#error "no weight type: build with -DTYPE_<T>"
#endif

#define NT 8u    // tokens per workgroup (gl_WorkGroupID.y picks the tile)
#define SEG 32u  // elements per work item
#define WG 64u

shared float partial[NT][WG];

void main() {
  uint w_offset = p.w_offset, x_offset = p.x_offset, y_offset = p.y_offset, n_tok = p.n_tok;
  uint zrow = gl_WorkGroupID.z;  // one product: row groups past 65535 continue in z
  if (p.table_off != 0xffffffffu) {
    const uint e = p.table_off + gl_WorkGroupID.z * 4u;
    w_offset = floatBitsToUint(X[e]);
    x_offset = floatBitsToUint(X[e + 1u]);
    y_offset = floatBitsToUint(X[e + 2u]);
    n_tok = floatBitsToUint(X[e + 3u]);
    zrow = 0u;
  }
  const uint t0 = gl_WorkGroupID.y * NT;
  if (t0 >= n_tok) return;  // a grouped entry with fewer tokens than the dispatch: the whole workgroup leaves
  const uint lid = gl_LocalInvocationID.x;
  const uint n_items = (p.cols + SEG - 1u) / SEG;
  uint L = 1u;  // invocations per row, uniform: a function of cols
  while (L < n_items && L < WG) L <<= 1;
  const uint lane = lid % L;
  const uint r = (gl_WorkGroupID.x + zrow * gl_NumWorkGroups.x) * (WG / L) + lid / L;
  const bool in_range = r < p.rows;  // only guards work and writes: every invocation reaches the barriers
  const uint nt = min(NT, n_tok - t0);

  float acc[NT];
  [[unroll]] for (uint k = 0u; k < NT; ++k) acc[k] = 0.0;
  if (in_range) {
    const uint row = w_offset + r * p.row_bytes;
    for (uint it = lane; it < n_items; it += L) {
      const uint c0 = it * SEG;
      const uint base = row + (c0 / QK) * BLOCK_BYTES;
      const uint j0 = c0 % QK;
      const uint n = min(SEG, p.cols - c0);
      for (uint j = 0u; j < n; ++j) {
        const float v = dq(base, j0 + j);
        const uint xi = x_offset + t0 * p.cols + c0 + j;
        [[unroll]] for (uint k = 0u; k < NT; ++k)
          if (k < nt) acc[k] += v * X[xi + k * p.cols];
      }
    }
  }
  [[unroll]] for (uint k = 0u; k < NT; ++k) partial[k][lid] = acc[k];
  barrier();
  for (uint s = L / 2u; s > 0u; s >>= 1u) {
    if (lane < s) {
      [[unroll]] for (uint k = 0u; k < NT; ++k) partial[k][lid] += partial[k][lid + s];
    }
    barrier();
  }
  if (in_range && lane == 0u) {
    for (uint k = 0u; k < nt; ++k) Y[y_offset + (t0 + k) * p.y_stride + r] = partial[k][lid];
  }
}
