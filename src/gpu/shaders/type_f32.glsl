// F32 rows: 4 bytes per element; taken as blocks of 32 so that every type splits a row the same way.
#define QK 32u
#define BLOCK_BYTES 128u
float dq(uint b, uint j) { return f32(b + 4u * j); }
// The segment of 32 elements from element j0 of the block at b (matmul.comp's fast path; dq() is the specification).
void dq_seg(uint b, uint j0, out float v[32]) {
  [[unroll]] for (uint i = 0u; i < 32u; ++i) v[i] = uintBitsToFloat(u32(b + 4u * (j0 + i)));
}
