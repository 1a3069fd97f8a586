// Q3_K, 110 B per 256: hmask[32], qs[64], scales[12], fp16 d (quant/blocks.h). value = (d * (sc6 - 32)) * q3.
#define QK 256u
#define BLOCK_BYTES 110u
// d times the 6-bit scale (less 32) of 16-element group si (0..15): low 4 bits in scales[si] (si < 8) or the high
// nibble of scales[si - 8], high 2 bits in scales[8 + si % 4] at bit 2 (si / 4).
float q3k_scale(uint b, uint si) {
  const uint low4 = si < 8u ? u8(b + 96u + si) & 0xfu : u8(b + 88u + si) >> 4;
  const uint high2 = (u8(b + 104u + (si & 3u)) >> (2u * (si >> 2))) & 3u;
  return f16(b + 108u) * float(int(low4 | high2 << 4) - 32);
}
float dq(uint b, uint j) {
  const uint half_ = j >> 7, k = (j >> 5) & 3u, l = j & 31u;
  const float dl = q3k_scale(b, j >> 4);
  const int low2 = int((u8(b + 32u + 32u * half_ + l) >> (2u * k)) & 3u);
  const bool hbit = ((u8(b + l) >> (4u * half_ + k)) & 1u) != 0u;
  return dl * float(low2 - (hbit ? 0 : 4));
}
// Segment s = j0 / 32 (half s / 4, shift 2 (s % 4)): 8 words of low 2-bit codes, 8 of high-bit masks, two 6-bit
// scales (elements 0-15, 16-31).
void dq_seg(uint b, uint j0, out float v[32]) {
  const uint s = j0 >> 5, half_ = s >> 2, k = s & 3u;
  const float dl0 = q3k_scale(b, 2u * s), dl1 = q3k_scale(b, 2u * s + 1u);
  [[unroll]] for (uint w = 0u; w < 8u; ++w) {
    const uint lo = u32(b + 32u + 32u * half_ + 4u * w) >> (2u * k), hm = u32(b + 4u * w) >> (4u * half_ + k);
    [[unroll]] for (uint i = 0u; i < 4u; ++i) {
      const int low2 = int((lo >> (8u * i)) & 3u);
      const bool hbit = ((hm >> (8u * i)) & 1u) != 0u;
      v[4u * w + i] = (w < 4u ? dl0 : dl1) * float(low2 - (hbit ? 0 : 4));
    }
  }
}
