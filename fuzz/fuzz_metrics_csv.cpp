// libFuzzer entry for the metrics-CSV reader (`moetier report`): any byte string given to parse_metrics either
// parses or throws moetier::Error, and a file that parses renders as a report, alone and compared with itself,
// without throwing. Anything else (a crash, a sanitizer report such as an out-of-range float-to-integer
// conversion, another exception, a hang, an allocation beyond -rss_limit_mb) is a finding.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "telemetry/metrics_report.h"
#include "util/error.h"

namespace {
// Keeps the rendering below from being optimised away.
volatile size_t g_sink = 0;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  moetier::telemetry::MetricsFile m;
  try {
    m = moetier::telemetry::parse_metrics({reinterpret_cast<const char*>(data), size}, "fuzz-input");
  } catch (const moetier::Error&) {
    return 0;
  }
  g_sink = moetier::telemetry::render_report(m, nullptr).size() + moetier::telemetry::render_report(m, &m).size();
  return 0;
}
