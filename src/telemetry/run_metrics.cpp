#include "telemetry/run_metrics.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <ctime>
#include <fstream>

#include <fmt/format.h>

#include "util/error.h"

namespace moetier::telemetry {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;
constexpr int64_t kSteadyWindow = 8;     // tokens the hit rate must stay put for
constexpr double kSteadyTolerance = 1.0;  // percentage points

double clock_ms(clockid_t id) {
  timespec ts{};
  if (clock_gettime(id, &ts) != 0) return -1.0;
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

int64_t major_faults() {
  rusage ru{};
  if (getrusage(RUSAGE_SELF, &ru) != 0) return -1;
  return static_cast<int64_t>(ru.ru_majflt);
}

// Resident set from /proc/self/statm (second field, pages), reread through one fd into a stack buffer.
double rss_mib(int fd) {
  if (fd < 0) return -1.0;
  char buf[128];
  const ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
  if (n <= 0) return -1.0;
  buf[n] = '\0';
  char* p = buf;
  std::strtoull(p, &p, 10);                 // size
  const auto pages = std::strtoull(p, nullptr, 10);  // resident
  return static_cast<double>(pages) * static_cast<double>(sysconf(_SC_PAGESIZE)) / kMiB;
}

double pct(uint64_t a, uint64_t b) { return b > 0 ? 100.0 * static_cast<double>(a) / static_cast<double>(b) : -1.0; }
double per_s(double n, double ms) { return ms > 0 ? n * 1e3 / ms : 0.0; }

}  // namespace

double peak_rss_mib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return static_cast<double>(std::strtoull(line.c_str() + 6, nullptr, 10)) / 1024.0;
  return -1.0;
}

std::pair<int64_t, std::string> steady_skip(std::span<const StepRow> rows, int64_t flag_skip) {
  std::vector<double> h;
  for (const auto& r : rows)
    if (!r.prefill) h.push_back(r.hit_pct);
  const auto n = static_cast<int64_t>(h.size());
  if (flag_skip >= 0) return {std::min(flag_skip, n), "flag"};
  for (int64_t i = 0; i + kSteadyWindow <= n; ++i) {
    bool steady = true;
    for (int64_t j = i; j < i + kSteadyWindow && steady; ++j)
      steady = std::abs(h[static_cast<size_t>(j)] - h[static_cast<size_t>(i)]) <= kSteadyTolerance;
    if (steady) return {i, "auto"};
  }
  return {-1, "none"};
}

