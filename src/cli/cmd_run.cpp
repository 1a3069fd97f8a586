#include "cli/commands.h"

namespace moetier::cli {
void register_run(CLI::App& app) { app.add_subcommand("run", "generate text from a model (not yet)"); }
}  // namespace moetier::cli
