// The GPU backend's public face, free of Vulkan types: what the CLI lists (`moetier devices`) and what the model
// builds (a compute::Backend whose products read device-local copies of the placed weights).
//
// Built with Vulkan (libvulkan-dev and glslc found at configure time) the implementation is src/gpu/vulkan/;
// built without, src/gpu/absent.cpp, whose functions say so (moetier::Error naming what to install).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "compute/backend.h"
#include "gpu/step.h"
#include "quant/matmul.h"

namespace moetier::gpu {

// One Vulkan physical device as `moetier devices` shows it.
struct DeviceInfo {
  int index = 0;              // the --device value that selects it
  std::string name;           // VkPhysicalDeviceProperties::deviceName
  std::string type;           // "discrete", "integrated", "virtual", "cpu" or "other"
  std::string driver;         // driver name and info (Vulkan 1.2 driver properties)
  uint32_t api_version = 0;   // VK_MAKE_API_VERSION form
  uint64_t memory_bytes = 0;  // the largest device-local heap, bytes
  uint32_t subgroup_size = 0; // invocations per subgroup
  bool int_dot = false;       // shaderIntegerDotProduct (Vulkan 1.3 / VK_KHR_shader_integer_dot_product)
  bool fp16 = false;          // shaderFloat16
  bool transfer_queue = false;  // a queue family for transfers only (uploads run beside the compute queue)
  uint64_t max_storage_buffer_range = 0;  // bytes one storage-buffer binding may span (weights are split to it)
  bool usable = false;        // Vulkan 1.2 or later (timeline semaphores): moetier can run on it
};

// Whether this binary has the Vulkan backend at all.
bool built_with_vulkan();
// Whether the backend has a product kernel for weights of type t (false without Vulkan). -ngl leaves a tensor of
// another type on the CPU.
bool has_kernel(quant::GgmlType t);

// The devices the Vulkan loader reports, in its order. Throws moetier::Error when the binary has no Vulkan
// backend or the loader finds no driver (the message says what to install).
std::vector<DeviceInfo> list_devices();

struct GpuOptions {
  int device = 0;           // index into list_devices()
  // Enable the Khronos validation layer (also MOETIER_VULKAN_VALIDATION=1; =sync adds synchronization validation):
  // every message it reports is printed on stderr and counted (GpuBackend::validation_errors). Throws when the
  // layer is not installed.
  bool validation = false;
  int64_t max_cols = 0;     // widest product input (floats per activation row)
  int64_t max_rows = 0;     // most rows of one product (the output head: n_vocab)
  int64_t max_tok = 1;      // most activation rows of one call (n_batch, or n_batch * n_expert_used for a MoE layer)
  // How a product's activations are rounded before the dot products, as the CPU backend rounds them
  // (quant::round_activations_like_ggml): match_ggml puts x on the reference engine's 8-bit (or fp16/bf16) grid
  // for the weight's type, so GPU and CPU products differ only in the order (and fusing) of their float sums;
  // exact leaves x as it is.
  quant::ActivationRounding rounding = quant::ActivationRounding::match_ggml;
  // Bytes of one weight buffer; 0: the device's maxStorageBufferRange (rounded down to whole rows). Tests set a
  // small value to exercise the split of one matrix over several buffers.
  uint64_t max_buffer_bytes = 0;
};

// A compute::Backend on one GPU. Products run here when their weights were placed (copied into device-local
// buffers at setup); the activations stay in host memory and travel through host-visible staging buffers (where
// they are rounded, GpuOptions::rounding) for each call (a call is one command buffer: upload x, the dispatches, download y, one timeline-semaphore wait).
class GpuBackend : public compute::Backend {
 public:
  // Copies the rows of w (host memory: the file's mapping) to device-local buffers, split at whole rows where it
  // exceeds max_buffer_bytes, and builds the product pipeline of w's type. A product whose weights lie inside a
  // placed range (an expert's rows in a placed [n_expert, rows, cols] tensor) then runs on the GPU. Setup only.
  // Throws moetier::Error for a type without a GPU kernel or when device memory runs out.
  virtual void place(const quant::WeightView& w) = 0;
  virtual uint64_t placed_bytes() const = 0;
  // Device memory for n_slots slots of slot_bytes (a multiple of 256) each, which the host fills later
  // (write_slots): the VRAM expert tier's slots (moe/vram_tier.h). Returns the first of n_slots * slot_bytes host
  // addresses reserved to name the slots' bytes (mapped PROT_NONE: never readable). A WeightView whose data lies
  // there, 16-byte aligned, with all its rows inside one slot, is a product's weights on the GPU as a placed
  // matrix's rows are (product(), products_grouped()); its type must be one of `types` (their kernels are built
  // here). Setup only, before step(). Throws moetier::Error when device memory runs out.
  virtual const uint8_t* reserve_slots(uint64_t slot_bytes, int64_t n_slots,
                                       std::span<const quant::GgmlType> types) = 0;
  // Device bytes of the slots reserved so far.
  virtual uint64_t slot_bytes_reserved() const = 0;
  // One host-to-slot copy: src[bytes] to the slot bytes that dst names (all inside one slot of reserve_slots).
  struct SlotWrite {
    const uint8_t* dst = nullptr;
    const uint8_t* src = nullptr;
    uint64_t bytes = 0;
  };
  // Copies the writes on the transfer queue through a ring of staging pieces (the CPU fills one while the copy
  // engine drains the others). wait: returns when they have landed; else when they are all submitted (the step's
  // next submission waits for them on the device). Call between submissions of the step, once every submission
  // that reads the slots written has completed: the copies wait for nothing on the device, so a product still
  // running, or recorded but not yet submitted, would read the new bytes (the VRAM tier writes after the step's
  // submission it waited for). Throws moetier::Error for a destination outside the slots.
  virtual void write_slots(std::span<const SlotWrite> writes, bool wait = true) = 0;
  virtual const DeviceInfo& device() const = 0;
  // The device's read bandwidth in GB/s (10^9 bytes per second): a kernel that reads a device-local buffer of
  // `bytes` (at most the storage buffer range) once per pass, timed over 10 passes in one submission after one
  // untimed pass. For `moetier devices --bandwidth` and scripts/gpu-check.sh's decode bound.
  virtual double read_bandwidth(uint64_t bytes) = 0;
  // The host's round trip of one submission that does no work, in microseconds: vkQueueSubmit of a command buffer
  // holding one compute dispatch of one empty workgroup, to the return of the wait on its timeline semaphore;
  // the median of `n` after one untimed. What every host wait of the GPU step costs beyond the GPU's own time (a
  // MoE layer's routing on the host costs one per layer and token). For `moetier devices --bandwidth`.
  virtual double submit_latency_us(int n) = 0;
  // Messages of severity error the validation layer reported so far (0 without validation).
  virtual uint64_t validation_errors() const = 0;
  // The backend's device-resident step (gpu/step.h), made on first call, after the weights are placed; its
  // products read the placed weights. Setup only.
  virtual DeviceStep& step() = 0;
  // Frees the step and its device memory (a model that could not set it up falls back to per-product offload).
  virtual void release_step() = 0;
};

// Error messages the validation layer reported in this process so far, over every backend and instance (what a
// test that builds a model with -ngl checks at its end; 0 without validation or without Vulkan).
uint64_t validation_errors_in_process();

// Opens options.device. Throws moetier::Error for a bad index, an unusable device or a failed Vulkan call.
std::unique_ptr<GpuBackend> make_backend(const GpuOptions& options);

}  // namespace moetier::gpu
