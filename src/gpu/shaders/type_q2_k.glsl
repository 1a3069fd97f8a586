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
// Segment s = j0 / 32 (half s / 4, shift 2 (s % 4)): 8 words of 2-bit codes, two scale bytes (elements 0-15,
// 16-31).
void dq_seg(uint b, uint j0, out float v[32]) {
  const uint s = j0 >> 5, half_ = s >> 2, k = s & 3u;
  const float d = f16(b + 80u), dmin = f16(b + 82u);
  const uint sc0 = u8(b + 2u * s), sc1 = u8(b + 2u * s + 1u);
  const float dl0 = d * float(sc0 & 0xfu), ml0 = dmin * float(sc0 >> 4);
  const float dl1 = d * float(sc1 & 0xfu), ml1 = dmin * float(sc1 >> 4);
  [[unroll]] for (uint w = 0u; w < 8u; ++w) {
    const uint word = u32(b + 16u + 32u * half_ + 4u * w) >> (2u * k);
    [[unroll]] for (uint i = 0u; i < 4u; ++i) {
      precise float x = (w < 4u ? dl0 : dl1) * float((word >> (8u * i)) & 3u) - (w < 4u ? ml0 : ml1);
      v[4u * w + i] = x;
    }
  }
}
