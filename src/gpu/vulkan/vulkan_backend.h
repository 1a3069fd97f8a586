// gpu::GpuBackend on Vulkan: placed weights in device-local buffers (split at whole rows to the device's
// maxStorageBufferRange), one command buffer per call (copy x in, the product dispatches, copy y out) on the
// compute queue, uploads on the transfer queue, completion through timeline semaphores.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include <vulkan/vulkan_raii.hpp>

#include "gpu/gpu.h"
#include "gpu/vulkan/buffer.h"
#include "gpu/vulkan/context.h"
#include "gpu/vulkan/pipelines.h"
#include "gpu/vulkan/upload_ring.h"

namespace moetier::gpu::vk_impl {

class VulkanStep;

class VulkanBackend final : public GpuBackend {
 public:
  explicit VulkanBackend(const GpuOptions& o);
  ~VulkanBackend() override;  // out of line: VulkanStep is complete there

  std::string_view name() const override { return "vulkan"; }
  bool reads(quant::Memory m) const override { return m == quant::Memory::host; }
  bool holds(const quant::WeightView& w) const override { return find(w) != nullptr; }
  void matmul(const quant::WeightView& w, const float* x, float* y, int64_t n_tok) override;
  void matmul_shared_x(std::span<const quant::Product> products, const float* x, int64_t n_tok) override;
  void matmul_groups(std::span<const quant::ProductGroup> groups) override;
  util::ThreadPool* host_pool() override { return nullptr; }
  compute::Activations activations(size_t n) const override { return compute::Activations::host_floats(n); }

  void place(const quant::WeightView& w) override;
  uint64_t placed_bytes() const override { return placed_bytes_; }
  const uint8_t* reserve_slots(uint64_t slot_bytes, int64_t n_slots,
                               std::span<const quant::GgmlType> types) override;
  uint64_t slot_bytes_reserved() const override { return slot_bytes_; }
  void write_slots(std::span<const SlotWrite> writes, bool wait = true) override;
  const DeviceInfo& device() const override { return device_.info(); }
  // The messages since this backend was made (its instance is the process's, Instance::shared).
  uint64_t validation_errors() const override { return instance_->validation_errors() - errors_at_start_; }
  compute::BackendCounters counters() const override { return counters_; }
  double read_bandwidth(uint64_t bytes) override;
  double submit_latency_us(int n) override;
  DeviceStep& step() override;
  void release_step() override;

 private:
  friend class VulkanStep;  // records into this backend's queue, over its placed weights and pipelines
  // Rows [row0, row0 + rows) of a placed matrix in one device buffer, bound with the io buffers.
  struct Chunk {
    int64_t row0 = 0;
    int64_t rows = 0;
    Buffer buffer;
    vk::raii::DescriptorSet set{nullptr};       // (the chunk, x_dev_, y_dev_): products of host activations
    vk::raii::DescriptorSet step_set{nullptr};  // (the chunk, the step's arena twice): products of the step
  };
  // A placed matrix, or a pool of expert slots (reserve_slots): then a "row" is a slot, rows the slot count,
  // row_bytes the slot's bytes, and a product's weights lie inside one slot in any of `types`.
  struct Placed {
    const uint8_t* host = nullptr;  // the placed matrix in host memory, or the slots' reserved addresses (the key)
    quant::GgmlType type = quant::GgmlType::F32;
    int64_t rows = 0;
    int64_t cols = 0;
    size_t row_bytes = 0;
    std::vector<Chunk> chunks;
    bool slots = false;
    std::vector<quant::GgmlType> types;  // slots only: the weight types their products may have
  };
  // The rows of a product's weights that one chunk holds: rows [first, first + rows) of the view, from byte
  // `offset` of the chunk's buffer.
  struct Piece {
    const Chunk* chunk = nullptr;
    int64_t first = 0;
    int64_t rows = 0;
    uint64_t offset = 0;
  };
  struct Job {
    vk::Pipeline pipeline;
    vk::DescriptorSet set;
    ProductPush push;
    uint32_t groups_x = 0, groups_y = 0, groups_z = 0;
  };
  struct Readback {
    float* dst = nullptr;  // host destination of floats [y_offset, y_offset + floats) of the y buffers
    uint32_t y_offset = 0;
    uint32_t floats = 0;
  };
  // Dispatches a submission takes before the next group starts a new one (a single group may go past it).
  static constexpr size_t kMaxJobs = 4096;

