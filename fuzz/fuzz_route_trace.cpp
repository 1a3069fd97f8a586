// libFuzzer entry for the route-trace reader: any byte string given to parse_route_trace either parses or throws
// moetier::Error. A trace that parses is written back (format_route_header + append_route_row) and must read
// back identical, as route_trace.h promises; its rows must satisfy the ranges the reader checks. Anything else (a
// crash, a sanitizer report, another exception type, a hang, an allocation beyond -rss_limit_mb) is a finding.
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "trace/route_trace.h"
#include "util/error.h"

namespace {

using moetier::trace::RouteTrace;
using moetier::trace::TraceRow;

void check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz_route_trace: %s\n", what);
  std::abort();
}

// Field-wise equality, with a NaN weight equal to any NaN (the format writes every NaN as `nan`).
bool same_row(const TraceRow& a, const TraceRow& b) {
  const bool weight = std::isnan(a.weight) ? std::isnan(b.weight)
                                           : std::bit_cast<uint32_t>(a.weight) == std::bit_cast<uint32_t>(b.weight);
  return a.turn == b.turn && a.phase == b.phase && a.step == b.step && a.layer == b.layer && a.slot == b.slot &&
         a.expert == b.expert && weight && a.residency == b.residency && a.expert_bytes == b.expert_bytes;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  RouteTrace t;
  try {
    t = moetier::trace::parse_route_trace(text, "fuzz-input");
  } catch (const moetier::Error&) {
    return 0;
  }
  const auto& h = t.header;
  check(h.n_moe_layers > 0 && h.n_expert > 0 && h.n_expert_used > 0 && h.n_expert_used <= h.n_expert,
        "header counts out of range");
  check(h.layers.size() == static_cast<size_t>(h.n_moe_layers), "layer list size differs from n_layer");
  for (const TraceRow& r : t.rows) {
    check(r.layer >= 0 && r.layer < h.n_moe_layers, "row layer out of range");
    check(r.expert >= 0 && r.expert < h.n_expert, "row expert out of range");
    check(r.phase <= 1 && static_cast<int>(r.residency) <= 2, "row phase or residency out of range");
  }
  std::string out = moetier::trace::format_route_header(h);
  for (const TraceRow& r : t.rows) moetier::trace::append_route_row(out, r);
  RouteTrace back;
  try {
    back = moetier::trace::parse_route_trace(out, "fuzz-rewritten");
  } catch (const moetier::Error& e) {
    std::fprintf(stderr, "fuzz_route_trace: the written trace does not read back: %s\n", e.what());
    std::abort();
  }
  check(back.header == h, "header changed in the write/read round trip");
  check(back.rows.size() == t.rows.size(), "row count changed in the write/read round trip");
  for (size_t i = 0; i < t.rows.size(); ++i) check(same_row(back.rows[i], t.rows[i]), "row changed in the round trip");
  return 0;
}
