// moetier: run Mixture-of-Experts GGUF models larger than memory. Entry point: parses the subcommand and maps
// errors to exit codes (1: bad input or runtime error, 2: bad command line).
#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/commands.h"
#include "util/error.h"

int main(int argc, char** argv) {
  CLI::App app{"moetier " MOETIER_VERSION
               ": an inference engine for Mixture-of-Experts GGUF models larger than memory.\n"
               "Dense weights stay at hand; routed experts are read from the model file on demand and cached."};
  app.set_version_flag("--version", "moetier " MOETIER_VERSION);
  app.require_subcommand(1);
  moetier::cli::register_inspect(app);
  moetier::cli::register_synth(app);
  moetier::cli::register_run(app);
  moetier::cli::register_eval(app);
  moetier::cli::register_replay(app);
  moetier::cli::register_report(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const moetier::Error& e) {
    std::fflush(stdout);
    fmt::print(stderr, "moetier: error: {}\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    fmt::print(stderr, "moetier: internal error: {}\n", e.what());
    return 1;
  }
  return 0;
}