  const Placed* find(const quant::WeightView& w) const;
  // The pieces of w (which find() placed in pl), in row order: a placed matrix's rows may span chunks, a slot's
  // weights never do.
  template <class F>
  void for_each_piece(const Placed& pl, const quant::WeightView& w, F&& f) const {
    const auto off = static_cast<uint64_t>(w.data - pl.host);
    const auto row0 = static_cast<int64_t>(off / pl.row_bytes);
    for (const Chunk& c : pl.chunks) {
      if (pl.slots) {
        if (row0 >= c.row0 && row0 < c.row0 + c.rows)
          f(Piece{&c, 0, w.rows, off - static_cast<uint64_t>(c.row0) * pl.row_bytes});
        continue;
      }
      const int64_t lo = std::max(row0, c.row0), hi = std::min(row0 + w.rows, c.row0 + c.rows);
      if (lo < hi) f(Piece{&c, lo - row0, hi - lo, static_cast<uint64_t>(lo - c.row0) * pl.row_bytes});
    }
  }
  // Copies x[n_tok, cols] into the x staging buffer (submitting what is queued first when it is full), rounded
  // as the CPU rounds activations for weights of type t (GpuOptions::rounding); returns their float offset.
  uint32_t stage_x(const float* x, int64_t n_tok, int64_t cols, quant::GgmlType t);
  // Whether n_x more input floats and n_y more output floats fit the io buffers.
  bool fits(size_t n_x, size_t n_y) const;
  // Queues y[n_tok, w.rows] = w x for x already staged at x_offset; the caller made room (fits).
  void queue_product(const Placed& pl, const quant::WeightView& w, uint32_t x_offset, int64_t n_tok, float* y);
  // A product whose output alone exceeds the y buffers (the output head over a long prompt): in token slices.
  void sliced_product(const Placed& pl, const quant::Product& p, const float* x, int64_t n_tok);
  // Records and submits what is queued, waits, copies the results out; a no-op when nothing is queued.
  void flush();
  void upload(const uint8_t* src, uint64_t bytes, const Buffer& dst);
  void bind_chunk(Chunk& c);
  // Submits cb (waiting on nothing), signals the next value of `done` and waits for it; returns the value.
  uint64_t submit_and_wait(const vk::raii::Queue& queue, const vk::raii::CommandBuffer& cb, Timeline& done);
  // A descriptor set of the kernels' layout binding b0, b1, b2 (a product's W, X, Y).
  vk::raii::DescriptorSet make_set(const Buffer& b0, const Buffer& b1, const Buffer& b2);

  GpuOptions opts_;
  compute::BackendCounters counters_;
  std::shared_ptr<Instance> instance_;
  uint64_t errors_at_start_ = 0;  // instance_'s message count when this backend was made
  Device device_;
  Pipelines pipelines_;
  size_t x_cap_ = 0;  // floats of x_dev_ / x_stage_
  size_t y_cap_ = 0;  // floats of y_dev_ / y_stage_
  Buffer x_dev_, y_dev_, x_stage_, y_stage_;
  vk::raii::CommandPool compute_pool_{nullptr};
  vk::raii::CommandBuffer compute_cmd_{nullptr};
  vk::raii::CommandPool transfer_pool_{nullptr};
  Timeline compute_done_;
  Timeline transfer_done_;
  std::unique_ptr<UploadRing> uploads_;  // the placed weights' and the slots' copies (uses transfer_done_)
  std::vector<vk::raii::DescriptorPool> descriptor_pools_;
  uint32_t sets_left_ = 0;  // in descriptor_pools_.back()
  std::map<const uint8_t*, Placed> placed_;
  uint64_t placed_bytes_ = 0;
  uint64_t slot_bytes_ = 0;  // device bytes of the slot pools
  std::vector<std::pair<void*, size_t>> reservations_;  // the slot pools' reserved host addresses (munmap at the end)
  // The submission being assembled (capacity reserved at construction).
  std::vector<Job> jobs_;
  std::vector<Readback> reads_;
  size_t x_used_ = 0;
  size_t y_used_ = 0;
  std::unique_ptr<VulkanStep> step_;  // made by step()
};

}  // namespace moetier::gpu::vk_impl
