// Q5_0, 22 B per 32: fp16 d, uint32 qh, 16 B of nibbles (quant/blocks.h). value = ((nibble | qh_j << 4) - 16) * d.
#define QK 32u
#define BLOCK_BYTES 22u
float dq(uint b, uint j) {
  const uint lo = (u8(b + 6u + (j & 15u)) >> ((j >> 4) * 4u)) & 0xfu;
  const uint q = lo | ((u32(b + 2u) >> j) & 1u) << 4;
  return float(int(q) - 16) * f16(b);
}
// The whole block (j0 = 0): 4 words of nibbles and the word of fifth bits, as dq() orders them.
void dq_seg(uint b, uint j0, out float v[32]) {
  const float d = f16(b);
  const uint qh = u32(b + 2u);
  [[unroll]] for (uint w = 0u; w < 4u; ++w) {
    const uint word = u32(b + 6u + 4u * w);
    [[unroll]] for (uint i = 0u; i < 4u; ++i) {
      const uint j = 4u * w + i;
      v[j] = float(int(((word >> (8u * i)) & 0xfu) | ((qh >> j) & 1u) << 4) - 16) * d;
      v[j + 16u] = float(int(((word >> (8u * i + 4u)) & 0xfu) | ((qh >> (j + 16u)) & 1u) << 4) - 16) * d;
    }
  }
}
