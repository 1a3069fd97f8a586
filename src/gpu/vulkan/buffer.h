// A VkBuffer with its own memory: device-local (weights, the products' inputs and outputs) or host-visible and
// coherent (staging: the CPU writes activations there and reads results back; mapped for the buffer's life).
#pragma once

#include <cstdint>

#include <vulkan/vulkan_raii.hpp>

#include "gpu/vulkan/context.h"

namespace moetier::gpu::vk_impl {

enum class BufferKind { device_local, staging };

class Buffer {
 public:
  Buffer() = default;
  // `bytes` (rounded up to 4: shaders read words) of `kind` memory, shared between the device's queue families.
  // Throws moetier::Error naming `what` when the device is out of memory.
  Buffer(const Device& device, uint64_t bytes, BufferKind kind, const char* what);

  const vk::raii::Buffer& get() const { return buffer_; }
  uint64_t bytes() const { return bytes_; }
  // The mapping of a staging buffer (null for device-local memory).
  uint8_t* mapped() const { return mapped_; }

 private:
  vk::raii::Buffer buffer_{nullptr};
  vk::raii::DeviceMemory memory_{nullptr};
  uint64_t bytes_ = 0;
  uint8_t* mapped_ = nullptr;
};

}  // namespace moetier::gpu::vk_impl
