// y[t, r] = sum_c W[r, c] * x[t, c] for one weight type (compute/backend.h's product, float activations), or
// y[t, r] += that sum (accumulate: a residual add in the same dispatch).
//
// Two forms, chosen by the host per dispatch (rows_per_lane):
//   - one token (decode, rows_per_lane = RL = Pipelines::kRowsPerLane): a row is computed by L invocations, L the
//     power of two (at most 64) that covers the row's 32-element segments. They take the segments in turn: each
//     loads its segment of x once, as 8 vec4, and takes it against the segment of RL rows, each dequantized once
//     from whole words (the type file's dq_seg()); a fixed tree over shared memory then sums the L partial dots.
//     A workgroup of 64 takes 64 / L sets of RL rows (short rows would otherwise leave most invocations idle: on a
//     CPU driver such as lavapipe, where a workgroup costs microseconds, that cost dominates). x is the traffic
//     that bounds a one-row form: each row re-read all of it, in loads 128 bytes apart across a subgroup.
//   - a tile of tokens (prefill, rows_per_lane = 1): see tile_form() below.
// L depends on cols only, so a fixed placement gives the same bits on every run. Workgroups beyond 65535 continue
// in the z dimension (maxComputeWorkGroupCount[0] is at least 65535 by the Vulkan spec). The host counts
// workgroups with the same formulas (gpu/vulkan/pipelines.h, Pipelines::rows_per_group).
//
// Grouped form (the step's products_grouped, a MoE layer's chosen experts in one dispatch): with table_off set,
// workgroup z picks entry z of a table in X (4 words each: w_offset in bytes, x_offset, y_offset, n_tok), the
// products sharing rows, cols, row_bytes and y_stride.
//
// Built once per weight type with -DTYPE_<T> (cmake/shaders.cmake); the type file defines QK (elements per block,
// a multiple of 32), BLOCK_BYTES, float dq(uint block_byte_offset, uint j): element j of the block there (the
// specification), and dq_seg(uint block_byte_offset, uint j0, out float v[32]): elements j0 .. j0 + 31 (j0 a
// multiple of 32), the same values from whole-word loads.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x = 64) in;

layout(std430, set = 0, binding = 0) readonly buffer WBuf { uint W[]; };   // weight rows as little-endian words
layout(std430, set = 0, binding = 0) readonly buffer WBuf4 { uvec4 W4[]; };  // the same, 16 bytes at a time
layout(std430, set = 0, binding = 1) readonly buffer XBuf { float X[]; };  // activations [.., n_tok, cols]
layout(std430, set = 0, binding = 1) readonly buffer XBuf4 { vec4 X4[]; };  // the same, as vec4 (aligned reads)
layout(std430, set = 0, binding = 2) buffer YBuf { float Y[]; };  // results [.., n_tok, y_stride]

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
  uint rows_per_lane;  // RL: 1, or Pipelines::kRowsPerLane when every product of the dispatch has one token
  uint accumulate;     // 1: Y += the product (a residual add in the same dispatch)
} p;

// Writes a result: Y[i] = v, or Y[i] + v when accumulating.
void store(uint i, float v) { Y[i] = p.accumulate != 0u ? Y[i] + v : v; }

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

#define TT 32u     // tokens of a tile (the tile form; gl_WorkGroupID.y picks it): Pipelines::kTokenTile
#define TR 32u     // rows of a tile: Pipelines::kTileRows
#define RL_MAX 4u  // rows per set of lanes in the one-token form (Pipelines::kRowsPerLane)
#define SEG 32u    // elements per work item
#define WG 64u

shared float partial[RL_MAX][WG];  // one-token form: [row of the set][invocation]
// Tile form: one segment of the tile's rows (dequantized) and tokens, padded to 33 so that the reads below
// (4 rows or tokens 4 apart, one column) fall in distinct banks.
shared float w_tile[TR][SEG + 1u];
shared float x_tile[TT][SEG + 1u];