RunSummary summarize(std::span<const StepRow> rows, int64_t flag_skip, double peak_rss, int64_t n_moe_layers) {
  RunSummary s;
  s.steps = static_cast<int64_t>(rows.size());
  std::tie(s.steady_skip, s.steady_rule) = steady_skip(rows, flag_skip);
  int64_t decode_i = 0;
  uint64_t window_hits = 0, window_misses = 0, steady_hits = 0, steady_misses = 0;
  bool cpu_ok = true, flt_ok = true, swaps_ok = !rows.empty();
  double cpu = 0;
  int64_t flt = 0, swaps = 0, swap_bytes = 0;
  const bool tier = !rows.empty() && rows.front().vram_hits >= 0;
  const bool ahead = !rows.empty() && rows.front().ahead_guesses >= 0;
  if (ahead) s.ahead_guesses = s.ahead_right = s.ahead_reads = s.ahead_used = s.ahead_bytes = 0;
  const bool packs = !rows.empty() && rows.front().packed >= 0;
  if (packs) {
    s.packed = 0;
    s.pack_ms = 0;
  }
  int64_t decode_cpu = 0, decode_pcie = 0;
  if (tier) {
    s.vram_hits = s.vram_fills = s.vram_cpu = s.vram_swaps = s.vram_copy_bytes = s.vram_pcie = s.vram_pcie_bytes = 0;
    s.vram_cpu_ms = s.vram_copy_ms = 0;
  }
  for (const auto& r : rows) {
    if (ahead) {
      s.ahead_guesses += r.ahead_guesses;
      s.ahead_right += r.ahead_right;
      s.ahead_reads += r.ahead_reads;
      s.ahead_used += r.ahead_used;
      s.ahead_bytes += r.ahead_bytes;
    }
    if (packs) {
      s.packed += r.packed;
      s.pack_ms += r.pack_ms;
    }
    if (tier) {
      s.vram_hits += r.vram_hits;
      s.vram_fills += r.vram_fills;
      s.vram_cpu += r.vram_cpu;
      s.vram_swaps += r.vram_swaps;
      s.vram_copy_bytes += r.vram_copy_bytes;
      s.vram_cpu_ms += r.vram_cpu_ms;
      s.vram_copy_ms += r.vram_copy_ms;
      s.vram_pcie += r.vram_pcie;
      s.vram_pcie_bytes += r.vram_pcie_bytes;
      if (!r.prefill) {
        decode_cpu += r.vram_cpu;
        decode_pcie += r.vram_pcie;
      }
    }
    if (r.prefill) {
      s.prefill_tokens += r.steps;
      s.prefill_ms += r.wall_ms;
    } else {
      s.decode_tokens += r.steps;
      s.decode_ms += r.wall_ms;
      s.decode_read_bytes += static_cast<double>(r.read_bytes);
      if (s.steady_skip >= 0 && decode_i >= s.steady_skip) {
        s.steady_tokens += r.steps;
        s.steady_ms += r.wall_ms;
        steady_hits += r.hits;
        steady_misses += r.misses;
      }
      window_hits += r.hits;
      window_misses += r.misses;
      ++decode_i;
      for (size_t w = 0; w < RunSummary::kFirstWindows.size(); ++w) {
        if (decode_i == RunSummary::kFirstWindows[w] && r.hit_pct >= 0 && window_hits + window_misses > 0)
          s.first_hit_pct[w] = 100.0 * static_cast<double>(window_hits) / static_cast<double>(window_hits + window_misses);
      }
    }
    s.hits += r.hits;
    s.misses += r.misses;
    s.evictions += r.evictions;
    s.read_bytes += r.read_bytes;
    s.reread_bytes += r.reread_bytes;
    s.io_ms += r.io_ms;
    s.stall_ms += r.stall_ms;
    s.mgmt_ms += r.mgmt_ms;
    s.compute_ms += r.compute_ms;
    s.wall_ms += r.wall_ms;
    if (r.cpu_ms < 0) cpu_ok = false; else cpu += r.cpu_ms;
    if (r.majflt < 0) flt_ok = false; else flt += r.majflt;
    if (r.swaps < 0 || r.swap_bytes < 0) swaps_ok = false; else swaps += r.swaps, swap_bytes += r.swap_bytes;
  }
  s.hit_pct = rows.empty() ? -1.0 : rows.back().hit_pct;
  if (s.hit_pct >= 0 && steady_hits + steady_misses > 0)
    s.steady_hit_pct = 100.0 * static_cast<double>(steady_hits) / static_cast<double>(steady_hits + steady_misses);
  s.cpu_ms = cpu_ok ? cpu : -1.0;
  s.majflt = flt_ok ? flt : -1;
  s.peak_rss_mib = peak_rss;
  s.swaps = swaps_ok ? swaps : -1;
  s.swap_bytes = swaps_ok ? swap_bytes : -1;
  if (tier) {
    const int64_t lookups = s.vram_hits + s.vram_fills + s.vram_cpu + s.vram_pcie;
    s.vram_hit_pct = lookups > 0 ? 100.0 * static_cast<double>(s.vram_hits) / static_cast<double>(lookups) : -1.0;
    if (n_moe_layers > 0 && s.decode_tokens > 0) {
      const auto rounds = static_cast<double>(s.decode_tokens * n_moe_layers);
      s.vram_cpu_per_layer = static_cast<double>(decode_cpu) / rounds;
      s.vram_pcie_per_layer = static_cast<double>(decode_pcie) / rounds;
    }
  }
  return s;
}

