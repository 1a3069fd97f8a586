#include "cli/commands.h"

namespace moetier::cli {
void register_synth(CLI::App& app) { app.add_subcommand("synth", "write a synthetic MoE model (not yet)"); }
}  // namespace moetier::cli
