// Reading a metrics CSV (moetier_metrics v1, written by `run --csv`; see run_metrics.h) and rendering it as a
// self-contained HTML page (`moetier report`): inline SVG curves of per-token tok/s, running hit rate and MiB read
// (the warm-up curve), the time split and the run's configuration; with a second run, its curves overlaid and the
// settings that differ listed. No scripts, no network: the page is one file.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "telemetry/run_metrics.h"

namespace moetier::telemetry {

struct MetricsFile {
  std::string name;                                         // as given, for labels and errors
  std::string engine;                                       // "moetier X.Y.Z"
  std::string model;                                        // the `# model` line's text
  std::vector<std::pair<std::string, std::string>> config;  // `# config` lines, in file order
  std::vector<std::string> notes;                           // `# note` lines
  std::vector<StepRow> rows;
  // `# summary` key=value, in order; without that line (a run cut short), derived from the rows.
  std::vector<std::pair<std::string, std::string>> summary;
  bool summary_derived = false;                             // no `# summary` line: `summary` is from the rows
  std::vector<std::string> warnings;                        // what was skipped, naming the file and line
  std::string summary_value(std::string_view key) const;     // "" when absent
};

// Columns are found by their header name, in any order; unknown columns are ignored, and the columns added after
// the first v1 files (swaps, swap_bytes) read as -1 when absent. A last line without an end of line (a file cut
// off mid-write) is skipped with a warning in `warnings`. Throws moetier::Error naming `name` and the 1-based line
// for a missing version line, a header without one of the other kColumns, a row whose field count differs from
// the header's, a row that is not all finite numbers, a count column (step, steps, read_bytes, majflt, hits,
// misses, evictions, reread_bytes, swaps, swap_bytes) that is not a whole number in range, or a summary
// steady_skip that is not one.
MetricsFile parse_metrics(std::string_view text, std::string_view name);
MetricsFile read_metrics(const std::filesystem::path& path);

// The HTML page for `run`, with `other` overlaid when not null.
std::string render_report(const MetricsFile& run, const MetricsFile* other);

}  // namespace moetier::telemetry
