// Per-step metrics of a `run` or `chat`: the metrics CSV (`--csv`, format `moetier_metrics v1`), the live
// progress line (`--progress`), the route trace (`--route-trace`, route_trace v1) and the end-of-run summary.
//
// A RunRecorder is the generator's StepHooks: it wraps the hooks that drive the streaming store (`inner`, called
// first in begin() and last in end()) and records one row per step — a prefill (the whole prompt of a turn) is one
// row, every decode token one row. Rows are kept in memory (reserved for n_ctx steps at setup, so recording a token
// allocates nothing) for the summary and written to the CSV as they come (one buffered line per token).
//
// Metrics CSV layout (v1):
//   # moetier_metrics v1
//   # engine moetier X.Y.Z
//   # model file=NAME arch=A n_layer=L n_expert=E n_expert_used=K
//   # config KEY=VALUE                      (one line per resolved setting; `report --compare` diffs them)
//   # note ...                              (how rows are made, units, which values are not measured)
//   step,steps,phase,wall_ms,...            (the CSV header: kColumns)
//   one row per step
//   # summary KEY=VALUE KEY=VALUE ...       (run totals; see RunSummary; interrupted=SIGINT after a Ctrl-C)
// Readers find columns by their header name (metrics_report.h): columns are only ever added, at the end, and a
// file from before a column existed reads it as -1 (swaps, swap_bytes came later than the other columns; packed,
// pack_ms last).
// Not thread-safe: the generator's thread calls everything.
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <string_view>
#include <vector>

#include "model/generator.h"
#include "moe/streaming_experts.h"
#include "moe/vram_tier.h"
#include "trace/route_trace.h"

