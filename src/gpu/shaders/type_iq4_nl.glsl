// IQ4_NL, 18 B per 32: fp16 d, then 16 B of nibbles as Q4_0 (quant/blocks.h). value = d * kIq4nlValues[nibble].
#define QK 32u
#define BLOCK_BYTES 18u
const int kIq4nl[16] = int[16](-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
float dq(uint b, uint j) {
  const uint q = (u8(b + 2u + (j & 15u)) >> ((j >> 4) * 4u)) & 0xfu;
  return f16(b) * float(kIq4nl[q]);
}