std::string_view step_bound(const RunSummary& s) {
  if (s.steps == 0) return "none";
  if (s.compute_ms >= s.stall_ms && s.compute_ms >= s.mgmt_ms) return "compute";
  return s.stall_ms >= s.mgmt_ms ? "io" : "management";
}

std::string summary_fields(const RunSummary& s) {
  return fmt::format(
      "steps={} prefill_tokens={} prefill_ms={:.3f} decode_tokens={} decode_ms={:.3f} steady_skip={} "
      "steady_rule={} steady_tokens={} steady_ms={:.3f} hits={} misses={} hit_pct={:.4f} evictions={} "
      "read_bytes={} reread_bytes={} io_ms={:.3f} stall_ms={:.3f} mgmt_ms={:.3f} compute_ms={:.3f} wall_ms={:.3f} "
      "cpu_ms={:.3f} majflt={} peak_rss_mib={:.1f} swaps={} swap_bytes={} interrupted={} bound={} "
      "first8_hit_pct={:.4f} first16_hit_pct={:.4f} first32_hit_pct={:.4f} steady_hit_pct={:.4f} vram_hits={} "
      "vram_fills={} vram_cpu={} vram_swaps={} vram_copy_bytes={} vram_cpu_ms={:.3f} vram_copy_ms={:.3f} "
      "vram_hit_pct={:.4f} vram_cpu_per_layer={:.4f} vram_pcie={} vram_pcie_bytes={} vram_pcie_per_layer={:.4f} "
      "ahead_guesses={} ahead_right={} ahead_reads={} ahead_used={} ahead_bytes={} packed={} pack_ms={:.3f}",
      s.steps, s.prefill_tokens, s.prefill_ms, s.decode_tokens, s.decode_ms, s.steady_skip, s.steady_rule,
      s.steady_tokens, s.steady_ms, s.hits, s.misses, s.hit_pct, s.evictions, s.read_bytes, s.reread_bytes, s.io_ms,
      s.stall_ms, s.mgmt_ms, s.compute_ms, s.wall_ms, s.cpu_ms, s.majflt, s.peak_rss_mib, s.swaps, s.swap_bytes,
      s.interrupted, step_bound(s), s.first_hit_pct[0], s.first_hit_pct[1], s.first_hit_pct[2], s.steady_hit_pct,
      s.vram_hits, s.vram_fills, s.vram_cpu, s.vram_swaps, s.vram_copy_bytes, s.vram_cpu_ms, s.vram_copy_ms,
      s.vram_hit_pct, s.vram_cpu_per_layer, s.vram_pcie, s.vram_pcie_bytes, s.vram_pcie_per_layer, s.ahead_guesses,
      s.ahead_right, s.ahead_reads, s.ahead_used, s.ahead_bytes, s.packed, s.pack_ms);
}

