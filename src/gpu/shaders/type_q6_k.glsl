// Q6_K, 210 B per 256: ql[128], qh[64], int8 scales[16], fp16 d (quant/blocks.h). value = (d * sc) * (q6 - 32).
#define QK 256u
#define BLOCK_BYTES 210u
float dq(uint b, uint j) {
  const uint half_ = j >> 7, r = (j >> 5) & 3u, l = j & 31u;
  const uint lo = (u8(b + 64u * half_ + 32u * (r & 1u) + l) >> (4u * (r >> 1))) & 0xfu;
  const uint hi = (u8(b + 128u + 32u * half_ + l) >> (2u * r)) & 3u;
  const float ds = f16(b + 208u) * float(i8(b + 192u + (j >> 4)));
  return ds * float(int(lo | hi << 4) - 32);
}
