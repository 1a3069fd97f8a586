#include "moe/placement.h"

#include <algorithm>
#include <fstream>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "util/error.h"

namespace moetier::moe {

namespace {
double mib(uint64_t b) { return static_cast<double>(b) / (1024.0 * 1024.0); }
}  // namespace

std::string_view placement_name(Placement p) {
  switch (p) {
    case Placement::resident: return "resident";
    case Placement::stream: return "stream";
    case Placement::automatic: return "auto";
  }
  return "?";
}

Placement parse_placement(std::string_view s) {
  if (s == "resident") return Placement::resident;
  if (s == "stream") return Placement::stream;
  if (s == "auto") return Placement::automatic;
  fail("unknown placement '{}' (expected resident, stream or auto)", s);
}

namespace {

// First number in a file ("max" and unreadable files give nullopt).
std::optional<uint64_t> read_number(const std::string& path) {
  std::ifstream in(path);
  uint64_t v = 0;
  if (in >> v) return v;
  return std::nullopt;
}

// The value of `key` in a cgroup memory.stat file, bytes (0 when absent).
uint64_t stat_value(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string k;
  uint64_t v = 0;
  while (in >> k >> v)
    if (k == key) return v;
  return 0;
}

// The process's cgroup memory limit, when it has one. cgroup v2 ("0::PATH") and v1 ("N:...memory...:PATH").
std::optional<CgroupMemory> cgroup_memory() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    const auto a = line.find(':');
    const auto b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    const std::string path = line.substr(b + 1);
    std::string dir, limit_file, usage_file, inactive_key;
    if (controllers.empty() && line.rfind("0:", 0) == 0) {
      dir = "/sys/fs/cgroup" + path;
      limit_file = "memory.max";
      usage_file = "memory.current";
      inactive_key = "inactive_file";
    } else if (("," + controllers + ",").find(",memory,") != std::string::npos) {
      dir = "/sys/fs/cgroup/memory" + path;
      limit_file = "memory.limit_in_bytes";
      usage_file = "memory.usage_in_bytes";
      inactive_key = "total_inactive_file";
    } else {
      continue;
    }
    const auto limit = read_number(dir + "/" + limit_file);
    const auto usage = read_number(dir + "/" + usage_file);
    // v1 reports "no limit" as a huge number (PAGE_COUNTER_MAX pages); anything beyond 2^60 bytes is no limit.
    if (!limit || !usage || *limit >= (uint64_t{1} << 60)) continue;
    return CgroupMemory{dir + "/" + limit_file, *limit, *usage, stat_value(dir + "/memory.stat", inactive_key)};
  }
  return std::nullopt;
}

double gib(uint64_t b) { return static_cast<double>(b) / (1024.0 * 1024.0 * 1024.0); }

}  // namespace

uint64_t parse_mem_available(std::string_view meminfo, std::string_view source) {
  std::istringstream in{std::string(meminfo)};
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream ss(line.substr(13));
    uint64_t kib = 0;
    std::string unit;
    if (ss >> kib >> unit && unit == "kB" && kib < (uint64_t{1} << 50)) return kib * 1024;
    fail("{}: cannot parse '{}' (expected 'MemAvailable: N kB')", source, line);
  }
  fail("{} has no MemAvailable line", source);
}

uint64_t MemoryReading::available() const {
  return cgroup ? std::min(mem_available, cgroup->available()) : mem_available;
}

std::string MemoryReading::describe() const {
  const std::string host = fmt::format("MemAvailable {:.1f} GiB", gib(mem_available));
  if (!cgroup) return fmt::format("{}; no cgroup memory limit: {:.1f} GiB available", host, gib(available()));
  return fmt::format("{}; cgroup limit {:.1f} GiB ({}), usage {:.1f} GiB of which {:.1f} GiB reclaimable page cache: "
                     "{:.1f} GiB available",
                     host, gib(cgroup->limit), cgroup->limit_file, gib(cgroup->usage), gib(cgroup->reclaimable),
                     gib(available()));
}

MemoryReading read_memory() {
  std::ifstream in("/proc/meminfo");
  if (!in) fail("cannot read /proc/meminfo to find the available memory");
  std::stringstream text;
  text << in.rdbuf();
  return MemoryReading{parse_mem_available(text.str()), cgroup_memory()};
}

PlacementDecision decide_placement(Placement p, uint64_t model_bytes, uint64_t context_bytes, uint64_t mem_available,
                                   uint64_t headroom) {
  PlacementDecision d;
  if (p == Placement::resident) {
    d.reason = "placement resident (as asked): experts stay mapped";
    return d;
  }
  if (p == Placement::stream) {
    d.stream = true;
    d.reason = "placement stream (as asked): experts stream from disk";
    return d;
  }
  const uint64_t need = model_bytes + context_bytes + headroom;
  d.stream = need > mem_available;
  d.reason = fmt::format("placement auto: model {:.0f} MiB + context memory {:.0f} MiB + headroom {:.0f} MiB {} "
                         "available {:.0f} MiB, {}",
                         mib(model_bytes), mib(context_bytes), mib(headroom), d.stream ? ">" : "<=", mib(mem_available),
                         d.stream ? "experts stream from disk" : "experts stay mapped");
  return d;
}

AutoCache auto_cache(uint64_t mem_available, uint64_t dense_bytes, uint64_t context_bytes, uint64_t slot_bytes,
                     int64_t n_experts_total, uint64_t floor, uint64_t ceiling) {
  AutoCache a;
  const uint64_t reserved = floor + dense_bytes + context_bytes;
  uint64_t b = mem_available > reserved ? mem_available - reserved : 0;
  if (ceiling > 0) b = std::min(b, ceiling);
  if (slot_bytes > 0) {
    a.experts = std::min<int64_t>(static_cast<int64_t>(b / slot_bytes), std::max<int64_t>(n_experts_total, 0));
    a.bytes = static_cast<uint64_t>(a.experts) * slot_bytes;
  }
  a.percent = n_experts_total > 0 ? 100.0 * static_cast<double>(a.experts) / static_cast<double>(n_experts_total) : 0.0;
  a.report = fmt::format("{:.0f} MiB = {} experts = {:.1f}% of all experts", mib(a.bytes), a.experts,
                         a.percent);
  return a;
}

}  // namespace moetier::moe
