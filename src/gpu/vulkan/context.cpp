#include "gpu/vulkan/context.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string_view>
#include <utility>

#include "util/error.h"

namespace moetier::gpu::vk_impl {

namespace {

constexpr const char* kValidationLayer = "VK_LAYER_KHRONOS_validation";

// Every instance's error count together (gpu::validation_errors_in_process); atomic because instances on different
// threads (the server's sequences run in turn, a test may open several backends) may report at once.
std::atomic<uint64_t> g_process_errors{0};

bool env_validation() {
  const char* v = std::getenv("MOETIER_VULKAN_VALIDATION");
  return v != nullptr && std::string_view(v) != "" && std::string_view(v) != "0";
}

bool env_sync_validation() {
  const char* v = std::getenv("MOETIER_VULKAN_VALIDATION");
  return v != nullptr && std::string_view(v) == "sync";
}

const char* type_name(vk::PhysicalDeviceType t) {
  switch (t) {
    case vk::PhysicalDeviceType::eDiscreteGpu: return "discrete";
    case vk::PhysicalDeviceType::eIntegratedGpu: return "integrated";
    case vk::PhysicalDeviceType::eVirtualGpu: return "virtual";
    case vk::PhysicalDeviceType::eCpu: return "cpu";
    default: return "other";
  }
}

}  // namespace

Instance::Instance(bool validation) try {
  validation = validation || env_validation();
  // The highest version moetier knows: a device's features of Vulkan 1.3 (integer dot products) may then be queried
  // through VkPhysicalDeviceVulkan13Features; moetier itself needs 1.2 (the loader accepts any version since 1.1).
  vk::ApplicationInfo app("moetier", 1, "moetier", 1, VK_API_VERSION_1_3);
  std::vector<const char*> layers;
  std::vector<const char*> extensions;
  if (validation) {
    const auto available = context_.enumerateInstanceLayerProperties();
    const bool found = std::any_of(available.begin(), available.end(), [](const vk::LayerProperties& l) {
      return std::strcmp(l.layerName.data(), kValidationLayer) == 0;
    });
    if (!found) {
      fail("Vulkan validation was asked for but {} is not installed (Debian: apt install vulkan-validationlayers)",
           kValidationLayer);
    }
    layers.push_back(kValidationLayer);
    extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
  }
  vk::InstanceCreateInfo ci({}, &app, layers, extensions);
  // MOETIER_VULKAN_VALIDATION=sync adds the layer's synchronization validation: a missing barrier is an error.
  sync_validation_ = validation && env_sync_validation();
  const vk::ValidationFeatureEnableEXT sync = vk::ValidationFeatureEnableEXT::eSynchronizationValidation;
  const vk::ValidationFeaturesEXT features(sync, {});
  if (sync_validation_) ci.pNext = &features;
  instance_ = vk::raii::Instance(context_, ci);
  if (validation) {
    using S = vk::DebugUtilsMessageSeverityFlagBitsEXT;
    using T = vk::DebugUtilsMessageTypeFlagBitsEXT;
    vk::DebugUtilsMessengerCreateInfoEXT mi({}, S::eWarning | S::eError,
                                            T::eGeneral | T::eValidation | T::ePerformance, &Instance::on_message,
                                            this);
    messenger_ = vk::raii::DebugUtilsMessengerEXT(instance_, mi);
  }
} catch (const vk::SystemError& e) {
  fail("Vulkan: cannot create an instance ({}): is a Vulkan driver installed? (Debian: apt install "
       "mesa-vulkan-drivers for the CPU driver lavapipe, or your GPU vendor's driver)",
       e.what());
} catch (const Error&) {
  throw;
} catch (const std::runtime_error& e) {
  // vk::raii::Context throws a plain runtime_error when libvulkan.so.1 cannot be loaded.
  fail("Vulkan: {} (Debian: apt install libvulkan1 mesa-vulkan-drivers)", e.what());
}

std::shared_ptr<Instance> Instance::shared(bool validation) {
  static std::mutex mutex;
  // Never destroyed: a static destructor would call into the driver after its own exit handlers may have run.
  static auto* instances = new std::map<std::pair<bool, bool>, std::shared_ptr<Instance>>;
  const std::pair<bool, bool> key(validation || env_validation(), env_sync_validation());
  const std::lock_guard<std::mutex> lock(mutex);
  std::shared_ptr<Instance>& slot = (*instances)[key];
  if (slot == nullptr) slot = std::make_shared<Instance>(validation);
  return slot;
}

uint64_t process_validation_errors() { return g_process_errors.load(std::memory_order_relaxed); }

VKAPI_ATTR VkBool32 VKAPI_CALL Instance::on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                    VkDebugUtilsMessageTypeFlagsEXT,
                                                    const VkDebugUtilsMessengerCallbackDataEXT* data, void* self) {
  const bool error = (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) != 0;
  if (error) {
    static_cast<Instance*>(self)->errors_.fetch_add(1, std::memory_order_relaxed);
    g_process_errors.fetch_add(1, std::memory_order_relaxed);
  }
  std::fprintf(stderr, "vulkan validation %s: %s\n", error ? "error" : "warning",
               data->pMessage != nullptr ? data->pMessage : "");
  return VK_FALSE;
}

