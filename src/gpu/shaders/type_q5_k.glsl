// Q5_K, 176 B per 256: fp16 d, fp16 dmin, scales[12], qh[32], qs[128] (quant/blocks.h). value = (d*sc) * q5 - (dmin*m).
#define QK 256u
#define BLOCK_BYTES 176u
float dq(uint b, uint j) {
  const uint s = j >> 5, l = j & 31u;
  uint sc, m;
  kquant_scale_min(b, s, sc, m);
  const float ds = f16(b) * float(sc);
  const float ms = f16(b + 2u) * float(m);
  const uint q4 = (u8(b + 48u + 32u * (s >> 1) + l) >> (4u * (s & 1u))) & 0xfu;
  const uint q = q4 | ((u8(b + 16u + l) >> s) & 1u) << 4;
  precise float v = ds * float(q) - ms;
  return v;
}
