// Every setting that changes a run's behaviour, as resolved (what each `auto` became), in a fixed order: the
// metrics CSV's `# config` lines, which `moetier report --compare` diffs between two runs.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace moetier::engine {

class Engine;

// command (the telemetry's), the expert placement and store, context, batch, KV type and top-k, then the
// caller's TelemetryConfig::settings.
std::vector<std::pair<std::string, std::string>> resolved_settings(const Engine& e);

}  // namespace moetier::engine
