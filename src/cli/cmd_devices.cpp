// `moetier devices [--json] [--bandwidth]`: the Vulkan devices -ngl can run on, with what decides the choice
// (memory, subgroup size, integer dot products, fp16, a transfer queue) and, on request, each one's measured read
// bandwidth. Exit status 1, with what to install, when the binary has no
// Vulkan backend or the loader finds no driver.
#include <algorithm>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "gpu/gpu.h"

namespace moetier::cli {
namespace {

std::string api_string(uint32_t v) {
  // VK_API_VERSION_MAJOR/MINOR/PATCH: bits 22..28, 12..21, 0..11.
  return fmt::format("{}.{}.{}", (v >> 22) & 0x7fu, (v >> 12) & 0x3ffu, v & 0xfffu);
}

nlohmann::json to_json(const gpu::DeviceInfo& d) {
  return {{"index", d.index},
          {"name", d.name},
          {"type", d.type},
          {"driver", d.driver},
          {"api_version", api_string(d.api_version)},
          {"memory_bytes", d.memory_bytes},
          {"subgroup_size", d.subgroup_size},
          {"int_dot", d.int_dot},
          {"fp16", d.fp16},
          {"transfer_queue", d.transfer_queue},
          {"max_storage_buffer_range", d.max_storage_buffer_range},
          {"usable", d.usable}};
}

struct Measured {
  double read_gbs = 0;    // read bandwidth, GB/s
  uint64_t bytes = 0;     // over a buffer of this many bytes
  double submit_us = 0;   // an empty submission's round trip, median, microseconds
};
constexpr int kLatencyTrips = 200;

// Device d's read bandwidth over a buffer of min(1 GiB, a quarter of its memory, its storage buffer range), and
// the round trip of an empty submission (median of kLatencyTrips).
Measured measure(const gpu::DeviceInfo& d) {
  gpu::GpuOptions o;
  o.device = d.index;
  o.max_cols = o.max_rows = o.max_tok = 1;
  const auto backend = gpu::make_backend(o);
  Measured m;
  m.bytes = std::min({uint64_t{1} << 30, d.memory_bytes / 4, d.max_storage_buffer_range});
  m.read_gbs = backend->read_bandwidth(m.bytes);
  m.submit_us = backend->submit_latency_us(kLatencyTrips);
  return m;
}

}  // namespace

void register_devices(CLI::App& app) {
  auto* cmd = app.add_subcommand("devices", "list the Vulkan devices that -ngl / --device can use");
  struct Opts {
    bool json = false;
    bool bandwidth = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_flag("--json", o->json, "print a JSON array instead of text");
  cmd->add_flag("--bandwidth", o->bandwidth,
                "also measure each usable device's read bandwidth (a read kernel over up to 1 GiB, GB/s) and the "
                "round trip of an empty submission (us)");
  cmd->callback([o] {
    const std::vector<gpu::DeviceInfo> devices = gpu::list_devices();
    if (o->json) {
      nlohmann::json a = nlohmann::json::array();
      for (const auto& d : devices) {
        nlohmann::json j = to_json(d);
        if (o->bandwidth && d.usable) {
          const Measured m = measure(d);
          j["read_gbs"] = m.read_gbs;
          j["read_test_bytes"] = m.bytes;
          j["submit_us"] = m.submit_us;
        }
        a.push_back(j);
      }
      fmt::print("{}\n", a.dump(2));
      return;
    }
    if (devices.empty()) {
      fmt::print("no Vulkan device found (a driver is installed but reports none)\n");
      return;
    }
    for (const auto& d : devices) {
      fmt::print("device {}: {} ({}, Vulkan {}{})\n", d.index, d.name, d.type, api_string(d.api_version),
                 d.usable ? "" : ", unusable: moetier needs Vulkan 1.2");
      fmt::print("  driver {}\n", d.driver);
      fmt::print("  memory {:.0f} MiB, subgroup {}, integer dot {}, fp16 {}, transfer queue {}, storage buffer range "
                 "{:.0f} MiB\n",
                 static_cast<double>(d.memory_bytes) / (1024.0 * 1024.0), d.subgroup_size, d.int_dot ? "yes" : "no",
                 d.fp16 ? "yes" : "no", d.transfer_queue ? "yes" : "no",
                 static_cast<double>(d.max_storage_buffer_range) / (1024.0 * 1024.0));
      if (o->bandwidth && d.usable) {
        const Measured m = measure(d);
        fmt::print("  read bandwidth {:.1f} GB/s (a read kernel over {:.0f} MiB, 10 passes)\n", m.read_gbs,
                   static_cast<double>(m.bytes) / (1024.0 * 1024.0));
        fmt::print("  submission round trip {:.1f} us (an empty submission to the end of its wait, median of {})\n",
                   m.submit_us, kLatencyTrips);
      }
    }
  });
}

}  // namespace moetier::cli
