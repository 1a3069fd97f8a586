// BF16 rows: 2 B per bfloat16 element (quant/blocks.h); taken as pseudo-blocks of 32. value = bf16(h[j]).
#define QK 32u
#define BLOCK_BYTES 64u
float dq(uint b, uint j) { return bf16(b + 2u * j); }
