// Q4_1, 20 B per 32: fp16 d, fp16 m, then 16 B of nibbles (quant/blocks.h). value = nibble * d + m (unfused).
#define QK 32u
#define BLOCK_BYTES 20u
float dq(uint b, uint j) {
  const uint q = (u8(b + 4u + (j & 15u)) >> ((j >> 4) * 4u)) & 0xfu;
  precise float v = float(q) * f16(b) + f16(b + 2u);
  return v;
}
// The whole block (j0 = 0) from 4 words of nibbles, as dq() orders them.
void dq_seg(uint b, uint j0, out float v[32]) {
  const float d = f16(b), m = f16(b + 2u);
  [[unroll]] for (uint w = 0u; w < 4u; ++w) {
    const uint word = u32(b + 4u + 4u * w);
    [[unroll]] for (uint i = 0u; i < 4u; ++i) {
      precise float lo = float((word >> (8u * i)) & 0xfu) * d + m;
      precise float hi = float((word >> (8u * i + 4u)) & 0xfu) * d + m;
      v[4u * w + i] = lo;
      v[16u + 4u * w + i] = hi;
    }
  }
}
