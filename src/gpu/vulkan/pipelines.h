// The compute pipelines and their shared layout: every shader binds up to three storage buffers 0-2 of set 0 (a
// product: W, X, Y, src/gpu/shaders/matmul.comp; the step's kernels: a KV cache, the arena) and takes at most
// kPushBytes of push constants (ProductPush for a product; each kernel's own in gpu/vulkan/vulkan_step.cpp).
#pragma once

#include <cassert>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>

#include <vulkan/vulkan_raii.hpp>

#include "gpu/vulkan/context.h"
#include "quant/ggml_type.h"

namespace moetier::gpu::vk_impl {

// A count or offset for a push constant or a dispatch size (an internal invariant: the callers bound them).
inline uint32_t u32(int64_t v) {
  assert(v >= 0 && v <= static_cast<int64_t>(UINT32_MAX));
  return static_cast<uint32_t>(v);
}

// matmul.comp's push constants, in its order; offsets in bytes (w) or floats (x, y).
struct ProductPush {
  uint32_t rows = 0;
  uint32_t cols = 0;
  uint32_t row_bytes = 0;
  uint32_t w_offset = 0;
  uint32_t x_offset = 0;
  uint32_t y_offset = 0;
  uint32_t y_stride = 0;
  uint32_t n_tok = 0;
  uint32_t table_off = 0xffffffffu;  // the grouped form's table in X (VulkanStep::products_grouped); none
  uint32_t rows_per_lane = 1;        // Pipelines::rows_per_lane(n_tok) of the dispatch's most tokens
  uint32_t accumulate = 0;           // 1: y += the product (VulkanStep::product)
};

class Pipelines {
 public:
  // The tile form of matmul.comp (a dispatch with more than one token in some product): each workgroup computes
  // kTileRows rows x kTokenTile tokens.
  static constexpr uint32_t kTokenTile = 32;
  static constexpr uint32_t kTileRows = 32;
  // Workgroups along x before rows continue in z (at least maxComputeWorkGroupCount[0] on every device).
  static constexpr uint32_t kMaxGroupsX = 65535;
  // Rows each set of a product workgroup's lanes takes in the one-token form (the set's segment of x, loaded once,
  // serves that many rows); rows_per_lane() is 1 for the tile form.
  static constexpr uint32_t kRowsPerLane = 4;
  static constexpr uint32_t rows_per_lane(int64_t max_tok) { return max_tok == 1 ? kRowsPerLane : 1; }
  // Rows one product workgroup takes for rows of `cols` elements: the tile form's kTileRows; in the one-token form
  // 64 / L sets of rows_per_lane rows, L the power of two covering the row's 32-element segments, at most 64
  // (matmul.comp computes the same).
  static constexpr uint32_t rows_per_group(uint32_t cols, uint32_t rows_per_lane) {
    if (rows_per_lane == 1) return kTileRows;
    const uint32_t items = (cols + 31) / 32;
    uint32_t lanes = 1;
    while (lanes < items && lanes < 64) lanes <<= 1;
    return 64 / lanes * rows_per_lane;
  }

  // The push-constant range of the layout: the least every device supports (maxPushConstantsSize >= 128).
  static constexpr uint32_t kPushBytes = 128;

  explicit Pipelines(const Device& device);
  const vk::raii::DescriptorSetLayout& set_layout() const { return set_layout_; }
  const vk::raii::PipelineLayout& layout() const { return layout_; }
  // Whether the binary has a product shader for `t`.
  static bool has_product(quant::GgmlType t);
  // The product pipeline of `t`, built on first use (at setup: GpuBackend::place). Throws moetier::Error for a
  // type without a shader.
  const vk::raii::Pipeline& product(quant::GgmlType t);
  // read.comp (the read-bandwidth kernel, kReadGroupSize invocations per workgroup), built on first use.
  const vk::raii::Pipeline& read();
  static constexpr uint32_t kReadGroupSize = 256;
  // The step's kernel `name` (src/gpu/shaders/<name>.comp), built on first use.
  const vk::raii::Pipeline& op(std::string_view name);

 private:
  const Device* device_;
  vk::raii::DescriptorSetLayout set_layout_{nullptr};
  vk::raii::PipelineLayout layout_{nullptr};
  std::map<quant::GgmlType, vk::raii::Pipeline> products_;
  vk::raii::Pipeline read_{nullptr};
  std::map<std::string, vk::raii::Pipeline, std::less<>> ops_;
  vk::raii::Pipeline build(std::span<const uint32_t> code, std::string_view what) const;
};

}  // namespace moetier::gpu::vk_impl
