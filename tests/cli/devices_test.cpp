// `moetier devices`: with the Vulkan backend it lists the devices (lavapipe in CI) as text and JSON; a build
// without it (the sanitizer build, MOETIER_VULKAN=OFF) says so and what to install, with exit status 1, as -ngl does.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/run_cli.h"
#include "gpu/gpu.h"

namespace moetier {
namespace {

TEST(Devices, ListsTheDevicesOrSaysTheBackendIsAbsent) {
  const auto r = test::run_cli("devices");
  if (!gpu::built_with_vulkan()) {
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find("built without the Vulkan backend: install libvulkan-dev and glslc"), std::string::npos)
        << r.output;
    const auto run = test::run_cli("run -m '" + (test::oracle_dir() / "models/stories260K.gguf").string() +
                                   "' -n 4 -p 'Once' -ngl 99");
    EXPECT_EQ(run.exit_code, 1) << run.output;
    EXPECT_NE(run.output.find("-ngl 99: this moetier was built without the Vulkan backend"), std::string::npos)
        << run.output;
    return;
  }
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("device 0: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("subgroup "), std::string::npos) << r.output;
  const auto j = test::run_cli("devices --json", "2>/dev/null");
  ASSERT_EQ(j.exit_code, 0) << j.output;
  const nlohmann::json a = nlohmann::json::parse(j.output);
  ASSERT_TRUE(a.is_array() && !a.empty()) << j.output;
  EXPECT_EQ(a[0]["index"], 0);
  EXPECT_GT(a[0]["memory_bytes"].get<uint64_t>(), 0u);
  EXPECT_GT(a[0]["max_storage_buffer_range"].get<uint64_t>(), 0u);
  // The read kernel and the latency test, under the validation layer with synchronization validation.
  const std::string cmd = "MOETIER_VULKAN_VALIDATION=sync " + test::cli_path() + " devices --bandwidth --json";
  const auto log = test::run_shell(cmd + " 2>&1 >/dev/null");
  EXPECT_EQ(log.output.find("vulkan validation"), std::string::npos) << log.output;
  const auto bw = test::run_shell(cmd + " 2>/dev/null");
  ASSERT_EQ(bw.exit_code, 0) << bw.output;
  const nlohmann::json b = nlohmann::json::parse(bw.output);
  EXPECT_GT(b[0]["read_gbs"].get<double>(), 0.0) << bw.output;
  EXPECT_GT(b[0]["read_test_bytes"].get<uint64_t>(), 0u) << bw.output;
  // The round trip of an empty submission: positive and below a second (lavapipe's is tens of microseconds).
  EXPECT_GT(b[0]["submit_us"].get<double>(), 0.0) << bw.output;
  EXPECT_LT(b[0]["submit_us"].get<double>(), 1e6) << bw.output;
  const auto text = test::run_cli("devices --bandwidth", "2>/dev/null");
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(text.output.find(" us (an empty submission to the end of its wait, median of 200)"), std::string::npos)
      << text.output;
}

}  // namespace
}  // namespace moetier
