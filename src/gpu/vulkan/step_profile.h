// MOETIER_GPU_PROFILE=1: where a GPU step's time goes. A timestamp is written into the command buffer between
// every two ops of the step (vkCmdWriteTimestamp at the bottom of the pipe: when everything recorded before it has
// finished), so the ticks between two timestamps are charged to the op recorded between them; consecutive products
// without a barrier overlap, and the later one is charged only the time it adds. The host side measures how long
// recording took and how long each submission took from vkQueueSubmit to the end of the wait: that time less the
// GPU's own is the latency of a submission. The totals are printed on stderr when the step is destroyed.
// Costs a timestamp per op and a query read per submission: off unless asked for.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include <vulkan/vulkan_raii.hpp>

#include "gpu/vulkan/context.h"

namespace moetier::gpu::vk_impl {

class StepProfile {
 public:
  // What an op is called in the report: a kernel's name, and the weight type of a product (-1: none).
  struct Label {
    const char* op = "";
    int type = -1;
  };
  // nullptr unless MOETIER_GPU_PROFILE is set and the compute queue has timestamps.
  static std::unique_ptr<StepProfile> from_env(const Device& device);
  StepProfile(const Device& device, double ns_per_tick);
  ~StepProfile();
  StepProfile(const StepProfile&) = delete;
  StepProfile& operator=(const StepProfile&) = delete;

  // A new command buffer: resets the queries and writes the first timestamp.
  void begin(const vk::raii::CommandBuffer& cmd);
  // The op `ended` was the last one recorded: a timestamp closes it (ops past the query pool's 4096 join the last).
  void mark(const vk::raii::CommandBuffer& cmd, Label ended);
  // Before vkQueueSubmit (the host's recording time ends) and after the wait for it (its timestamps are read).
  void submitted();
  void finished();

 private:
  struct Total {
    Label label;
    uint64_t count = 0;
    double ns = 0;
  };
  static constexpr uint32_t kQueries = 4096;
  const Device& device_;
  double ns_per_tick_;
  uint64_t tick_mask_;
  vk::raii::QueryPool pool_{nullptr};
  std::vector<Label> labels_;    // [kQueries]: label of the op timestamp i closes
  std::vector<uint64_t> ticks_;  // [kQueries]
  uint32_t used_ = 0;            // timestamps of this submission
  std::vector<Total> totals_;    // one per label seen
  std::chrono::steady_clock::time_point began_, submitted_at_;
  uint64_t submissions_ = 0;
  double record_ns_ = 0, submit_to_done_ns_ = 0, gpu_ns_ = 0;
};

}  // namespace moetier::gpu::vk_impl
