// Q4_K, 144 B per 256: fp16 d, fp16 dmin, scales[12], qs[128] (quant/blocks.h). value = (d * sc) * q4 - (dmin * m).
#define QK 256u
#define BLOCK_BYTES 144u
float dq(uint b, uint j) {
  const uint s = j >> 5, l = j & 31u;
  float ds, ms;
  kquant_ds_ms(u128(b), s, ds, ms);
  const uint q = (u8(b + 16u + 32u * (s >> 1) + l) >> (4u * (s & 1u))) & 0xfu;
  precise float v = ds * float(q) - ms;
  return v;
}
// Sub-block s = j0 / 32: one scale and min from the 16-byte header, 32 bytes of nibbles (low nibbles for even s,
// high for odd), each 16 bytes in one load where the block is 16-byte aligned (every block of a placed Q4_K row).
void dq_seg(uint b, uint j0, out float v[32]) {
  const uint s = j0 >> 5;
  float ds, ms;
  kquant_ds_ms(u128(b), s, ds, ms);
  const uint q0 = b + 16u + 32u * (s >> 1), sh = 4u * (s & 1u);
  const uvec4 qa = u128(q0), qb = u128(q0 + 16u);
  const uint q[8] = uint[8](qa.x, qa.y, qa.z, qa.w, qb.x, qb.y, qb.z, qb.w);
  [[unroll]] for (uint w = 0u; w < 8u; ++w) {
    const uint word = q[w] >> sh;
    [[unroll]] for (uint i = 0u; i < 4u; ++i) {
      precise float x = ds * float((word >> (8u * i)) & 0xfu) - ms;
      v[4u * w + i] = x;
    }
  }
}