std::string format_summary(const RunSummary& s, int lanes) {
  std::string o;
  if (s.interrupted != "no")
    o += fmt::format("interrupted by {}{}: the figures cover the tokens run before it\n", s.interrupted,
                     s.interrupted == "SIGINT" ? " (Ctrl-C)" : "");
  o += fmt::format("prefill: {} tokens in {:.2f} s ({:.1f} tok/s) | decode: {} tokens in {:.2f} s ({:.1f} tok/s)\n",
                   s.prefill_tokens, s.prefill_ms / 1e3, per_s(static_cast<double>(s.prefill_tokens), s.prefill_ms),
                   s.decode_tokens, s.decode_ms / 1e3, per_s(static_cast<double>(s.decode_tokens), s.decode_ms));
  if (s.steady_skip >= 0)
    o += fmt::format("steady decode: {:.1f} tok/s over {} tokens, after a warm-up of {} ({})\n",
                     per_s(static_cast<double>(s.steady_tokens), s.steady_ms), s.steady_tokens, s.steady_skip,
                     s.steady_rule == "flag" ? "--steady-skip"
                                             : "the running hit rate stays within 1 point for 8 tokens from there");
  else if (s.decode_tokens > 0)
    o += "steady decode: not reached (the running hit rate never stayed within 1 point for 8 tokens; "
         "--steady-skip N sets the warm-up)\n";
  // With the VRAM tier the running hit rate is the tier's (its own line below); its experts are resident.
  if ((s.hit_pct >= 0 && s.vram_hits < 0) || s.read_bytes > 0) {
    const double read_mib = static_cast<double>(s.read_bytes) / kMiB;
    const double per_tok = s.decode_tokens > 0 ? s.decode_read_bytes / kMiB / static_cast<double>(s.decode_tokens) : 0;
    o += fmt::format("experts: hit rate {} ({} hits, {} misses), {:.1f} MiB read, {:.2f} MiB per decode token, "
                     "{:.1f} MiB/s over the run's steps{}; {} evictions, {:.1f} MiB re-read\n",
                     s.hit_pct >= 0 ? fmt::format("{:.1f}%", s.hit_pct) : std::string("n/a (no cache)"), s.hits,
                     s.misses, read_mib, per_tok, per_s(read_mib, s.wall_ms),
                     s.io_ms > 0 ? fmt::format(" ({:.1f} MiB/s per lane in flight, {} lanes)", per_s(read_mib, s.io_ms),
                                               lanes)
                                 : std::string(),
                     s.evictions, static_cast<double>(s.reread_bytes) / kMiB);
    // The warm-up as the cache saw it (what a warm start changes): the decode hit rate of each window the run
    // reached, then of the steady window.
    std::string windows;
    for (size_t w = 0; w < s.first_hit_pct.size(); ++w) {
      if (s.first_hit_pct[w] >= 0)
        windows += fmt::format("{}first {}: {:.1f}%", windows.empty() ? "" : ", ", RunSummary::kFirstWindows[w],
                               s.first_hit_pct[w]);
    }
    if (s.steady_hit_pct >= 0)
      windows += fmt::format("{}steady: {:.1f}%", windows.empty() ? "" : ", ", s.steady_hit_pct);
    if (!windows.empty()) o += fmt::format("decode hit rate: {}\n", windows);
    if (s.ahead_guesses > 0) {
      o += fmt::format("expert prefetch: {} experts guessed, {:.1f}% of them asked for; {} read ahead (the rest were "
                       "held, reading already, or found no free ahead slot or idle lane before their fetch), {} of "
                       "those used ({:.1f}%), {:.1f} MiB read ahead (part of the MiB read)\n",
                       s.ahead_guesses,
                       pct(static_cast<uint64_t>(s.ahead_right), static_cast<uint64_t>(s.ahead_guesses)),
                       s.ahead_reads, s.ahead_used,
                       pct(static_cast<uint64_t>(s.ahead_used), static_cast<uint64_t>(s.ahead_reads)),
                       static_cast<double>(s.ahead_bytes) / kMiB);
    }
    if (s.swaps >= 0)
      o += fmt::format("adaptive tier: {} background swap-ins landed, {:.1f} MiB read by them (part of the MiB read)\n",
                       s.swaps, static_cast<double>(s.swap_bytes) / kMiB);
    if (s.packed >= 0)
      o += fmt::format("repacked in the cache slots: {} experts hit again, in {:.0f} ms (in prefill's read waits; "
                       "part of cache management)\n",
                       s.packed, s.pack_ms);
  } else if (s.vram_hits < 0) {
    o += "experts: resident (no reads, no cache)\n";
  }
  if (s.vram_hits >= 0) {
    o += fmt::format("vram tier: hit rate {:.1f}% ({} hits; misses: {} copied into a free slot, {} computed by the "
                     "CPU in {:.0f} ms, {} crossed PCIe for their layer ({:.1f} MiB)){}; {} swap-ins landed, {:.1f} "
                     "MiB copied into slots in {:.0f} ms\n",
                     s.vram_hit_pct, s.vram_hits, s.vram_fills, s.vram_cpu, s.vram_cpu_ms, s.vram_pcie,
                     static_cast<double>(s.vram_pcie_bytes) / kMiB,
                     s.vram_cpu_per_layer >= 0
                         ? fmt::format("; per layer and decode round {:.2f} misses on the CPU, {:.2f} over PCIe",
                                       s.vram_cpu_per_layer, s.vram_pcie_per_layer)
                         : std::string(),
                     s.vram_swaps, static_cast<double>(s.vram_copy_bytes) / kMiB, s.vram_copy_ms);
  }
  auto share = [&](double ms) { return s.wall_ms > 0 ? 100.0 * ms / s.wall_ms : 0.0; };
  o += fmt::format("time: {:.0f} ms in steps: compute {:.0f} ms ({:.0f}%, the compute thread's CPU time), I/O stall "
                   "{:.0f} ms ({:.0f}%), cache management {:.0f} ms ({:.0f}%); process CPU {:.0f} ms; bound: {}\n",
                   s.wall_ms, s.compute_ms, share(s.compute_ms), s.stall_ms, share(s.stall_ms), s.mgmt_ms,
                   share(s.mgmt_ms), s.cpu_ms, step_bound(s));
  if (s.peak_rss_mib >= 0) o += fmt::format("peak RSS: {:.1f} MiB\n", s.peak_rss_mib);
  return o;
}