// The tile form: a workgroup computes TR rows x TT tokens, each invocation a 4 x 4 block of them. Per 32-column
// segment the first 32 invocations dequantize a row each into w_tile, the others load a token's activations into
// x_tile, and every invocation then takes 32 columns of its block from shared memory: each weight is read once per
// TT tokens and each activation once per TR rows (a row per invocation re-read every activation per row from
// device memory). Each (row, token) sums its columns in order: the same bits on every run.
void tile_form(uint w_offset, uint x_offset, uint y_offset, uint n_tok, uint r0, uint t0) {
  const uint lid = gl_LocalInvocationID.x;
  const uint n_items = (p.cols + SEG - 1u) / SEG;
  const uint br = (lid / 8u) * 4u, bt = (lid % 8u) * 4u;  // this invocation's block: rows br.., tokens bt..
  float acc[4][4];
  [[unroll]] for (uint a = 0u; a < 4u; ++a)
    [[unroll]] for (uint b = 0u; b < 4u; ++b) acc[a][b] = 0.0;
  const bool x4 = (x_offset & 3u) == 0u && (p.cols & 3u) == 0u;  // every token's row 16-byte aligned
  for (uint it = 0u; it < n_items; ++it) {
    const uint c0 = it * SEG;
    const uint n = min(SEG, p.cols - c0);
    if (lid < TR) {
      const uint r = r0 + lid;
      const uint base = w_offset + r * p.row_bytes + (c0 / QK) * BLOCK_BYTES;
      if (r < p.rows && n == SEG) {
        float v[SEG];
        dq_seg(base, c0 % QK, v);
        [[unroll]] for (uint j = 0u; j < SEG; ++j) w_tile[lid][j] = v[j];
      } else {
        // Past the last row, or the row's last, partial segment (float rows only): a loop, not unrolled (each
        // copy of dq() costs lavapipe's compiler seconds).
        for (uint j = 0u; j < SEG; ++j) w_tile[lid][j] = r < p.rows && j < n ? dq(base, c0 % QK + j) : 0.0;
      }
    } else {
      const uint tt = lid - TR, tok = t0 + tt;
      const uint xi = x_offset + tok * p.cols + c0;
      if (tok < n_tok && n == SEG && x4) {
        [[unroll]] for (uint q = 0u; q < SEG / 4u; ++q) {
          const vec4 v4 = X4[xi / 4u + q];
          x_tile[tt][4u * q] = v4.x;
          x_tile[tt][4u * q + 1u] = v4.y;
          x_tile[tt][4u * q + 2u] = v4.z;
          x_tile[tt][4u * q + 3u] = v4.w;
        }
      } else {
        [[unroll]] for (uint j = 0u; j < SEG; ++j) x_tile[tt][j] = tok < n_tok && j < n ? X[xi + j] : 0.0;
      }
    }
    barrier();
    // Unrolled by 4 columns only: fully unrolled, the product shaders took lavapipe's compiler ~1 min each.
    [[dont_unroll]] for (uint j4 = 0u; j4 < SEG; j4 += 4u) {
      [[unroll]] for (uint j = j4; j < j4 + 4u; ++j) {
        float wv[4], xv[4];
        [[unroll]] for (uint a = 0u; a < 4u; ++a) wv[a] = w_tile[br + a][j];
        [[unroll]] for (uint b = 0u; b < 4u; ++b) xv[b] = x_tile[bt + b][j];
        [[unroll]] for (uint a = 0u; a < 4u; ++a)
          [[unroll]] for (uint b = 0u; b < 4u; ++b) acc[a][b] += wv[a] * xv[b];
      }
    }
    barrier();
  }
  [[unroll]] for (uint a = 0u; a < 4u; ++a) {
    [[unroll]] for (uint b = 0u; b < 4u; ++b) {
      const uint r = r0 + br + a, tok = t0 + bt + b;
      if (r < p.rows && tok < n_tok) store(y_offset + tok * p.y_stride + r, acc[a][b]);
    }
  }
}

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
  const uint group = gl_WorkGroupID.x + zrow * gl_NumWorkGroups.x;
  const uint rl = p.rows_per_lane;  // uniform
  if (rl == 1u) {
    const uint t0 = gl_WorkGroupID.y * TT;
    if (t0 >= n_tok) return;  // a grouped entry with fewer tokens than the dispatch: the whole workgroup leaves
    tile_form(w_offset, x_offset, y_offset, n_tok, group * TR, t0);
    return;
  }
  const uint lid = gl_LocalInvocationID.x;
  const uint n_items = (p.cols + SEG - 1u) / SEG;
  uint L = 1u;  // invocations per row, uniform: a function of cols
  while (L < n_items && L < WG) L <<= 1;
  const uint lane = lid % L;
  const uint r0 = (group * (WG / L) + lid / L) * rl;  // the set's first row

  // One token: the segment of x in registers, taken against RL rows. vec4 reads where x is 16-byte aligned.
  float acc[RL_MAX];
  [[unroll]] for (uint k = 0u; k < RL_MAX; ++k) acc[k] = 0.0;
  const bool x4 = (x_offset & 3u) == 0u;
  for (uint it = lane; it < n_items; it += L) {
    const uint c0 = it * SEG;
    const uint xi = x_offset + c0;
    const bool whole = c0 + SEG <= p.cols;
    float x[SEG];
    if (whole && x4) {
      [[unroll]] for (uint q = 0u; q < SEG / 4u; ++q) {
        const vec4 v4 = X4[xi / 4u + q];
        x[4u * q] = v4.x;
        x[4u * q + 1u] = v4.y;
        x[4u * q + 2u] = v4.z;
        x[4u * q + 3u] = v4.w;
      }
    } else {
      [[unroll]] for (uint j = 0u; j < SEG; ++j) x[j] = c0 + j < p.cols ? X[xi + j] : 0.0;
    }
    // The RL rows in a loop, not unrolled (one copy of dq_seg: each costs lavapipe's compiler seconds); acc[] is
    // updated through constant indices (a dynamic one would move it to local memory on a GPU).
    [[dont_unroll]] for (uint k = 0u; k < rl; ++k) {
      const uint r = r0 + k;
      if (r >= p.rows) break;
      const uint base = w_offset + r * p.row_bytes + (c0 / QK) * BLOCK_BYTES;
      const uint j0 = c0 % QK;
      float s = 0.0;
      if (whole) {
        float v[SEG];
        dq_seg(base, j0, v);
        [[unroll]] for (uint j = 0u; j < SEG; ++j) s += v[j] * x[j];
      } else {
        // The row's last, partial segment (float rows only: a quantized row is whole blocks). x[] is indexed by
        // constants only (a dynamic index would move it to local memory on a GPU).
        for (uint j = 0u; j < p.cols - c0; ++j) s += dq(base, j0 + j) * X[xi + j];
      }
      [[unroll]] for (uint q = 0u; q < RL_MAX; ++q)
        if (q == k) acc[q] += s;
    }
  }
  [[unroll]] for (uint k = 0u; k < RL_MAX; ++k)
    if (k < rl) partial[k][lid] = acc[k];
  barrier();
  for (uint s = L / 2u; s > 0u; s >>= 1u) {
    if (lane < s) {
      [[unroll]] for (uint k = 0u; k < RL_MAX; ++k)
        if (k < rl) partial[k][lid] += partial[k][lid + s];
    }
    barrier();
  }
  if (lane == 0u) {
    for (uint k = 0u; k < rl; ++k)
      if (r0 + k < p.rows) store(y_offset + r0 + k, partial[k][lid]);
  }
}
