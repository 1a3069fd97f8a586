// One Vulkan instance per process and setting (gpu/vulkan/context.h, Instance::shared): backends made one after
// another share it, so the driver is loaded once, and each backend counts the validation messages since it was
// made.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "gpu/gpu_test_support.h"
#include "gpu/step.h"
#include "gpu/vulkan/context.h"

namespace moetier::gpu {
namespace {

TEST(GpuInstance, OneInstancePerProcessAndSetting) {
  setenv("MOETIER_VULKAN_VALIDATION", "sync", 1);
  const auto a = vk_impl::Instance::shared(true);
  const auto b = vk_impl::Instance::shared(true);
  EXPECT_EQ(a.get(), b.get());
  EXPECT_TRUE(a->sync_validation());
}

TEST(GpuInstance, BackendsMadeOneAfterAnotherEachComputeAndCountTheirOwnMessages) {
  const std::vector<float> x = {1.5f, -2.0f, 0.25f, 8.0f, -0.5f, 3.0f, 7.0f, -9.0f};
  const std::vector<float> ones(x.size(), 1.0f);
  for (int i = 0; i < 3; ++i) {
    auto be = testing::validated_backend(64, 8, 1);
    DeviceStep& st = be->step();
    const DevArray dx = st.alloc(8), dy = st.alloc(8);
    st.finish_setup();
    std::vector<float> got(x.size(), NAN);
    st.upload(x.data(), dx);
    st.upload(ones.data(), dy);
    st.add(dy, dx, 1, 8, false);
    st.download(dy, got.data());
    st.submit();
    for (size_t j = 0; j < x.size(); ++j) EXPECT_EQ(got[j], x[j] + 1.0f) << "backend " << i << " element " << j;
    EXPECT_EQ(be->validation_errors(), 0u);
  }
}

}  // namespace
}  // namespace moetier::gpu