namespace moetier::telemetry {

// The CSV header, in column order.
inline constexpr const char* kColumns =
    "step,steps,phase,wall_ms,compute_ms,io_ms,read_bytes,cache_hit_pct,stall_ms,mgmt_ms,majflt,cpu_ms,rss_mib,"
    "cache_resident_mib,hits,misses,evictions,reread_bytes,swaps,swap_bytes,vram_hits,vram_fills,vram_cpu,"
    "vram_swaps,vram_copy_bytes,vram_cpu_ms,vram_copy_ms,vram_pcie,vram_pcie_bytes,ahead_guesses,ahead_right,"
    "ahead_reads,ahead_used,ahead_bytes,packed,pack_ms";

struct StepRow {
  int64_t step = 0;        // 0-based row number
  int64_t steps = 0;       // tokens run in this step: the prompt's for a prefill, 1 for a decode token
  bool prefill = false;
  double wall_ms = 0;      // the forward pass(es) of this step, wall clock (sampling and printing excluded)
  double compute_ms = 0;   // CPU time of the thread running the forward pass (CLOCK_THREAD_CPUTIME_ID)
  double io_ms = 0;        // expert read time summed over the read lanes
  uint64_t read_bytes = 0; // bytes read by the expert store (page-aligned windows)
  double hit_pct = -1;     // running hit rate since the start, %; -1: no expert cache (resident, or cache 0)
  double stall_ms = 0;     // compute thread waiting for expert reads
  double mgmt_ms = 0;      // expert cache bookkeeping
  int64_t majflt = -1;     // major page faults of the process (getrusage); -1: not measured
  double cpu_ms = -1;      // process CPU time over all threads (CLOCK_PROCESS_CPUTIME_ID); -1: not measured
  double rss_mib = -1;     // resident set after the step (/proc/self/statm); -1: not measured
  double cache_resident_mib = -1;  // expert bytes held by the cache; -1: no cache
  uint64_t hits = 0, misses = 0, evictions = 0, reread_bytes = 0;  // expert cache counters of this step
  // Adaptive tier: background swap-ins whose read landed in this step, and the bytes the swap reads returned in
  // it (part of read_bytes). -1: no adaptive tier (resident experts, no cache, or a policy that never swaps).
  int64_t swaps = -1;
  int64_t swap_bytes = -1;
  // The VRAM expert tier (moe/vram_tier.h), this step's: lookups of experts in a slot (hits), misses copied into
  // a slot and computed there (fills), misses computed by the CPU pool from RAM (cpu), swap-ins landed, bytes
  // copied into slots (fills and swaps), the CPU pool's wall time on its experts and the fills' and swaps' copy
  // time, and the PCIe share: misses copied into a staging slot for the layer (pcie) and their bytes.
  // -1 without a tier.
  int64_t vram_hits = -1, vram_fills = -1, vram_cpu = -1, vram_swaps = -1, vram_copy_bytes = -1;
  double vram_cpu_ms = -1, vram_copy_ms = -1;
  int64_t vram_pcie = -1, vram_pcie_bytes = -1;
  // The next-layer prefetch's counters of the step (moe::StreamCounters' ahead_*): experts guessed, of them asked
  // for by the fetch they were guessed for, read ahead, of those taken over by a fetch, and the bytes read ahead
  // (part of read_bytes). -1 when the expert store does not read ahead.
  int64_t ahead_guesses = -1, ahead_right = -1, ahead_reads = -1, ahead_used = -1, ahead_bytes = -1;
  // Experts repacked in their cache slots in the step (moe::StreamCounters' packed, pack_ms; part of mgmt_ms). -1
  // when the expert store does not repack.
  int64_t packed = -1;
  double pack_ms = -1;
};

// What the summary and the report say about a run. Computed from rows; the CSV's `# summary` line holds these.
struct RunSummary {
  int64_t steps = 0;
  int64_t prefill_tokens = 0;
  double prefill_ms = 0;
  int64_t decode_tokens = 0;
  double decode_ms = 0;
  // Steady window: the decode tokens after the warm-up. steady_skip < 0: never reached (no steady window).
  int64_t steady_skip = -1;
  std::string steady_rule;  // "flag" (--steady-skip), "auto" (hit rate within 1 point for 8 tokens), "none"
  int64_t steady_tokens = 0;
  double steady_ms = 0;
  uint64_t hits = 0, misses = 0, evictions = 0, read_bytes = 0, reread_bytes = 0;
  double hit_pct = -1;  // final running hit rate, or -1 without a cache
  // The warm-up's decode hit rates (%): over the first 8, 16 and 32 decode tokens, and over the steady window; -1
  // without a cache, without that many decode tokens or without a steady window. A warm start shows here.
  std::array<double, 3> first_hit_pct = {-1, -1, -1};
  static constexpr std::array<int64_t, 3> kFirstWindows = {8, 16, 32};
  double steady_hit_pct = -1;
  double decode_read_bytes = 0;
  double io_ms = 0, stall_ms = 0, mgmt_ms = 0, compute_ms = 0, wall_ms = 0;
  double cpu_ms = -1;
  int64_t majflt = -1;
  double peak_rss_mib = -1;  // VmHWM of /proc/self/status; -1: not measured
  int64_t swaps = -1, swap_bytes = -1;  // adaptive tier's landed swap-ins and their bytes; -1: no adaptive tier
  // The VRAM tier's totals (StepRow's vram_*), -1 without one; vram_cpu_per_layer: the decode's misses computed by
  // the CPU per MoE layer and round (a round is a decode token), and vram_hit_pct its hit rate over the run.
  int64_t vram_hits = -1, vram_fills = -1, vram_cpu = -1, vram_swaps = -1, vram_copy_bytes = -1;
  double vram_cpu_ms = -1, vram_copy_ms = -1, vram_hit_pct = -1, vram_cpu_per_layer = -1;
  int64_t vram_pcie = -1, vram_pcie_bytes = -1;
  double vram_pcie_per_layer = -1;  // the decode's PCIe-share misses per MoE layer and round
  // The next-layer prefetch's totals (StepRow's ahead_*), -1 when the store does not read ahead.
  int64_t ahead_guesses = -1, ahead_right = -1, ahead_reads = -1, ahead_used = -1, ahead_bytes = -1;
  int64_t packed = -1;  // StepRow's packed, pack_ms totals; -1 when the store does not repack
  double pack_ms = -1;
  // "no" for a run that ended as asked; else the signal that stopped it early ("SIGINT": Ctrl-C, "SIGTERM").
  std::string interrupted = "no";
};

// Warm-up length over decode rows: `flag_skip` >= 0 when given; otherwise the first decode token from which the
// running hit rate stays within 1 point for 8 tokens (rule "auto"); -1 with rule "none" when it never does.
std::pair<int64_t, std::string> steady_skip(std::span<const StepRow> rows, int64_t flag_skip);
// n_moe_layers: for the VRAM tier's misses per layer (0: not computed).
RunSummary summarize(std::span<const StepRow> rows, int64_t flag_skip, double peak_rss_mib, int64_t n_moe_layers = 0);
// What bounds the run's steps, from their measured times: "compute" (the compute thread's CPU time), "io" (the
// compute thread waiting for expert reads) or "management" (the expert cache's bookkeeping), whichever took the
// most; "none" without steps. A run can only get faster by cutting the time of its bound.
std::string_view step_bound(const RunSummary& s);
// The `# summary` line's key=value text (no leading "# summary ").
std::string summary_fields(const RunSummary& s);
// The human summary printed after a run (several lines, each ending in '\n').
std::string format_summary(const RunSummary& s, int lanes);

// VmHWM of /proc/self/status in MiB, -1 when unreadable.
double peak_rss_mib();

struct ModelDesc {
  std::string file;  // the model's file name
  std::string arch;
  int64_t n_layer = 0;
  int64_t n_moe_layers = 0;
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;  // effective (after --n-expert-used)
};

struct RecorderOptions {
  std::string csv_path;         // empty: no CSV
  std::string progress;         // "", "text" or "json" (hit rate -1 = no cache)
  std::string route_trace_path;  // empty: no route trace
  int64_t max_steps = 0;        // rows to reserve (n_ctx: at most one step per position)
  int64_t steady_skip = -1;     // --steady-skip, -1 = auto
  int lanes = 0;                // read lanes, for the summary's per-lane bandwidth
};

class RunRecorder final : public model::StepHooks {
 public:
  // Opens the CSV (writing its preamble) and the route trace. `config` is the resolved configuration, in order.
  // `stream` is null when experts are resident. `trace_header` is used when a route trace is asked for.
  // Throws moetier::Error naming --csv / --route-trace and the path when a file cannot be written.
  // `tier` is the VRAM expert tier, or null.
  RunRecorder(const RecorderOptions& opts, model::StepHooks* inner, const moe::StreamingExperts* stream,
              const ModelDesc& model, std::span<const std::pair<std::string, std::string>> config,
              const trace::TraceHeader& trace_header, const moe::VramTier* tier = nullptr);
  ~RunRecorder() override;
  RunRecorder(const RunRecorder&) = delete;
  RunRecorder& operator=(const RunRecorder&) = delete;

