#include "cli/commands.h"

namespace moetier::cli {
void register_inspect(CLI::App& app) { app.add_subcommand("inspect", "describe a GGUF model (not yet)"); }
}  // namespace moetier::cli
