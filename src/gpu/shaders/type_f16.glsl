// F16 rows: 2 B per IEEE binary16 element (quant/blocks.h); taken as pseudo-blocks of 32. value = fp16(h[j]).
#define QK 32u
#define BLOCK_BYTES 64u
float dq(uint b, uint j) { return f16(b + 2u * j); }
// The segment of 32 elements from element j0 of the block at b (matmul.comp's fast path; dq() is the specification).
void dq_seg(uint b, uint j0, out float v[32]) {
  [[unroll]] for (uint w = 0u; w < 16u; ++w) {
    const vec2 h = unpackHalf2x16(u32(b + 2u * j0 + 4u * w));
    v[2u * w] = h.x;
    v[2u * w + 1u] = h.y;
  }
}