RunRecorder::RunRecorder(const RecorderOptions& opts, model::StepHooks* inner, const moe::StreamingExperts* stream,
                         const ModelDesc& model, std::span<const std::pair<std::string, std::string>> config,
                         const trace::TraceHeader& trace_header, const moe::VramTier* tier)
    : opts_(opts), inner_(inner), stream_(stream), model_(model), tier_(tier) {
  rows_.reserve(static_cast<size_t>(std::max<int64_t>(opts.max_steps, 1)));
  if (opts.progress == "text")
    progress_ = 1;
  else if (opts.progress == "json")
    progress_ = 2;
  else if (!opts.progress.empty())
    fail("--progress '{}' is not text or json", opts.progress);
  statm_fd_ = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (!opts.csv_path.empty()) {
    csv_ = std::fopen(opts.csv_path.c_str(), "w");
    if (csv_ == nullptr) fail("--csv {}: cannot write it: {}", opts.csv_path, std::strerror(errno));
    std::string pre = "# moetier_metrics v1\n# engine moetier " MOETIER_VERSION "\n";
    pre += fmt::format("# model file={} arch={} n_layer={} n_moe_layers={} n_expert={} n_expert_used={}\n", model.file,
                       model.arch, model.n_layer, model.n_moe_layers, model.n_expert, model.n_expert_used);
    for (const auto& [k, v] : config) pre += fmt::format("# config {}={}\n", k, v);
    pre +=
        "# note one row per step: a prefill (a turn's whole prompt, steps = its tokens) is one row with "
        "phase=prefill; each decode token is one row with phase=decode, steps=1\n"
        "# note units: *_ms milliseconds, *_bytes bytes, *_mib MiB (2^20 bytes), *_pct percent; wall_ms covers the "
        "forward pass only (sampling and printing excluded); compute_ms is the CPU time of the thread "
        "calling the forward pass (CLOCK_THREAD_CPUTIME_ID), measured, not a remainder (matmul worker threads, "
        "when there are any, show in cpu_ms); io_ms is read time summed over lanes; cpu_ms is the process's "
        "CPU time over all threads; majflt major page faults (getrusage); rss_mib from /proc/self/statm after the "
        "step; counters (hits..reread_bytes, swaps, swap_bytes) are this step's\n"
        "# note cache_hit_pct is the running hit rate since the start of the run; -1 when there is no expert "
        "cache (experts resident, or --cache-mb 0) or no lookup yet; cache_resident_mib is -1 without a cache\n"
        "# note swaps: the adaptive tier's background swap-ins whose read landed in the step; swap_bytes: the bytes "
        "those reads returned in the step (also counted in read_bytes); both -1 without an adaptive tier (experts "
        "resident, no cache, or a cache policy that does not swap)\n";
    if (stream == nullptr)
      pre += "# note experts resident: io_ms, read_bytes, stall_ms, mgmt_ms and the counters hits..reread_bytes are "
             "0 (nothing is read by the expert store; page faults on the mapping show in majflt); swaps and "
             "swap_bytes are -1 (no adaptive tier)\n";
    pre += "# note vram_*: the VRAM expert tier's counters of the step (lookups of experts in a slot, misses copied "
           "into a free slot, misses computed by the CPU pool, swap-ins landed, bytes copied into slots by fills and "
           "swaps, the CPU pool's and those copies' wall time, misses copied into a staging slot for their layer "
           "(the PCIe share) and their bytes); -1 without a tier; with a tier and resident experts, cache_hit_pct "
           "is the tier's running hit rate\n";
    pre += "# note ahead_*: the next-layer prefetch's counters of the step (--expert-prefetch next): experts "
           "guessed for the next MoE layer, of them asked for by its fetch, read ahead (guessed, not held and "
           "started on an idle lane before the fetch), of those taken over by a fetch, and the bytes read ahead "
           "(also in read_bytes); a guessed expert still counts as a miss; -1 when the expert store does not read "
           "ahead\n";
    pre += "# note a value that could not be measured is -1\n";
    pre += "# note the summary's interrupted= is no for a run that ended as asked, else the signal that stopped it "
           "early (SIGINT: Ctrl-C, SIGTERM); a file without a summary line was cut short (the process was killed)\n";
    pre += "# note the summary's bound= is what took most of the steps' time: compute (compute_ms), io (stall_ms) "
           "or management (mgmt_ms)\n";
    pre += kColumns;
    pre += '\n';
    if (std::fputs(pre.c_str(), csv_) < 0) fail("--csv {}: write failed", opts.csv_path);
  }
  if (!opts.route_trace_path.empty()) {
    trace_ = std::make_unique<trace::RouteTraceWriter>(opts.route_trace_path, trace_header);
    for (const auto& l : trace_header.layers) layer_expert_bytes_.push_back(l.expert_bytes);
    const auto n = static_cast<size_t>(model.n_moe_layers * model.n_expert);
    seen_in_pass_.assign(n, -1);
  }
}

