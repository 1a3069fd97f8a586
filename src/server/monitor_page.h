// The monitor page served at GET /: one self-contained HTML document (inline CSS and JS, no external resource)
// that polls /v1/moetier/stats every second and draws the model and its tiers, live tok/s, hit rate, MiB read
// per token, stall share, the per-layer expert heat map and the last requests. Its source is
// src/server/monitor.html, embedded in the binary at build time.
#pragma once

#include <string_view>

namespace moetier::server {

std::string_view monitor_page();

}  // namespace moetier::server
