// Q5_1, 24 B per 32: fp16 d, fp16 m, uint32 qh, 16 B of nibbles (quant/blocks.h). value = (nibble | qh_j << 4) * d + m.
#define QK 32u
#define BLOCK_BYTES 24u
float dq(uint b, uint j) {
  const uint lo = (u8(b + 8u + (j & 15u)) >> ((j >> 4) * 4u)) & 0xfu;
  const uint q = lo | ((u32(b + 4u) >> j) & 1u) << 4;
  precise float v = float(q) * f16(b) + f16(b + 2u);
  return v;
}
