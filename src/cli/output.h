// Standard output that fails to be written (a full disk, a closed file descriptor) is an error, never a silent
// exit 0: generation stops at the first failed write, and main() checks the stream once the subcommand returns.
#pragma once

#include <string_view>

namespace moetier::cli {

// Writes `s` to stdout and flushes it (generated text appears as it comes). Returns false when the write or the
// flush failed; the reason is kept for check_stdout().
bool write_stdout(std::string_view s);

// Flushes stdout (and std::cout, which writes through it) and throws moetier::Error "writing standard output
// failed: REASON" when any write to it failed since the start. `write_errno`: errno after writes made through
// std::cout (which keeps no reason of its own), 0 when unknown.
void check_stdout(int write_errno = 0);

}  // namespace moetier::cli
