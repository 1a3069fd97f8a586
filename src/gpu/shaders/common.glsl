// Byte access to a weight buffer bound as 32-bit little-endian words (GGUF blocks start at any byte offset: a
// Q4_0 block is 18 bytes), shared by every product shader. `W` and `W4` (the same buffer as uvec4) are declared by
// the including shader.
#ifndef MOETIER_COMMON_GLSL
#define MOETIER_COMMON_GLSL

// Byte at byte offset `o`.
uint u8(uint o) { return (W[o >> 2] >> ((o & 3u) * 8u)) & 0xffu; }
// Signed byte at `o`.
int i8(uint o) { return int(u8(o) << 24) >> 24; }
// Little-endian 16-bit word at `o` (any alignment).
uint u16(uint o) {
  if ((o & 3u) == 3u) return u8(o) | (u8(o + 1u) << 8);
  return (W[o >> 2] >> ((o & 3u) * 8u)) & 0xffffu;
}
// Little-endian 32-bit word at `o` (any alignment).
uint u32(uint o) {
  uint s = (o & 3u) * 8u;
  if (s == 0u) return W[o >> 2];
  return (W[o >> 2] >> s) | (W[(o >> 2) + 1u] << (32u - s));
}
// IEEE binary16 at `o`, widened exactly.
float f16(uint o) { return unpackHalf2x16(u16(o)).x; }
// bfloat16 at `o`: the top half of a float32.
float bf16(uint o) { return uintBitsToFloat(u16(o) << 16); }
// float32 at `o`.
float f32(uint o) { return uintBitsToFloat(u32(o)); }

// Byte k (0..11) of three little-endian words.
uint byte12(uvec3 q, uint k) { return (q[k >> 2] >> (8u * (k & 3u))) & 0xffu; }
// The 6-bit scale and min of sub-block s (0..7) of a Q4_K / Q5_K block from its 12 scale bytes q (at block byte 4):
// sub-blocks 0..3 in the low 6 bits of bytes 0..3 (scales) and 4..7 (mins), 4..7 split over the low and high
// nibbles of bytes 8..11 and the top 2 bits of bytes 0..7 (ggml's get_scale_min_k4; quant/kquant_scales.h).
void kquant_scale_min_q(uvec3 q, uint s, out uint sc, out uint m) {
  if (s < 4u) {
    sc = byte12(q, s) & 63u;
    m = byte12(q, s + 4u) & 63u;
  } else {
    sc = (byte12(q, s + 4u) & 0xfu) | (byte12(q, s - 4u) >> 6) << 4;
    m = (byte12(q, s + 4u) >> 4) | (byte12(q, s) >> 6) << 4;
  }
}
// The scale and min of sub-block s of a Q4_K / Q5_K block from its 16-byte header h (fp16 d, fp16 dmin, 12 scale
// bytes): ds = d * sc, ms = dmin * m.
void kquant_ds_ms(uvec4 h, uint s, out float ds, out float ms) {
  uint sc, m;
  kquant_scale_min_q(h.yzw, s, sc, m);
  const vec2 dm = unpackHalf2x16(h.x);
  ds = dm.x * float(sc);
  ms = dm.y * float(m);
}
// 16 bytes at `o` as four words: one 16-byte load where `o` is 16-byte aligned (W4, the including shader's uvec4
// view of W), else four word loads.
uvec4 u128(uint o) {
  if ((o & 15u) == 0u) return W4[o >> 4];
  return uvec4(u32(o), u32(o + 4u), u32(o + 8u), u32(o + 12u));
}

#endif
