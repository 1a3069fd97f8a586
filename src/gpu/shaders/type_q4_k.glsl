// Q4_K, 144 B per 256: fp16 d, fp16 dmin, scales[12], qs[128] (quant/blocks.h). value = (d * sc) * q4 - (dmin * m).
#define QK 256u
#define BLOCK_BYTES 144u
float dq(uint b, uint j) {
  const uint s = j >> 5, l = j & 31u;
  uint sc, m;
  kquant_scale_min(b, s, sc, m);
  const float ds = f16(b) * float(sc);
  const float ms = f16(b + 2u) * float(m);
  const uint q = (u8(b + 16u + 32u * (s >> 1) + l) >> (4u * (s & 1u))) & 0xfu;
  precise float v = ds * float(q) - ms;
  return v;
}
