// Byte access to a weight buffer bound as 32-bit little-endian words (GGUF blocks start at any byte offset: a
// Q4_0 block is 18 bytes), shared by every product shader. `W` is declared by the including shader.
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

// The 6-bit scale and min of sub-block s (0..7) of a Q4_K / Q5_K block at byte `b`, whose 12 scale bytes start at
// b + 4: sub-blocks 0..3 in the low 6 bits of bytes 0..3 (scales) and 4..7 (mins), 4..7 split over the low and
// high nibbles of bytes 8..11 and the top 2 bits of bytes 0..7 (ggml's get_scale_min_k4; quant/kquant_scales.h).
void kquant_scale_min(uint b, uint s, out uint sc, out uint m) {
  if (s < 4u) {
    sc = u8(b + 4u + s) & 63u;
    m = u8(b + 8u + s) & 63u;
  } else {
    sc = (u8(b + 8u + s) & 0xfu) | (u8(b + s) >> 6) << 4;
    m = (u8(b + 8u + s) >> 4) | (u8(b + 4u + s) >> 6) << 4;
  }
}

#endif