  void begin(bool prefill) override;
  void end(bool prefill, int64_t n_tokens, double seconds) override;
  void routed(int64_t pos, int64_t n, std::span<const int32_t> routing) override;

  // Marks the run as stopped early by `signal` ("SIGINT", "SIGTERM"): the summary says so (before finish()).
  void set_interrupted(std::string signal) { interrupted_ = std::move(signal); }
  // Ends the run: computes the summary, appends the `# summary` line and closes the files (throws naming the
  // file when a write failed). Call once.
  RunSummary finish();
  std::span<const StepRow> rows() const { return rows_; }

 private:
  RecorderOptions opts_;
  model::StepHooks* inner_;
  const moe::StreamingExperts* stream_;
  ModelDesc model_;
  std::vector<StepRow> rows_;  // reserved for opts_.max_steps
  std::FILE* csv_ = nullptr;
  std::unique_ptr<trace::RouteTraceWriter> trace_;
  std::vector<uint64_t> layer_expert_bytes_;  // [n_moe_layers]
  // Step state.
  bool prefill_ = false;
  int32_t turn_ = -1;          // prefills seen - 1
  double thread_cpu0_ = 0, proc_cpu0_ = 0;
  int64_t majflt0_ = 0;
  moe::StreamCounters totals0_;
  const moe::VramTier* tier_ = nullptr;
  moe::SlotTierCounters tier0_;   // the tier's counters when the step began
  moe::VramTierStats tier_stats0_;
  uint64_t run_hits_ = 0, run_lookups_ = 0;
  // Residency for the route trace comes from the expert store (StreamingExperts::hit_at_last_fetch). The pass
  // (routed() call: a prefill chunk or a decode token) that last saw each (layer, expert), so that repeats
  // within one pass are written with their expert's residency and 0 bytes read. [n_moe_layers * n_expert]
  int64_t routed_calls_ = 0;
  std::vector<int64_t> seen_in_pass_;
  std::string interrupted_ = "no";  // RunSummary::interrupted
  int progress_ = 0;   // 0 off, 1 text, 2 json lines
  int statm_fd_ = -1;  // /proc/self/statm, opened once
};

}  // namespace moetier::telemetry
