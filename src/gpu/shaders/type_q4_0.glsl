// Q4_0, 18 B per 32: fp16 d, then 16 B of nibbles (quant/blocks.h). value = (nibble - 8) * d.
#define QK 32u
#define BLOCK_BYTES 18u
float dq(uint b, uint j) {
  const uint q = (u8(b + 2u + (j & 15u)) >> ((j >> 4) * 4u)) & 0xfu;
  return float(int(q) - 8) * f16(b);
}
