// Q5_K, 176 B per 256: fp16 d, fp16 dmin, scales[12], qh[32], qs[128] (quant/blocks.h). value = (d*sc) * q5 - (dmin*m).
#define QK 256u
#define BLOCK_BYTES 176u
float dq(uint b, uint j) {
  const uint s = j >> 5, l = j & 31u;
  float ds, ms;
  kquant_ds_ms(u128(b), s, ds, ms);
  const uint q4 = (u8(b + 48u + 32u * (s >> 1) + l) >> (4u * (s & 1u))) & 0xfu;
  const uint q = q4 | ((u8(b + 16u + l) >> s) & 1u) << 4;
  precise float v = ds * float(q) - ms;
  return v;
}
// Sub-block s = j0 / 32: one scale and min from the 16-byte header, 32 bytes of nibbles and bit s of each of the
// 32 high-bit bytes, 16 bytes a load where the block is 16-byte aligned (every block of a placed Q5_K row).
void dq_seg(uint b, uint j0, out float v[32]) {
  const uint s = j0 >> 5;
  float ds, ms;
  kquant_ds_ms(u128(b), s, ds, ms);
  const uint q0 = b + 48u + 32u * (s >> 1), sh = 4u * (s & 1u);
  const uvec4 qa = u128(q0), qb = u128(q0 + 16u), ha = u128(b + 16u), hb = u128(b + 32u);
  const uint lo[8] = uint[8](qa.x, qa.y, qa.z, qa.w, qb.x, qb.y, qb.z, qb.w);
  const uint hi[8] = uint[8](ha.x, ha.y, ha.z, ha.w, hb.x, hb.y, hb.z, hb.w);
  [[unroll]] for (uint w = 0u; w < 8u; ++w) {
    const uint l = lo[w] >> sh, u = hi[w] >> s;
    [[unroll]] for (uint i = 0u; i < 4u; ++i) {
      precise float x = ds * float(((l >> (8u * i)) & 0xfu) | ((u >> (8u * i)) & 1u) << 4) - ms;
      v[4u * w + i] = x;
    }
  }
}
