// Q3_K, 110 B per 256: hmask[32], qs[64], scales[12], fp16 d (quant/blocks.h). value = (d * (sc6 - 32)) * q3.
#define QK 256u
#define BLOCK_BYTES 110u
float dq(uint b, uint j) {
  const uint half_ = j >> 7, k = (j >> 5) & 3u, l = j & 31u, s = j >> 4;
  const uint low4 = s < 8u ? u8(b + 96u + s) & 0xfu : u8(b + 88u + s) >> 4;
  const uint high2 = (u8(b + 104u + (s & 3u)) >> (2u * (s >> 2))) & 3u;
  const float dl = f16(b + 108u) * float(int(low4 | high2 << 4) - 32);
  const int low2 = int((u8(b + 32u + 32u * half_ + l) >> (2u * k)) & 3u);
  const bool hbit = ((u8(b + l) >> (4u * half_ + k)) & 1u) != 0u;
  return dl * float(low2 - (hbit ? 0 : 4));
}
