// A VkBuffer with its own memory: device-local (weights, the products' inputs and outputs) or host-visible and
// coherent (staging: the CPU writes activations there; readback: the CPU reads results there, from host-cached
// memory where the device has it, since uncached reads run at a fraction of RAM speed; mapped for the buffer's life).
#pragma once

#include <cstdint>
#include <utility>

#include <vulkan/vulkan_raii.hpp>

#include "gpu/vulkan/context.h"

namespace moetier::gpu::vk_impl {

enum class BufferKind { device_local, staging, readback };

// One memory allocation counted against the device's limit while it lives (Device::add_allocation).
class CountedAllocation {
 public:
  CountedAllocation() = default;
  explicit CountedAllocation(const Device& d) : device_(&d) { d.add_allocation(); }
  CountedAllocation(CountedAllocation&& o) noexcept : device_(std::exchange(o.device_, nullptr)) {}
  CountedAllocation& operator=(CountedAllocation&& o) noexcept {
    if (this != &o) {
      release();
      device_ = std::exchange(o.device_, nullptr);
    }
    return *this;
  }
  ~CountedAllocation() { release(); }

 private:
  void release() {
    if (device_ != nullptr) device_->remove_allocation();
    device_ = nullptr;
  }
  const Device* device_ = nullptr;
};

class Buffer {
 public:
  Buffer() = default;
  // `bytes` (rounded up to 4: shaders read words) of `kind` memory, shared between the device's queue families.
  // Throws moetier::Error naming `what` when the device is out of memory.
  Buffer(const Device& device, uint64_t bytes, BufferKind kind, const char* what);

  const vk::raii::Buffer& get() const { return buffer_; }
  uint64_t bytes() const { return bytes_; }
  // The mapping of a staging or readback buffer (null for device-local memory).
  uint8_t* mapped() const { return mapped_; }

 private:
  CountedAllocation counted_;
  vk::raii::Buffer buffer_{nullptr};
  vk::raii::DeviceMemory memory_{nullptr};
  uint64_t bytes_ = 0;
  uint8_t* mapped_ = nullptr;
};

}  // namespace moetier::gpu::vk_impl