std::vector<vk::raii::PhysicalDevice> Instance::physical_devices() const {
  try {
    return vk::raii::PhysicalDevices(instance_);
  } catch (const vk::SystemError& e) {
    fail("Vulkan: cannot enumerate devices ({})", e.what());
  }
}

DeviceInfo describe(const vk::raii::PhysicalDevice& pd, int index) {
  DeviceInfo d;
  d.index = index;
  const vk::PhysicalDeviceProperties props = pd.getProperties();
  d.name = props.deviceName.data();
  d.type = type_name(props.deviceType);
  d.api_version = props.apiVersion;
  d.max_storage_buffer_range = props.limits.maxStorageBufferRange;
  d.usable = props.apiVersion >= VK_API_VERSION_1_2;
  for (const auto& heap : pd.getMemoryProperties().memoryHeaps) {
    if (heap.flags & vk::MemoryHeapFlagBits::eDeviceLocal) d.memory_bytes = std::max<uint64_t>(d.memory_bytes, heap.size);
  }
  for (const auto& q : pd.getQueueFamilyProperties()) {
    const bool transfer = static_cast<bool>(q.queueFlags & vk::QueueFlagBits::eTransfer);
    const bool other = static_cast<bool>(q.queueFlags & (vk::QueueFlagBits::eCompute | vk::QueueFlagBits::eGraphics));
    if (transfer && !other) d.transfer_queue = true;
  }
  if (!d.usable) return d;
  // Features and properties of Vulkan 1.1-1.3, chained by hand: the 1.3 structs only where the device has 1.3.
  vk::PhysicalDeviceVulkan11Properties p11;
  vk::PhysicalDeviceVulkan12Properties p12;
  vk::PhysicalDeviceProperties2 p2;
  p2.pNext = &p11;
  p11.pNext = &p12;
  pd.getDispatcher()->vkGetPhysicalDeviceProperties2(static_cast<VkPhysicalDevice>(*pd),
                                                     reinterpret_cast<VkPhysicalDeviceProperties2*>(&p2));
  d.subgroup_size = p11.subgroupSize;
  d.driver = std::string(p12.driverName.data()) + " " + p12.driverInfo.data();
  vk::PhysicalDeviceVulkan12Features f12;
  vk::PhysicalDeviceVulkan13Features f13;
  vk::PhysicalDeviceFeatures2 f2;
  f2.pNext = &f12;
  if (props.apiVersion >= VK_API_VERSION_1_3) f12.pNext = &f13;
  pd.getDispatcher()->vkGetPhysicalDeviceFeatures2(static_cast<VkPhysicalDevice>(*pd),
                                                   reinterpret_cast<VkPhysicalDeviceFeatures2*>(&f2));
  d.fp16 = f12.shaderFloat16 == VK_TRUE;
  d.int_dot = f13.shaderIntegerDotProduct == VK_TRUE;
  d.usable = f12.timelineSemaphore == VK_TRUE;
  return d;
}

