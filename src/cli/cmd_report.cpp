// `moetier report METRICS.csv [--compare OTHER.csv] -o report.html`: a self-contained HTML page (inline SVG, no
// scripts) of a run's metrics CSV (`run --csv`): the warm-up curves, the time split and the configuration.
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "cli/commands.h"
#include "telemetry/metrics_report.h"
#include "util/error.h"

namespace moetier::cli {

void register_report(CLI::App& app) {
  auto* cmd = app.add_subcommand("report", "draw a metrics CSV (run --csv) as a self-contained HTML page");
  struct Opts {
    std::string metrics;
    std::string compare;
    std::string out;
  };
  auto o = std::make_shared<Opts>();
  // ExistingFile: a directory would otherwise reach the CSV reader's stream, which throws instead of failing.
  cmd->add_option("metrics", o->metrics, "metrics CSV written by `moetier run --csv`")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--compare", o->compare, "a second metrics CSV: its curves overlaid, its differing settings listed")
      ->check(CLI::ExistingFile);
  cmd->add_option("-o,--output", o->out, "HTML file to write")->required();
  cmd->callback([o] {
    const auto run = telemetry::read_metrics(o->metrics);
    std::unique_ptr<telemetry::MetricsFile> other;
    if (!o->compare.empty()) other = std::make_unique<telemetry::MetricsFile>(telemetry::read_metrics(o->compare));
    for (const telemetry::MetricsFile* m : {&run, static_cast<const telemetry::MetricsFile*>(other.get())})
      if (m != nullptr)
        for (const auto& w : m->warnings) fmt::print(stderr, "moetier: warning: {}\n", w);
    const std::string html = telemetry::render_report(run, other.get());
    std::ofstream out(o->out, std::ios::binary);
    if (!out) fail("-o {}: cannot write it: {}", o->out, std::strerror(errno));
    out << html;
    out.close();
    if (!out) fail("-o {}: write failed", o->out);
    fmt::print(stderr, "report: {} ({} steps{}) -> {}\n", o->metrics, run.rows.size(),
               other ? fmt::format(", compared with {}", o->compare) : std::string(), o->out);
  });
}

}  // namespace moetier::cli
