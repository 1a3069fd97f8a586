// F32 rows: 4 bytes per element; taken as blocks of 32 so that every type splits a row the same way.
#define QK 32u
#define BLOCK_BYTES 128u
float dq(uint b, uint j) { return f32(b + 4u * j); }
