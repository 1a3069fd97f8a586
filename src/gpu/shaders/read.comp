// The device's read bandwidth (`moetier devices --bandwidth`): every invocation sums a grid-strided share of a
// buffer of 16-byte words and writes its sum, so each byte is read once and the reads cannot be elided. Uses the
// product kernels' descriptor layout (binding 0: the buffer read, binding 2: one uint per invocation) and push
// block (rows: 16-byte words to read).
#version 450

layout(local_size_x = 256) in;

layout(std430, set = 0, binding = 0) readonly buffer Src { uvec4 S[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Dst { uint D[]; };

layout(push_constant) uniform Push {
  uint words;  // 16-byte words of S to read
  uint unused[7];
} p;

void main() {
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  const uint i0 = gl_GlobalInvocationID.x;
  uvec4 acc = uvec4(0u);
  for (uint i = i0; i < p.words; i += stride) acc ^= S[i];
  D[i0] = acc.x ^ acc.y ^ acc.z ^ acc.w;
}
