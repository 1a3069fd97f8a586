// Whole JSON files read into nlohmann::json, for the oracle cases, token lists and other small inputs.
#pragma once

#include <filesystem>

#include <nlohmann/json.hpp>

namespace moetier::util {

// A JSON file parsed leniently: bytes >= 0x80 become '?' first, because the oracle's greedy_text fields may hold
// ill-formed UTF-8 (detokenised random byte tokens) and only the numbers matter here. Throws moetier::Error
// naming the file when it cannot be opened or is not valid JSON.
nlohmann::json read_json_lenient(const std::filesystem::path& path);

}  // namespace moetier::util
