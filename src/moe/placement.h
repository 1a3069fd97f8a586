// Whether routed experts stay resident (mapped) or stream from disk, and how much RAM the expert cache gets.
// Pure functions of sizes (bytes) plus a reader of /proc/meminfo, so the decisions are testable and the CLI can
// print the reason in its start log.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace moetier::moe {

enum class Placement { resident, stream, automatic };  // automatic: the flag value "auto" (a keyword in C++)
std::string_view placement_name(Placement p);  // "resident", "stream", "auto"
// "resident" / "stream" / "auto"; throws moetier::Error naming the value and the choices otherwise.
Placement parse_placement(std::string_view s);

// The memory limit of the process's cgroup (v1 or v2), bytes: a container, a `systemd-run -p MemoryMax=` scope
// or an Android app's cgroup sees the host's MemAvailable but is killed (or reclaimed) at its own limit.
struct CgroupMemory {
  std::string limit_file;    // the file read, e.g. /sys/fs/cgroup/user.slice/memory.max
  uint64_t limit = 0;        // memory.max (v2) or memory.limit_in_bytes (v1)
  uint64_t usage = 0;        // memory.current / memory.usage_in_bytes
  uint64_t reclaimable = 0;  // inactive page cache (memory.stat inactive_file / total_inactive_file)
  uint64_t available() const { return (limit > usage ? limit - usage : 0) + reclaimable; }
};

// What the memory decisions read, and what they take as available (bytes).
struct MemoryReading {
  uint64_t mem_available = 0;          // MemAvailable of /proc/meminfo
  std::optional<CgroupMemory> cgroup;  // absent: no cgroup memory limit
  // min(MemAvailable, the cgroup's limit - usage + reclaimable page cache).
  uint64_t available() const;
  // For the start log: "MemAvailable 21.3 GiB; cgroup limit 8.0 GiB (/sys/fs/cgroup/x/memory.max), usage 1.2 GiB
  // of which 0.9 GiB reclaimable page cache: 7.7 GiB available", or "...; no cgroup memory limit: ...".
  std::string describe() const;
};

// The MemAvailable line of a /proc/meminfo text, bytes. Throws moetier::Error naming `source` when it is missing
// or malformed.
uint64_t parse_mem_available(std::string_view meminfo, std::string_view source = "/proc/meminfo");

// Reads /proc/meminfo and the process's cgroup files. Throws moetier::Error when /proc/meminfo cannot be read.
MemoryReading read_memory();

struct PlacementDecision {
  bool stream = false;
  std::string reason;  // one sentence for the start log, with the sizes in MiB
};

inline constexpr uint64_t kDefaultHeadroom = uint64_t{2048} << 20;  // bytes kept free by `auto`

// resident and stream are taken as asked; auto streams when model_bytes + context_bytes (the KV cache and the
// attention's score rows) + headroom exceed mem_available (all bytes).
PlacementDecision decide_placement(Placement p, uint64_t model_bytes, uint64_t context_bytes, uint64_t mem_available,
                                   uint64_t headroom = kDefaultHeadroom);

inline constexpr uint64_t kDefaultCacheFloor = uint64_t{1536} << 20;  // bytes left to the system by cache auto

struct AutoCache {
  uint64_t bytes = 0;    // cache budget, a whole number of slots
  int64_t experts = 0;   // slots it holds
  double percent = 0.0;  // of all experts of the model
  std::string report;    // "X MiB = N experts = P% of all experts" (the start log's "cache auto: ..." line)
};

// The expert cache budget for cache_mb = auto: mem_available - floor - dense_bytes - context_bytes, capped by
// `ceiling` (0 = no cap) and by the bytes of all experts, floored at 0, and rounded down to whole slots of
// slot_bytes. n_experts_total is the model's (layer, expert) count.
AutoCache auto_cache(uint64_t mem_available, uint64_t dense_bytes, uint64_t context_bytes, uint64_t slot_bytes,
                     int64_t n_experts_total, uint64_t floor = kDefaultCacheFloor, uint64_t ceiling = 0);

}  // namespace moetier::moe
