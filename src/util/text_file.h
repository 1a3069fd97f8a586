// Whole small files read as bytes (prompts, token lists, JSON inputs), with errors a user can act on.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace moetier::util {

// The bytes of `path`. Throws moetier::Error as "<what> <path>: <reason>" when it is missing, a directory, not
// readable or fails mid-read (the system's reason, e.g. "Permission denied"), and when it holds more than
// `max_bytes`, so a mistaken path to a model file is not read into memory whole. `what` names the flag or
// input that gave the path ("-f", "--tokens"). Reads pipes and character devices too (-f /dev/stdin).
std::string read_text_file(const std::filesystem::path& path, std::string_view what,
                           size_t max_bytes = size_t{1} << 30);

}  // namespace moetier::util
