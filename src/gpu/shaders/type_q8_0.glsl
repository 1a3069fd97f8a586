// Q8_0, 34 B per 32: fp16 d, then 32 int8 codes (quant/blocks.h). value = d * qs[j].
#define QK 32u
#define BLOCK_BYTES 34u
float dq(uint b, uint j) { return f16(b) * float(i8(b + 2u + j)); }
// The whole block (j0 = 0) from 8 words of int8 codes.
void dq_seg(uint b, uint j0, out float v[32]) {
  const float d = f16(b);
  [[unroll]] for (uint w = 0u; w < 8u; ++w) {
    const uint word = u32(b + 2u + 4u * w);
    [[unroll]] for (uint i = 0u; i < 4u; ++i) v[4u * w + i] = d * float(int(word << (24u - 8u * i)) >> 24);
  }
}
