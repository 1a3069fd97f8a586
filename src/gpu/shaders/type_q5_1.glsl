// Q5_1, 24 B per 32: fp16 d, fp16 m, uint32 qh, 16 B of nibbles (quant/blocks.h). value = (nibble | qh_j << 4) * d + m.
#define QK 32u
#define BLOCK_BYTES 24u
float dq(uint b, uint j) {
  const uint lo = (u8(b + 8u + (j & 15u)) >> ((j >> 4) * 4u)) & 0xfu;
  const uint q = lo | ((u32(b + 4u) >> j) & 1u) << 4;
  precise float v = float(q) * f16(b) + f16(b + 2u);
  return v;
}
// The whole block (j0 = 0): 4 words of nibbles and the word of fifth bits, as dq() orders them.
void dq_seg(uint b, uint j0, out float v[32]) {
  const float d = f16(b), m = f16(b + 2u);
  const uint qh = u32(b + 4u);
  [[unroll]] for (uint w = 0u; w < 4u; ++w) {
    const uint word = u32(b + 8u + 4u * w);
    [[unroll]] for (uint i = 0u; i < 4u; ++i) {
      const uint j = 4u * w + i;
      precise float lo = float(((word >> (8u * i)) & 0xfu) | ((qh >> j) & 1u) << 4) * d + m;
      precise float hi = float(((word >> (8u * i + 4u)) & 0xfu) | ((qh >> (j + 16u)) & 1u) << 4) * d + m;
      v[j] = lo;
      v[j + 16u] = hi;
    }
  }
}
