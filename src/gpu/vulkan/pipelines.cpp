#include "gpu/vulkan/pipelines.h"

#include <array>
#include <string>

#include <fmt/format.h>

#include "gpu/vulkan/shaders.h"
#include "util/error.h"

namespace moetier::gpu::vk_impl {

Pipelines::Pipelines(const Device& device) : device_(&device) {
  std::array<vk::DescriptorSetLayoutBinding, 3> bindings;
  for (uint32_t i = 0; i < bindings.size(); ++i) {
    bindings[i] = vk::DescriptorSetLayoutBinding(i, vk::DescriptorType::eStorageBuffer, 1,
                                                 vk::ShaderStageFlagBits::eCompute);
  }
  set_layout_ = vk::raii::DescriptorSetLayout(device.get(), vk::DescriptorSetLayoutCreateInfo({}, bindings));
  const vk::PushConstantRange push(vk::ShaderStageFlagBits::eCompute, 0, kPushBytes);
  static_assert(sizeof(ProductPush) <= kPushBytes);
  const vk::DescriptorSetLayout sl = *set_layout_;
  layout_ = vk::raii::PipelineLayout(device.get(), vk::PipelineLayoutCreateInfo({}, sl, push));
}

namespace {

std::span<const uint32_t> product_spirv(quant::GgmlType t) {
  return spirv(std::string("product_") + std::string(quant::traits(t).name));
}

}  // namespace

bool Pipelines::has_product(quant::GgmlType t) { return !product_spirv(t).empty(); }

vk::raii::Pipeline Pipelines::build(std::span<const uint32_t> code, std::string_view what) const {
  try {
    const vk::raii::ShaderModule module(device_->get(),
                                        vk::ShaderModuleCreateInfo({}, code.size() * sizeof(uint32_t), code.data()));
    const vk::ComputePipelineCreateInfo ci(
        {}, vk::PipelineShaderStageCreateInfo({}, vk::ShaderStageFlagBits::eCompute, *module, "main"), *layout_);
    return vk::raii::Pipeline(device_->get(), nullptr, ci);
  } catch (const vk::SystemError& e) {
    fail("Vulkan: cannot build the {} pipeline on {} ({})", what, device_->info().name, e.what());
  }
}

const vk::raii::Pipeline& Pipelines::product(quant::GgmlType t) {
  if (auto it = products_.find(t); it != products_.end()) return it->second;
  const auto code = product_spirv(t);
  if (code.empty()) fail("the Vulkan backend has no product kernel for {} weights", quant::type_name(t));
  return products_.emplace(t, build(code, fmt::format("{} product", quant::type_name(t)))).first->second;
}

const vk::raii::Pipeline& Pipelines::read() {
  if (!*read_) read_ = build(spirv("read"), "read-bandwidth");
  return read_;
}

const vk::raii::Pipeline& Pipelines::op(std::string_view name) {
  if (auto it = ops_.find(name); it != ops_.end()) return it->second;
  const auto code = spirv(name);
  if (code.empty()) fail("the Vulkan backend has no {} kernel", name);
  return ops_.emplace(std::string(name), build(code, name)).first->second;
}

}  // namespace moetier::gpu::vk_impl
