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
// Segment s = j0 / 32 (half s / 4, quarter r = s % 4): 8 words of low nibbles, 8 of 2-bit highs, two scales
// (elements 0-15 and 16-31).
void dq_seg(uint b, uint j0, out float v[32]) {
  const uint s = j0 >> 5, half_ = s >> 2, r = s & 3u;
  const float d = f16(b + 208u);
  const float ds0 = d * float(i8(b + 192u + 2u * s)), ds1 = d * float(i8(b + 193u + 2u * s));
  const uint lo0 = b + 64u * half_ + 32u * (r & 1u), hi0 = b + 128u + 32u * half_;
  [[unroll]] for (uint w = 0u; w < 8u; ++w) {
    const uint lo = u32(lo0 + 4u * w) >> (4u * (r >> 1)), hi = u32(hi0 + 4u * w) >> (2u * r);
    [[unroll]] for (uint i = 0u; i < 4u; ++i) {
      const int q = int(((lo >> (8u * i)) & 0xfu) | ((hi >> (8u * i)) & 3u) << 4) - 32;
      v[4u * w + i] = (w < 4u ? ds0 : ds1) * float(q);
    }
  }
}
