// IQ4_NL, 18 B per 32: fp16 d, then 16 B of nibbles as Q4_0 (quant/blocks.h). value = d * kIq4nlValues[nibble].
#define QK 32u
#define BLOCK_BYTES 18u
const int kIq4nl[16] = int[16](-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
float dq(uint b, uint j) {
  const uint q = (u8(b + 2u + (j & 15u)) >> ((j >> 4) * 4u)) & 0xfu;
  return f16(b) * float(kIq4nl[q]);
}
// The whole block (j0 = 0) from 4 words of nibbles, as dq() orders them.
void dq_seg(uint b, uint j0, out float v[32]) {
  const float d = f16(b);
  [[unroll]] for (uint w = 0u; w < 4u; ++w) {
    const uint word = u32(b + 2u + 4u * w);
    [[unroll]] for (uint i = 0u; i < 4u; ++i) {
      v[4u * w + i] = d * float(kIq4nl[(word >> (8u * i)) & 0xfu]);
      v[16u + 4u * w + i] = d * float(kIq4nl[(word >> (8u * i + 4u)) & 0xfu]);
    }
  }
}
