// Shared helpers for the test binaries: where the shared data and the scratch space are.
#pragma once

#include <filesystem>
#include <string>

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

// Scratch space under the build tree: tests never write into ../shared or the source tree.
inline std::filesystem::path tmp_dir(const std::string& name) {
  std::filesystem::path p = std::filesystem::path(MOETIER_TEST_TMP) / name;
  std::filesystem::create_directories(p);
  return p;
}

// The moetier CLI binary, for tests that check exit codes and messages end to end.
inline std::string cli_path() { return MOETIER_CLI; }

}  // namespace moetier::test
