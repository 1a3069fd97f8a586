// Q2_K, 84 B per 256: scales[16], qs[64], fp16 d, fp16 dmin (quant/blocks.h). value = (d * sc) * q2 - (dmin * m).
#define QK 256u
#define BLOCK_BYTES 84u
float dq(uint b, uint j) {
  const uint half_ = j >> 7, k = (j >> 5) & 3u, l = j & 31u;
  const uint q = (u8(b + 16u + 32u * half_ + l) >> (2u * k)) & 3u;
  const uint sc = u8(b + (j >> 4));
  const float dl = f16(b + 80u) * float(sc & 0xfu);
  const float ml = f16(b + 82u) * float(sc >> 4);
  precise float v = dl * float(q) - ml;
  return v;
}