RunRecorder::~RunRecorder() {
  if (csv_ != nullptr) std::fclose(csv_);
  if (statm_fd_ >= 0) ::close(statm_fd_);
}

void RunRecorder::begin(bool prefill) {
  if (inner_) inner_->begin(prefill);
  prefill_ = prefill;
  if (prefill) ++turn_;
  if (stream_) totals0_ = stream_->totals();
  if (tier_) {
    tier0_ = tier_->book().counters();
    tier_stats0_ = tier_->stats();
  }
  majflt0_ = major_faults();
  proc_cpu0_ = clock_ms(CLOCK_PROCESS_CPUTIME_ID);
  thread_cpu0_ = clock_ms(CLOCK_THREAD_CPUTIME_ID);
}

void RunRecorder::routed(int64_t pos, int64_t n, std::span<const int32_t> routing) {
  if (inner_) inner_->routed(pos, n, routing);
  if (!trace_) return;
  const auto L = model_.n_moe_layers, K = model_.n_expert_used, E = model_.n_expert;
  const int64_t pass = routed_calls_++;
  // Prefill batches go layer by layer over every token (the recording engine's order): write them so.
  for (int64_t l = 0; l < L; ++l)
    for (int64_t t = 0; t < n; ++t)
      for (int64_t s = 0; s < K; ++s) {
        const int32_t e = routing[static_cast<size_t>((t * L + l) * K + s)];
        const auto key = static_cast<size_t>(l * E + e);
        trace::TraceRow r;
        r.turn = turn_;
        r.phase = prefill_ ? 0 : 1;
        r.step = pos + t;
        r.layer = static_cast<int32_t>(l);
        r.slot = static_cast<int32_t>(s);
        r.expert = e;
        r.weight = std::nanf("");
        const bool repeat = seen_in_pass_[key] == pass;
        seen_in_pass_[key] = pass;
        // What the store did at this pass's lookup of the expert, not the cache's contents when the step began:
        // an earlier layer of the same step may have evicted it. Resident experts are all in memory: hits.
        const bool hit = stream_ == nullptr || stream_->hit_at_last_fetch(l, e);
        r.residency = hit ? trace::Residency::hit : trace::Residency::miss;
        r.expert_bytes = hit || repeat ? 0 : layer_expert_bytes_[static_cast<size_t>(l)];
        trace_->add(r);
      }
}

