// IQ4_XS, 136 B per 256: fp16 d, u16 scales_h, scales_l[4], qs[128] (quant/blocks.h). value = (d*(sc6-32)) * kv[nib].
#define QK 256u
#define BLOCK_BYTES 136u
const int kIq4nl[16] = int[16](-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
float dq(uint b, uint j) {
  const uint s = j >> 5, e = j & 31u;
  const uint low4 = (u8(b + 4u + (s >> 1)) >> (4u * (s & 1u))) & 0xfu;
  const uint high2 = (u16(b + 2u) >> (2u * s)) & 3u;
  const float dl = f16(b) * float(int(low4 | high2 << 4) - 32);
  const uint q = (u8(b + 8u + 16u * s + (e & 15u)) >> (4u * (e >> 4))) & 0xfu;
  return dl * float(kIq4nl[q]);
}
// Sub-block s = j0 / 32: one 6-bit scale, 4 words of nibbles (elements 0-15 low nibbles, 16-31 high).
void dq_seg(uint b, uint j0, out float v[32]) {
  const uint s = j0 >> 5;
  const uint low4 = (u8(b + 4u + (s >> 1)) >> (4u * (s & 1u))) & 0xfu;
  const uint high2 = (u16(b + 2u) >> (2u * s)) & 3u;
  const float dl = f16(b) * float(int(low4 | high2 << 4) - 32);
  [[unroll]] for (uint w = 0u; w < 4u; ++w) {
    const uint word = u32(b + 8u + 16u * s + 4u * w);
    [[unroll]] for (uint i = 0u; i < 4u; ++i) {
      v[4u * w + i] = dl * float(kIq4nl[(word >> (8u * i)) & 0xfu]);
      v[16u + 4u * w + i] = dl * float(kIq4nl[(word >> (8u * i + 4u)) & 0xfu]);
    }
  }
}
