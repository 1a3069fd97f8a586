// The GPU backend of a build without Vulkan (libvulkan-dev or glslc missing at configure time): every entry point
// says so, so `moetier devices` and `-ngl` fail with a message instead of silently running on the CPU.
#include "gpu/gpu.h"
#include "util/error.h"

namespace moetier::gpu {

namespace {
[[noreturn]] void absent() {
  fail("this moetier was built without the Vulkan backend: install libvulkan-dev and glslc (Debian: apt install "
       "libvulkan-dev glslc), then reconfigure and rebuild");
}
}  // namespace

bool built_with_vulkan() { return false; }
std::vector<DeviceInfo> list_devices() { absent(); }
uint64_t validation_errors_in_process() { return 0; }
bool has_kernel(quant::GgmlType) { return false; }
std::unique_ptr<GpuBackend> make_backend(const GpuOptions&) { absent(); }

}  // namespace moetier::gpu
