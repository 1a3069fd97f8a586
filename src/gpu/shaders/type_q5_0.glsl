// Q5_0, 22 B per 32: fp16 d, uint32 qh, 16 B of nibbles (quant/blocks.h). value = ((nibble | qh_j << 4) - 16) * d.
#define QK 32u
#define BLOCK_BYTES 22u
float dq(uint b, uint j) {
  const uint lo = (u8(b + 6u + (j & 15u)) >> ((j >> 4) * 4u)) & 0xfu;
  const uint q = lo | ((u32(b + 2u) >> j) & 1u) << 4;
  return float(int(q) - 16) * f16(b);
}
