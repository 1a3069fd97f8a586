// Shared helpers for the test binaries: where the shared data and the scratch space are.
#pragma once

#include <algorithm>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include <gtest/gtest.h>

namespace moetier::test {

// ../shared beside the repository (read-only in CI). Fails the calling test with a clear message when absent,
// instead of letting each test report a confusing "file not found".
inline std::filesystem::path shared_dir() {
  std::filesystem::path p = MOETIER_SHARED_DIR;
  if (!std::filesystem::is_directory(p / "oracle")) {
    ADD_FAILURE() << "shared test data not found at " << p
                  << " (expected ../shared beside the repository, with oracle/, tokenizer/ and traces/)";
  }
  return p;
}

inline std::filesystem::path oracle_dir() { return shared_dir() / "oracle"; }

// Every MoE model of ../shared/oracle/models (everything but the dense stories260K*), sorted by name.
inline std::vector<std::string> moe_model_names() {
  std::vector<std::string> names;
  const std::filesystem::path dir = std::filesystem::path(MOETIER_SHARED_DIR) / "oracle" / "models";
  if (!std::filesystem::is_directory(dir)) return names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string stem = e.path().stem().string();
    if (e.path().extension() == ".gguf" && !stem.starts_with("stories")) names.push_back(stem);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Scratch space under the build tree: tests never write into ../shared or the source tree.
inline std::filesystem::path tmp_dir(const std::string& name) {
  std::filesystem::path p = std::filesystem::path(MOETIER_TEST_TMP) / name;
  std::filesystem::create_directories(p);
  return p;
}

// Makes `part` (a file this process wrote) available as `dest`, unless a parallel test process already did:
// ctest runs the tests of one binary as separate processes, which share such files (a pure function of their
// options, so identical). A hard link never replaces a file another test may have open, where a rename over it
// would (and the streaming store stops a run whose model file was replaced).
inline void publish_once(const std::filesystem::path& part, const std::filesystem::path& dest) {
  std::error_code ec;
  std::filesystem::create_hard_link(part, dest, ec);
  std::filesystem::remove(part);
  if (ec && !std::filesystem::exists(dest)) throw std::filesystem::filesystem_error("publish_once", part, dest, ec);
}

// The moetier CLI binary, for tests that check exit codes and messages end to end.
inline std::string cli_path() { return MOETIER_CLI; }

}  // namespace moetier::test
