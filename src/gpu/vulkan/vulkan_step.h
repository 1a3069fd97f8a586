// gpu::DeviceStep on Vulkan: one device-local arena (activations and constants, bound as binding 1 of every
// kernel), one device-local buffer per KV cache, host-visible staging for uploads and downloads, and one command
// buffer on the compute queue into which every op is recorded in order, a memory barrier between dependent ops.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include <vulkan/vulkan_raii.hpp>

#include "gpu/step.h"
#include "gpu/vulkan/buffer.h"
#include "gpu/vulkan/step_profile.h"
#include "gpu/vulkan/vulkan_backend.h"

namespace moetier::gpu::vk_impl {

class VulkanStep final : public DeviceStep {
 public:
  // The products read the weights `backend` placed before this call.
  explicit VulkanStep(VulkanBackend& backend);
  ~VulkanStep() override;

  DevArray alloc(int64_t n) override;
  DevArray constant(std::span<const float> v) override;
  int kv_cache(int64_t n_ctx, int64_t n_kv) override;
  void finish_setup(int64_t staging_floats) override;
  void check_product(const quant::WeightView& w) const override;
  uint64_t bytes() const override;

  void upload(const float* src, DevArray dst) override;
  void download(DevArray src, float* dst) override;
  void rms_norm(DevArray x, DevArray w, DevArray y, int64_t rows, int64_t n, float eps) override;
  void rope(DevArray x, DevArray table, int64_t n_tok, int64_t n_heads, int64_t head_dim, int64_t n_rot,
            bool neox) override;
  void kv_store(int kv, DevArray k, DevArray v, int64_t pos0, int64_t n_tok) override;
  void attention(const AttentionOp& op, DevArray q, DevArray out) override;
  void glu(GluKind kind, float alpha, float limit, DevArray gate, DevArray up, DevArray h, int64_t n) override;
  void add(DevArray y, DevArray a, int64_t rows, int64_t n, bool broadcast) override;
  DevArray round_for(quant::GgmlType t, DevArray x, DevArray dst, int64_t rows, int64_t cols) override;
  void product(const quant::WeightView& w, DevArray x, DevArray y, int64_t n_tok, bool accumulate = false) override;
  void products_grouped(std::span<const GroupedProduct> ps, DevArray table) override;
  void gather(DevArray src, std::span<const int32_t> rows, int64_t n, DevArray dst, DevArray index) override;
  void combine(DevArray slots, DevArray table, DevArray out, int64_t n_tok, int64_t k, int64_t n,
               bool accumulate = false) override;
  void submit() override;
  void submit_async() override;
  void discard() override;

 private:
  struct Kv {
    int64_t n_ctx = 0, n_kv = 0;
    Buffer buffer;
    vk::raii::DescriptorSet set{nullptr};
  };
  struct Download {
    float* dst = nullptr;
    uint64_t stage_offset = 0;  // bytes
    uint32_t floats = 0;
  };
  // Begins the command buffer if needed and orders op `label` after the ones before it (consecutive products run
  // together).
  void begin_op(bool is_product, StepProfile::Label label);
  // A memory barrier from every compute and transfer write before it to every access after it.
  void barrier();
  // Binds pipeline and set unless they are bound already.
  void use(vk::Pipeline pipeline, vk::DescriptorSet set);
  // The placement holding w's rows; throws moetier::Error naming the product when there is none.
  const VulkanBackend::Placed& placed(const quant::WeightView& w) const;
  // Binds kernel `name` with descriptor set `set` and pushes `bytes` of push constants.
  void bind(std::string_view name, vk::DescriptorSet set, const void* push, uint32_t bytes);
  // Dispatches enough 64-invocation workgroups for `total` invocations (continuing in y past 65535).
  void launch(uint64_t total);
  void check(DevArray a, int64_t n, const char* what) const;

  VulkanBackend& be_;
  bool ready_ = false;
  uint64_t floats_ = 0;  // arena size
  std::vector<std::pair<std::span<const float>, DevArray>> constants_;
  std::vector<Kv> kv_;
  Buffer arena_;
  vk::raii::DescriptorSet arena_set_{nullptr};
  Buffer up_stage_, down_stage_;
  uint64_t up_used_ = 0, down_used_ = 0;  // bytes of this submission
  // Ends what was recorded and submits it; waits for it and fills the downloads when `wait`, else leaves it
  // running (submit_async) and records on into the other command buffer.
  void run(bool wait);
  // After the last submission was waited for: fills the download() destinations and starts clean.
  void deliver();
  // Waits until the submissions up to timeline value v are done (no-op when known done).
  void wait_for(uint64_t v);

  vk::raii::CommandPool pool_{nullptr};
  std::array<vk::raii::CommandBuffer, 2> bufs_{vk::raii::CommandBuffer{nullptr}, vk::raii::CommandBuffer{nullptr}};
  vk::raii::CommandBuffer* cmd_ = &bufs_[0];  // the one being recorded
  std::array<uint64_t, 2> signal_of_{};        // the compute timeline value each buffer's last submission signals
  uint64_t in_flight_ = 0;   // the value an unwaited submit_async() signals; 0: none
  uint64_t done_ = 0;        // every submission up to this value is known complete
  bool after_async_ = false;  // the next buffer starts with a barrier: it reads what the running one writes
  bool recording_ = false;
  bool last_was_product_ = false;
  uint64_t dispatches_ = 0;  // of this submission
  vk::Pipeline bound_pipeline_ = nullptr;
  vk::DescriptorSet bound_set_ = nullptr;
  std::vector<Download> downloads_;
  // products_grouped()'s work: per product its chunk (null: it spans chunks, dispatched alone) and its buckets.
  struct Entry {
    const VulkanBackend::Chunk* chunk = nullptr;
    size_t product = 0;
    uint32_t w_offset = 0;  // bytes from the chunk's start to the product's first row
  };
  std::vector<Entry> entries_;
  std::vector<uint32_t> table_host_;  // 4 words per grouped product
  std::unique_ptr<StepProfile> profile_;  // MOETIER_GPU_PROFILE only
  StepProfile::Label op_;                 // the op recorded last
};

}  // namespace moetier::gpu::vk_impl
