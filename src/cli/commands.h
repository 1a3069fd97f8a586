// Subcommands of the moetier CLI. Each lives in its own cmd_*.cpp and registers itself on the root app; its
// callback throws moetier::Error for bad input, which main() turns into a message and exit status 1.
#pragma once

#include <CLI/CLI.hpp>

namespace moetier::cli {

void register_inspect(CLI::App& app);
void register_synth(CLI::App& app);
void register_run(CLI::App& app);   // run and chat
void register_eval(CLI::App& app);
void register_replay(CLI::App& app);  // route-trace cache simulator
void register_report(CLI::App& app);  // metrics CSV to an HTML page
void register_serve(CLI::App& app);   // the OpenAI-compatible HTTP server
void register_devices(CLI::App& app); // the Vulkan devices -ngl can use

}  // namespace moetier::cli
