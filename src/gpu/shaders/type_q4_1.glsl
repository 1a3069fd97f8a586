// Q4_1, 20 B per 32: fp16 d, fp16 m, then 16 B of nibbles (quant/blocks.h). value = nibble * d + m (unfused).
#define QK 32u
#define BLOCK_BYTES 20u
float dq(uint b, uint j) {
  const uint q = (u8(b + 4u + (j & 15u)) >> ((j >> 4) * 4u)) & 0xfu;
  precise float v = float(q) * f16(b) + f16(b + 2u);
  return v;
}
