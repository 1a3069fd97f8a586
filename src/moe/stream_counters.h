// Telemetry of the streaming expert store, per step (prefill pass or decode token) and cumulative.
#pragma once

#include <cstdint>

namespace moetier::moe {

struct StreamCounters {
  uint64_t hits = 0;          // experts found in the cache
  uint64_t misses = 0;        // experts read from the file(s)
  uint64_t evictions = 0;     // cache entries dropped to make room
  uint64_t bytes_read = 0;    // bytes read from the file(s), whole page-aligned windows
  uint64_t reread_bytes = 0;  // expert bytes read again for an expert that had been read before
  double io_ms = 0.0;         // read time summed over lanes (each read's time in flight), milliseconds
  double stall_ms = 0.0;      // time the compute thread waited for reads, milliseconds
  double mgmt_ms = 0.0;       // cache bookkeeping (policy and slot assignment), milliseconds
  // Adaptive tier: background swap-ins (SwapPlan::load) whose read landed, and their bytes (whole page-aligned
  // windows; also counted in bytes_read). Swap-outs are counted in evictions.
  uint64_t swaps = 0;
  uint64_t swap_bytes = 0;
  // Next-layer prefetch (StreamingOptions::ahead_slots): the experts guessed for a layer's next fetch, how many of
  // them that fetch asked for, the guesses read ahead (those neither held nor already reading whose read started on
  // an idle lane, with a free ahead slot, before their fetch), how many of those a fetch took over, and the bytes
  // the reads ahead returned (whole page-aligned windows; also in bytes_read).
  uint64_t ahead_guesses = 0;
  uint64_t ahead_right = 0;
  uint64_t ahead_reads = 0;
  uint64_t ahead_used = 0;
  uint64_t ahead_bytes = 0;
  // Repacking in the slots (StreamingOptions::pack_rows16): experts rewritten into the rows16 layout (in prefill's
  // read waits, or finished for a hit on the one under way) and the time it took (milliseconds; also in mgmt_ms).
  uint64_t packed = 0;
  double pack_ms = 0.0;

  StreamCounters& operator+=(const StreamCounters& o) {
    hits += o.hits;
    misses += o.misses;
    evictions += o.evictions;
    bytes_read += o.bytes_read;
    reread_bytes += o.reread_bytes;
    io_ms += o.io_ms;
    stall_ms += o.stall_ms;
    mgmt_ms += o.mgmt_ms;
    swaps += o.swaps;
    swap_bytes += o.swap_bytes;
    ahead_guesses += o.ahead_guesses;
    ahead_right += o.ahead_right;
    ahead_reads += o.ahead_reads;
    ahead_used += o.ahead_used;
    ahead_bytes += o.ahead_bytes;
    packed += o.packed;
    pack_ms += o.pack_ms;
    return *this;
  }
  // The counts since `o` was taken, when *this is a later snapshot of the same counters (a step's delta).
  StreamCounters& operator-=(const StreamCounters& o) {
    hits -= o.hits;
    misses -= o.misses;
    evictions -= o.evictions;
    bytes_read -= o.bytes_read;
    reread_bytes -= o.reread_bytes;
    io_ms -= o.io_ms;
    stall_ms -= o.stall_ms;
    mgmt_ms -= o.mgmt_ms;
    swaps -= o.swaps;
    swap_bytes -= o.swap_bytes;
    ahead_guesses -= o.ahead_guesses;
    ahead_right -= o.ahead_right;
    ahead_reads -= o.ahead_reads;
    ahead_used -= o.ahead_used;
    ahead_bytes -= o.ahead_bytes;
    packed -= o.packed;
    pack_ms -= o.pack_ms;
    return *this;
  }
  friend StreamCounters operator-(StreamCounters a, const StreamCounters& b) { return a -= b; }
};

}  // namespace moetier::moe
