// What the step's kernels (gpu/step.h) share: the arena of activations and constants at binding 1, read and
// written as floats, and the flat invocation index of a 1-D launch that continues in y past 65535 workgroups
// (gpu/vulkan/vulkan_step.cpp, launch()).
#ifndef MOETIER_OPS_GLSL
#define MOETIER_OPS_GLSL

layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 1) buffer ABuf { float A[]; };

uint flat_id() { return (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 64u + gl_LocalInvocationID.x; }

#endif
