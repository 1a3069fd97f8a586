// The SPIR-V of the compute shaders (src/gpu/shaders/), compiled by glslc at build time and embedded in the binary
// (cmake/embed_spirv.cmake), so a moetier binary needs no shader files beside it.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace moetier::gpu::vk_impl {

// The shader `name`: "read" (read.comp) or "product_<type>" (matmul.comp built for the weight type as
// quant::traits(t).name spells it: "product_q4_K", "product_mxfp4"); empty when there is none.
std::span<const uint32_t> spirv(std::string_view name);

}  // namespace moetier::gpu::vk_impl
