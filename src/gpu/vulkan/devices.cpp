// The entry points of gpu.h on Vulkan.
#include "gpu/gpu.h"
#include "gpu/vulkan/context.h"
#include "gpu/vulkan/pipelines.h"
#include "gpu/vulkan/vulkan_backend.h"

namespace moetier::gpu {

bool built_with_vulkan() { return true; }

std::vector<DeviceInfo> list_devices() {
  const std::shared_ptr<vk_impl::Instance> instance = vk_impl::Instance::shared(false);
  std::vector<DeviceInfo> out;
  int i = 0;
  for (const auto& pd : instance->physical_devices()) out.push_back(vk_impl::describe(pd, i++));
  return out;
}

bool has_kernel(quant::GgmlType t) { return vk_impl::Pipelines::has_product(t); }

uint64_t validation_errors_in_process() { return vk_impl::process_validation_errors(); }

std::unique_ptr<GpuBackend> make_backend(const GpuOptions& options) {
  return std::make_unique<vk_impl::VulkanBackend>(options);
}

}  // namespace moetier::gpu
