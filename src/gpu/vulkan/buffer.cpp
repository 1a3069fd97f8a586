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
  using M = vk::MemoryPropertyFlagBits;
  const vk::MemoryPropertyFlags host = M::eHostVisible | M::eHostCoherent;
  uint32_t type = 0;
  if (kind == BufferKind::device_local) {
    type = device.memory_type(req.memoryTypeBits, M::eDeviceLocal);
  } else if (kind == BufferKind::readback && device.has_memory_type(req.memoryTypeBits, host | M::eHostCached)) {
    type = device.memory_type(req.memoryTypeBits, host | M::eHostCached);
  } else {
    type = device.memory_type(req.memoryTypeBits, host);
  }
  counted_ = CountedAllocation(device);
  memory_ = vk::raii::DeviceMemory(device.get(), vk::MemoryAllocateInfo(req.size, type));
  buffer_.bindMemory(*memory_, 0);
  if (kind != BufferKind::device_local) mapped_ = static_cast<uint8_t*>(memory_.mapMemory(0, VK_WHOLE_SIZE));
} catch (const vk::SystemError& e) {
  fail("Vulkan: cannot allocate {} bytes of {} memory for {} on {} ({})", bytes, kind == BufferKind::device_local ? "device-local" : "host-visible",
       what, device.info().name, e.what());
}

}  // namespace moetier::gpu::vk_impl