Device::Device(const Instance& instance, int index) try {
  auto devices = instance.physical_devices();
  if (devices.empty()) fail("Vulkan: the loader reports no device (is a driver installed? Debian: mesa-vulkan-drivers)");
  if (index < 0 || index >= static_cast<int>(devices.size())) {
    fail("--device {} is out of range: this machine has {} Vulkan device(s), 0..{} (see `moetier devices`)", index,
         devices.size(), devices.size() - 1);
  }
  physical_ = std::move(devices[static_cast<size_t>(index)]);
  info_ = describe(physical_, index);
  max_allocations_ = physical_.getProperties().limits.maxMemoryAllocationCount;
  if (!info_.usable) {
    fail("Vulkan device {} ({}) lacks Vulkan 1.2 timeline semaphores, which moetier needs", index, info_.name);
  }
  const auto families = physical_.getQueueFamilyProperties();
  bool have_compute = false;
  for (uint32_t i = 0; i < families.size(); ++i) {
    if (families[i].queueFlags & vk::QueueFlagBits::eCompute) {
      compute_family_ = i;
      have_compute = true;
      break;
    }
  }
  if (!have_compute) fail("Vulkan device {} ({}) has no compute queue", index, info_.name);
  transfer_family_ = compute_family_;
  for (uint32_t i = 0; i < families.size(); ++i) {
    const auto f = families[i].queueFlags;
    if ((f & vk::QueueFlagBits::eTransfer) && !(f & (vk::QueueFlagBits::eCompute | vk::QueueFlagBits::eGraphics))) {
      transfer_family_ = i;
      break;
    }
  }
  const float priority = 1.0f;
  std::vector<vk::DeviceQueueCreateInfo> queues{vk::DeviceQueueCreateInfo({}, compute_family_, 1, &priority)};
  if (transfer_family_ != compute_family_) queues.emplace_back(vk::DeviceQueueCreateInfo({}, transfer_family_, 1, &priority));
  vk::PhysicalDeviceVulkan12Features f12;
  f12.timelineSemaphore = VK_TRUE;
  vk::PhysicalDeviceFeatures2 f2;
  f2.pNext = &f12;
  vk::DeviceCreateInfo ci({}, queues, {}, {}, nullptr);
  ci.pNext = &f2;
  device_ = vk::raii::Device(physical_, ci);
  compute_ = vk::raii::Queue(device_, compute_family_, 0);
  transfer_ = vk::raii::Queue(device_, transfer_family_, 0);
} catch (const vk::SystemError& e) {
  fail("Vulkan: cannot open device {} ({})", index, e.what());
}

std::vector<uint32_t> Device::families() const {
  if (transfer_family_ == compute_family_) return {compute_family_};
  return {compute_family_, transfer_family_};
}

void Device::add_allocation() const {
  if (allocations_ >= max_allocations_) {
    fail("Vulkan device {} ({}) allows at most {} memory allocations and moetier would need more (one per placed "
         "weight tensor chunk, KV cache and staging buffer); lower -ngl, -c or --parallel",
         info_.index, info_.name, max_allocations_);
  }
  ++allocations_;
}

bool Device::has_memory_type(uint32_t type_bits, vk::MemoryPropertyFlags flags) const {
  const auto mp = physical_.getMemoryProperties();
  for (uint32_t i = 0; i < mp.memoryTypeCount; ++i) {
    if ((type_bits & (1u << i)) && (mp.memoryTypes[i].propertyFlags & flags) == flags) return true;
  }
  return false;
}

uint32_t Device::memory_type(uint32_t type_bits, vk::MemoryPropertyFlags flags) const {
  const auto mp = physical_.getMemoryProperties();
  for (uint32_t i = 0; i < mp.memoryTypeCount; ++i) {
    if ((type_bits & (1u << i)) && (mp.memoryTypes[i].propertyFlags & flags) == flags) return i;
  }
  fail("Vulkan device {} ({}) has no memory type with the properties a buffer needs", info_.index, info_.name);
}

Timeline::Timeline(const vk::raii::Device& device, bool spin) : device_(&device), spin_(spin) {
  vk::SemaphoreTypeCreateInfo ti(vk::SemaphoreType::eTimeline, 0);
  vk::SemaphoreCreateInfo ci;
  ci.pNext = &ti;
  sem_ = vk::raii::Semaphore(device, ci);
}

void Timeline::wait(uint64_t value) const {
  constexpr uint64_t kTimeoutNs = 60'000'000'000;
  if (spin_) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(kSpinUs);
    do {
      if (sem_.getCounterValue() >= value) return;
    } while (std::chrono::steady_clock::now() < until);
  }
  const vk::Semaphore s = *sem_;
  vk::SemaphoreWaitInfo wi({}, s, value);
  const vk::Result r = device_->waitSemaphores(wi, kTimeoutNs);
  if (r == vk::Result::eTimeout) fail("Vulkan: the GPU did not finish a submission within 60 s");
}

}  // namespace moetier::gpu::vk_impl
