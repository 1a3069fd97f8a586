// MXFP4, 17 B per 32: E8M0 e, then 16 B of E2M1 nibbles as Q4_0 (quant/blocks.h). value = doubled(nib) * 2^(e - 128).
#define QK 32u
#define BLOCK_BYTES 17u
const int kMxfp4Doubled[16] = int[16](0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
float dq(uint b, uint j) {
  const uint e = u8(b);
  const float d = uintBitsToFloat(e < 2u ? (1u << 21) << e : (e - 1u) << 23);
  const uint q = (u8(b + 1u + (j & 15u)) >> ((j >> 4) * 4u)) & 0xfu;
  return float(kMxfp4Doubled[q]) * d;
}
// The whole block (j0 = 0) from 4 words of nibbles, as dq() orders them.
void dq_seg(uint b, uint j0, out float v[32]) {
  const uint e = u8(b);
  const float d = uintBitsToFloat(e < 2u ? (1u << 21) << e : (e - 1u) << 23);
  [[unroll]] for (uint w = 0u; w < 4u; ++w) {
    const uint word = u32(b + 1u + 4u * w);
    [[unroll]] for (uint i = 0u; i < 4u; ++i) {
      v[4u * w + i] = float(kMxfp4Doubled[(word >> (8u * i)) & 0xfu]) * d;
      v[16u + 4u * w + i] = float(kMxfp4Doubled[(word >> (8u * i + 4u)) & 0xfu]) * d;
    }
  }
}