void RunRecorder::end(bool prefill, int64_t n_tokens, double seconds) {
  const double thread_cpu = clock_ms(CLOCK_THREAD_CPUTIME_ID);
  if (inner_) inner_->end(prefill, n_tokens, seconds);
  const double proc_cpu = clock_ms(CLOCK_PROCESS_CPUTIME_ID);
  const int64_t flt = major_faults();
  StepRow r;
  r.step = static_cast<int64_t>(rows_.size());
  r.steps = n_tokens;
  r.prefill = prefill;
  r.wall_ms = seconds * 1e3;
  r.compute_ms = thread_cpu >= 0 && thread_cpu0_ >= 0 ? thread_cpu - thread_cpu0_ : -1.0;
  r.cpu_ms = proc_cpu >= 0 && proc_cpu0_ >= 0 ? proc_cpu - proc_cpu0_ : -1.0;
  r.majflt = flt >= 0 && majflt0_ >= 0 ? flt - majflt0_ : -1;
  r.rss_mib = rss_mib(statm_fd_);
  if (stream_ != nullptr) {
    const moe::StreamCounters d = stream_->totals() - totals0_;
    r.hits = d.hits;
    r.misses = d.misses;
    r.evictions = d.evictions;
    r.read_bytes = d.bytes_read;
    r.reread_bytes = d.reread_bytes;
    r.io_ms = d.io_ms;
    r.stall_ms = d.stall_ms;
    r.mgmt_ms = d.mgmt_ms;
    if (const auto* pol = stream_->policy(); pol != nullptr && pol->plans_swaps()) {
      r.swaps = static_cast<int64_t>(d.swaps);
      r.swap_bytes = static_cast<int64_t>(d.swap_bytes);
    }
    if (stream_->packs()) {
      r.packed = static_cast<int64_t>(d.packed);
      r.pack_ms = d.pack_ms;
    }
    if (stream_->ahead_slots() > 0) {
      r.ahead_guesses = static_cast<int64_t>(d.ahead_guesses);
      r.ahead_right = static_cast<int64_t>(d.ahead_right);
      r.ahead_reads = static_cast<int64_t>(d.ahead_reads);
      r.ahead_used = static_cast<int64_t>(d.ahead_used);
      r.ahead_bytes = static_cast<int64_t>(d.ahead_bytes);
    }
    if (stream_->cache_slots() > 0) {
      run_hits_ += r.hits;
      run_lookups_ += r.hits + r.misses;
      r.hit_pct = pct(run_hits_, run_lookups_);
      r.cache_resident_mib = static_cast<double>(stream_->resident_bytes()) / kMiB;
    }
  }
  if (tier_ != nullptr) {
    const moe::SlotTierCounters c = tier_->book().counters() - tier0_;
    r.vram_hits = static_cast<int64_t>(c.hits);
    r.vram_fills = static_cast<int64_t>(c.fills);
    const moe::VramTierStats& st = tier_->stats();
    r.vram_pcie = static_cast<int64_t>(st.staged - tier_stats0_.staged);
    r.vram_pcie_bytes = static_cast<int64_t>(st.staged_bytes - tier_stats0_.staged_bytes);
    r.vram_cpu = static_cast<int64_t>(c.misses_slow) - r.vram_pcie;
    r.vram_swaps = static_cast<int64_t>(c.swaps_landed);
    r.vram_copy_bytes = static_cast<int64_t>(c.fill_bytes + c.swap_bytes);
    r.vram_cpu_ms = st.cpu_ms - tier_stats0_.cpu_ms;
    r.vram_copy_ms = st.copy_ms - tier_stats0_.copy_ms;
    if (stream_ == nullptr) {
      run_hits_ += static_cast<uint64_t>(r.vram_hits);
      run_lookups_ += static_cast<uint64_t>(r.vram_hits + r.vram_fills + r.vram_cpu + r.vram_pcie);
      r.hit_pct = pct(run_hits_, run_lookups_);
    }
  }
  if (rows_.size() < rows_.capacity()) rows_.push_back(r);  // capacity is n_ctx steps: no reallocation
  if (csv_ != nullptr)
    fmt::print(csv_,
               "{},{},{},{:.3f},{:.3f},{:.3f},{},{:.3f},{:.3f},{:.3f},{},{:.3f},{:.2f},{:.3f},{},{},{},{},{},{},{},{},"
               "{},{},{},{:.3f},{:.3f},{},{},{},{},{},{},{},{},{:.3f}\n",
               r.step, r.steps, prefill ? "prefill" : "decode", r.wall_ms, r.compute_ms, r.io_ms, r.read_bytes,
               r.hit_pct, r.stall_ms, r.mgmt_ms, r.majflt, r.cpu_ms, r.rss_mib, r.cache_resident_mib, r.hits, r.misses,
               r.evictions, r.reread_bytes, r.swaps, r.swap_bytes, r.vram_hits, r.vram_fills, r.vram_cpu, r.vram_swaps,
               r.vram_copy_bytes, r.vram_cpu_ms, r.vram_copy_ms, r.vram_pcie, r.vram_pcie_bytes, r.ahead_guesses,
               r.ahead_right, r.ahead_reads, r.ahead_used, r.ahead_bytes, r.packed, r.pack_ms);
  if (progress_ == 1)
    fmt::print(stderr, "[{} {}] {:.1f} tok/s | hit {:.1f}% | read {:.2f} MiB | stall {:.1f} ms\n",
               prefill ? "prefill" : "token", r.step, per_s(static_cast<double>(n_tokens), r.wall_ms), r.hit_pct,
               static_cast<double>(r.read_bytes) / kMiB, r.stall_ms);
  else if (progress_ == 2)
    fmt::print(stderr,
               "{{\"step\":{},\"phase\":\"{}\",\"tokens\":{},\"tok_s\":{:.3f},\"hit_pct\":{:.3f},\"read_mib\":{:.4f},"
               "\"stall_ms\":{:.3f}}}\n",
               r.step, prefill ? "prefill" : "decode", n_tokens, per_s(static_cast<double>(n_tokens), r.wall_ms),
               r.hit_pct, static_cast<double>(r.read_bytes) / kMiB, r.stall_ms);
}

RunSummary RunRecorder::finish() {
  RunSummary s = summarize(rows_, opts_.steady_skip, peak_rss_mib(), model_.n_moe_layers);
  s.interrupted = interrupted_;
  if (csv_ != nullptr) {
    fmt::print(csv_, "# summary {}\n", summary_fields(s));
    const bool bad = std::ferror(csv_) != 0;
    const int rc = std::fclose(csv_);
    csv_ = nullptr;
    if (bad || rc != 0) fail("--csv {}: write failed", opts_.csv_path);
  }
  if (trace_) trace_->close();
  return s;
}

}  // namespace moetier::telemetry
