#include "gpu/vulkan/buffer.h"

#include <vector>

#include "util/error.h"

namespace moetier::gpu::vk_impl {

Buffer::Buffer(const Device& device, uint64_t bytes, BufferKind kind, const char* what) try
    : bytes_((bytes + 3) & ~uint64_t{3}) {
  using U = vk::BufferUsageFlagBits;
  const std::vector<uint32_t> families = device.families();
  vk::BufferCreateInfo ci({}, bytes_, U::eStorageBuffer | U::eTransferSrc | U::eTransferDst,
                          families.size() > 1 ? vk::SharingMode::eConcurrent : vk::SharingMode::eExclusive,
                          families);
  buffer_ = vk::raii::Buffer(device.get(), ci);
  const vk::MemoryRequirements req = buffer_.getMemoryRequirements();
  const auto flags = kind == BufferKind::device_local
                         ? vk::MemoryPropertyFlags(vk::MemoryPropertyFlagBits::eDeviceLocal)
                         : vk::MemoryPropertyFlagBits::eHostVisible | vk::MemoryPropertyFlagBits::eHostCoherent;
  memory_ = vk::raii::DeviceMemory(device.get(), vk::MemoryAllocateInfo(req.size, device.memory_type(req.memoryTypeBits, flags)));
  buffer_.bindMemory(*memory_, 0);
  if (kind == BufferKind::staging) mapped_ = static_cast<uint8_t*>(memory_.mapMemory(0, VK_WHOLE_SIZE));
} catch (const vk::SystemError& e) {
  fail("Vulkan: cannot allocate {} bytes of {} memory for {} on {} ({})", bytes, kind == BufferKind::staging ? "staging" : "device-local",
       what, device.info().name, e.what());
}

}  // namespace moetier::gpu::vk_impl
