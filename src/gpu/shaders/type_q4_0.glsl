// Q4_0, 18 B per 32: fp16 d, then 16 B of nibbles (quant/blocks.h). value = (nibble - 8) * d.
#define QK 32u
#define BLOCK_BYTES 18u
float dq(uint b, uint j) {
  const uint q = (u8(b + 2u + (j & 15u)) >> ((j >> 4) * 4u)) & 0xfu;
  return float(int(q) - 8) * f16(b);
}
// The whole block (j0 = 0) from 4 words of nibbles: element i < 16 the low nibble of byte i, i >= 16 the high one.
void dq_seg(uint b, uint j0, out float v[32]) {
  const float d = f16(b);
  [[unroll]] for (uint w = 0u; w < 4u; ++w) {
    const uint word = u32(b + 2u + 4u * w);
    [[unroll]] for (uint i = 0u; i < 4u; ++i) {
      v[4u * w + i] = float(int((word >> (8u * i)) & 0xfu) - 8) * d;
      v[16u + 4u * w + i] = float(int((word >> (8u * i + 4u)) & 0xfu) - 8) * d;
    }
  }
}
