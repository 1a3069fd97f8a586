// F16 rows: 2 B per IEEE binary16 element (quant/blocks.h); taken as pseudo-blocks of 32. value = fp16(h[j]).
#define QK 32u
#define BLOCK_BYTES 64u
float dq(uint b, uint j) { return f16(b + 2u * j); }
