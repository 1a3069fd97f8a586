// Q8_0, 34 B per 32: fp16 d, then 32 int8 codes (quant/blocks.h). value = d * qs[j].
#define QK 32u
#define BLOCK_BYTES 34u
float dq(uint b, uint j) { return f16(b) * float(i8(b + 2u + j)); }
