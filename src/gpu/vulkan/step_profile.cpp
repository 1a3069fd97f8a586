#include "gpu/vulkan/step_profile.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "quant/ggml_type.h"
#include "util/error.h"

namespace moetier::gpu::vk_impl {

std::unique_ptr<StepProfile> StepProfile::from_env(const Device& device) {
  const char* v = std::getenv("MOETIER_GPU_PROFILE");
  if (v == nullptr || std::string_view(v) == "" || std::string_view(v) == "0") return nullptr;
  const auto families = device.physical().getQueueFamilyProperties();
  const uint32_t bits = families.at(device.compute_family()).timestampValidBits;
  if (bits == 0) {
    std::fprintf(stderr, "gpu profile: %s has no timestamps on its compute queue; MOETIER_GPU_PROFILE ignored\n",
                 device.info().name.c_str());
    return nullptr;
  }
  const double period = device.physical().getProperties().limits.timestampPeriod;
  auto p = std::make_unique<StepProfile>(device, period);
  p->tick_mask_ = bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
  return p;
}

StepProfile::StepProfile(const Device& device, double ns_per_tick)
    : device_(device), ns_per_tick_(ns_per_tick), tick_mask_(~uint64_t{0}), labels_(kQueries), ticks_(kQueries) {
  try {
    pool_ = vk::raii::QueryPool(device.get(), vk::QueryPoolCreateInfo({}, vk::QueryType::eTimestamp, kQueries));
  } catch (const vk::SystemError& e) {
    fail("Vulkan: cannot make the profile's timestamp queries on {} ({})", device.info().name, e.what());
  }
  totals_.reserve(64);
}

void StepProfile::begin(const vk::raii::CommandBuffer& cmd) {
  began_ = std::chrono::steady_clock::now();
  cmd.resetQueryPool(*pool_, 0, kQueries);
  cmd.writeTimestamp(vk::PipelineStageFlagBits::eBottomOfPipe, *pool_, 0);
  used_ = 1;
}

void StepProfile::mark(const vk::raii::CommandBuffer& cmd, Label ended) {
  if (used_ == 0) return;
  if (used_ == kQueries) {  // the pool is full: the last timestamp's op takes in the rest
    labels_[kQueries - 1] = ended;
    return;
  }
  cmd.writeTimestamp(vk::PipelineStageFlagBits::eBottomOfPipe, *pool_, used_);
  labels_[used_++] = ended;
}

void StepProfile::submitted() {
  submitted_at_ = std::chrono::steady_clock::now();
  record_ns_ += std::chrono::duration<double, std::nano>(submitted_at_ - began_).count();
}

void StepProfile::finished() {
  const auto done = std::chrono::steady_clock::now();
  submit_to_done_ns_ += std::chrono::duration<double, std::nano>(done - submitted_at_).count();
  ++submissions_;
  if (used_ < 2) return;
  const vk::Result r = (*device_.get()).getQueryPoolResults(*pool_, 0, used_, used_ * sizeof(uint64_t), ticks_.data(),
                                                            sizeof(uint64_t), vk::QueryResultFlagBits::e64);
  if (r != vk::Result::eSuccess) return;  // not ready cannot happen after the wait; nothing charged otherwise
  for (uint32_t i = 1; i < used_; ++i) {
    const double ns = static_cast<double>((ticks_[i] - ticks_[i - 1]) & tick_mask_) * ns_per_tick_;
    gpu_ns_ += ns;
    const Label l = labels_[i];
    auto it = std::find_if(totals_.begin(), totals_.end(), [&](const Total& t) {
      return t.label.type == l.type && std::strcmp(t.label.op, l.op) == 0;
    });
    if (it == totals_.end()) it = totals_.insert(totals_.end(), Total{l, 0, 0});
    ++it->count;
    it->ns += ns;
  }
  used_ = 0;
}

StepProfile::~StepProfile() {
  if (submissions_ == 0) return;
  std::sort(totals_.begin(), totals_.end(), [](const Total& a, const Total& b) { return a.ns > b.ns; });
  std::string out = fmt::format(
      "gpu profile: {} submissions; host recording {:.1f} ms, submit to done {:.1f} ms, GPU busy {:.1f} ms "
      "(latency {:.1f} us per submission beyond the GPU's own time)\n",
      submissions_, record_ns_ / 1e6, submit_to_done_ns_ / 1e6, gpu_ns_ / 1e6,
      (submit_to_done_ns_ - gpu_ns_) / 1e3 / static_cast<double>(submissions_));
  out += "gpu profile:   op                    count     total ms   share   mean us\n";
  for (const Total& t : totals_) {
    const std::string name =
        t.label.type < 0 ? t.label.op
                         : fmt::format("{} {}", t.label.op, quant::type_name(static_cast<quant::GgmlType>(t.label.type)));
    out += fmt::format("gpu profile:   {:<20} {:>8} {:>12.2f} {:>6.1f}% {:>9.1f}\n", name, t.count, t.ns / 1e6,
                       gpu_ns_ > 0 ? 100.0 * t.ns / gpu_ns_ : 0.0, t.ns / 1e3 / static_cast<double>(t.count));
  }
  std::fputs(out.c_str(), stderr);
}

}  // namespace moetier::gpu::vk_impl
