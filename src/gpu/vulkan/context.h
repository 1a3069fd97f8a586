// A Vulkan instance and one logical device: the queues moetier submits to, the validation layer's message count,
// and the device's description (gpu::DeviceInfo). Vulkan-Hpp's RAII handles release everything in reverse order.
//
// Requirements: Vulkan 1.2 (timeline semaphores), a queue family with compute. Transfers use a queue family with
// transfer but neither compute nor graphics where the device has one (a DMA engine on discrete GPUs), else the
// compute queue; buffers shared by both are created with VK_SHARING_MODE_CONCURRENT.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include <vulkan/vulkan_raii.hpp>

#include "gpu/gpu.h"

namespace moetier::gpu::vk_impl {

// Instance with the validation layer and a debug messenger when `validation`; counts the messages it reports.
class Instance {
 public:
  explicit Instance(bool validation);
  // The process's instance for `validation` (or'd with MOETIER_VULKAN_VALIDATION), made on first use and never
  // destroyed: destroying a process's last instance makes the loader unload the driver, and NVIDIA's driver
  // (580.159 on an H200) could not be loaded again after about thirty such cycles in one process (vkCreateInstance
  // then failed with VK_ERROR_INCOMPATIBLE_DRIVER). Thread-safe.
  static std::shared_ptr<Instance> shared(bool validation);
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;

  const vk::raii::Instance& get() const { return instance_; }
  std::vector<vk::raii::PhysicalDevice> physical_devices() const;
  uint64_t validation_errors() const { return errors_.load(std::memory_order_relaxed); }
  // Whether the layer also checks synchronization (MOETIER_VULKAN_VALIDATION=sync).
  bool sync_validation() const { return sync_validation_; }

 private:
  static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                   VkDebugUtilsMessageTypeFlagsEXT types,
                                                   const VkDebugUtilsMessengerCallbackDataEXT* data, void* self);
  vk::raii::Context context_;
  vk::raii::Instance instance_{nullptr};
  vk::raii::DebugUtilsMessengerEXT messenger_{nullptr};
  bool sync_validation_ = false;
  std::atomic<uint64_t> errors_{0};  // written by on_message, on the thread of the reported call
};

// The error messages of every Instance in this process so far (gpu::validation_errors_in_process).
uint64_t process_validation_errors();

// What `moetier devices` shows of a physical device.
DeviceInfo describe(const vk::raii::PhysicalDevice& pd, int index);

class Device {
 public:
  // Opens device `index` of the instance. Throws moetier::Error for a bad index or an unusable device.
  Device(const Instance& instance, int index);
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const DeviceInfo& info() const { return info_; }
  const vk::raii::PhysicalDevice& physical() const { return physical_; }
  const vk::raii::Device& get() const { return device_; }
  const vk::raii::Queue& compute_queue() const { return compute_; }
  const vk::raii::Queue& transfer_queue() const { return transfer_; }
  uint32_t compute_family() const { return compute_family_; }
  uint32_t transfer_family() const { return transfer_family_; }
  // The queue families a buffer used by both queues is shared between (one entry when they are the same).
  std::vector<uint32_t> families() const;
  // A memory type index with `flags` among `type_bits`; throws moetier::Error when there is none.
  uint32_t memory_type(uint32_t type_bits, vk::MemoryPropertyFlags flags) const;
  bool has_memory_type(uint32_t type_bits, vk::MemoryPropertyFlags flags) const;
  // Counts a memory allocation against maxMemoryAllocationCount (4096 on some drivers: one per placed weight
  // chunk, KV cache and staging buffer); throws moetier::Error naming the limit when it is reached.
  void add_allocation() const;
  void remove_allocation() const { --allocations_; }

 private:
  vk::raii::PhysicalDevice physical_{nullptr};
  DeviceInfo info_;
  uint32_t compute_family_ = 0;
  uint32_t transfer_family_ = 0;
  vk::raii::Device device_{nullptr};
  vk::raii::Queue compute_{nullptr};
  vk::raii::Queue transfer_{nullptr};
  uint32_t max_allocations_ = 4096;  // VkPhysicalDeviceLimits::maxMemoryAllocationCount
  mutable uint32_t allocations_ = 0;  // live buffers' memory (the backend's thread only)
};

// A timeline semaphore and the value last signalled on it: submit() signals next(), wait() blocks the host until
// the value is reached (a call's results are in the staging buffer once it returns).
class Timeline {
 public:
  // spin: wait() polls the counter for up to kSpinUs before it blocks (a GPU: the blocking wait's wake-up added
  // tens of microseconds to each of a decode step's ~50 host waits on an H200); false on a CPU driver such as
  // lavapipe, whose own threads need the cores.
  Timeline(const vk::raii::Device& device, bool spin);
  static constexpr int kSpinUs = 2000;
  const vk::raii::Semaphore& semaphore() const { return sem_; }
  uint64_t value() const { return value_; }
  uint64_t next() { return ++value_; }
  // Throws moetier::Error when the device is lost or the wait times out (60 s: a hung GPU is reported, not waited
  // on forever).
  void wait(uint64_t value) const;

 private:
  const vk::raii::Device* device_;
  vk::raii::Semaphore sem_{nullptr};
  uint64_t value_ = 0;
  bool spin_ = false;
};

}  // namespace moetier::gpu::vk_impl
