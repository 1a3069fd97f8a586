#include "cli/commands.h"

namespace moetier::cli {
void register_eval(CLI::App& app) { app.add_subcommand("eval", "teacher-forced evaluation (not yet)"); }
}  // namespace moetier::cli
