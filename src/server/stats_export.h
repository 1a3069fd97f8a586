// The server's live numbers as the monitor page reads them (GET /v1/moetier/stats, JSON) and as Prometheus
// scrapes them (GET /metrics, text exposition format 0.0.4: "# HELP", "# TYPE", one sample per line).
//
// Source: Prometheus "Exposition formats" (text-based format); metric names follow its naming guide (a `moetier_`
// prefix, base units: seconds, bytes; counters end in _total).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "server/server_stats.h"
#include "telemetry/live_stats.h"

namespace moetier::server {

// Stats JSON: {"server": {...}, "model": {...}, "total": {...}, "recent": {tok/s, hit rate, MiB read per token,
// stall share, ...}, "tiers": {...}, "heat": {"n_moe_layers", "n_expert", "routed": [[...]], "hits", "misses"},
// "requests": [...]} (the exact keys are documented in stats_export.cpp and read by the monitor page).
nlohmann::json stats_json(const ServerStats& server, const telemetry::LiveSnapshot& live);
std::string prometheus_text(const ServerStats& server, const telemetry::LiveSnapshot& live);

}  // namespace moetier::server
