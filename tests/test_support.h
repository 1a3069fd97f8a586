// Shared helpers for the test binaries: where the shared data and the scratch space are.
#pragma once

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include <gtest/gtest.h>

#include "model/registry.h"

namespace moetier::test {

// A streamed CLI run keeps a heat profile and warm-starts the next run of the same model from it
// (engine/heat_keeper.h), so one test's run would change the expert cache of the next: the moetier processes a
// test starts keep none unless the test asks (--heat FILE). Set before main(), in every test binary.
inline const bool kNoHeatProfiles = setenv("MOETIER_HEAT", "off", 1) == 0;

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

// The oracle folders the tests read, each with models/, ref/ and dequant/ (../shared/oracle/README.md): the top
// one, then incoming/<arch>/ for each architecture moetier supports (model/registry.h), sorted. An incoming folder
// of an architecture not supported yet is left out, so it never fails the suite before its code exists.
inline std::vector<std::filesystem::path> oracle_roots() {
  namespace fs = std::filesystem;
  const fs::path top = fs::path(MOETIER_SHARED_DIR) / "oracle";
  std::vector<fs::path> roots;
  if (!fs::is_directory(top / "models")) return roots;
  roots.push_back(top);
  std::vector<fs::path> incoming;
  if (fs::is_directory(top / "incoming")) {
    for (const auto& e : fs::directory_iterator(top / "incoming")) {
      if (e.is_directory() && model::find_architecture(e.path().filename().string()) != nullptr)
        incoming.push_back(e.path());
    }
  }
  std::sort(incoming.begin(), incoming.end());
  roots.insert(roots.end(), incoming.begin(), incoming.end());
  return roots;
}

// Every model (the stem of models/<name>.gguf) of every oracle root, sorted by name.
inline std::vector<std::string> oracle_model_names() {
  std::vector<std::string> names;
  for (const auto& root : oracle_roots()) {
    for (const auto& e : std::filesystem::directory_iterator(root / "models")) {
      if (e.path().extension() == ".gguf") names.push_back(e.path().stem().string());
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Every MoE model of the oracle roots (everything but the dense stories260K*), sorted by name.
inline std::vector<std::string> moe_model_names() {
  std::vector<std::string> names = oracle_model_names();
  std::erase_if(names, [](const std::string& n) { return n.starts_with("stories"); });
  return names;
}

// The oracle root whose models/ holds <name>.gguf; the top folder when none does (the caller's open then names
// the missing file).
inline std::filesystem::path oracle_root_of(const std::string& name) {
  for (const auto& root : oracle_roots()) {
    if (std::filesystem::exists(root / "models" / (name + ".gguf"))) return root;
  }
  return oracle_dir();
}
inline std::filesystem::path oracle_model(const std::string& name) {
  return oracle_root_of(name) / "models" / (name + ".gguf");
}
// The reference case `prompt` (p1, p2, plong) of model `name`: its JSON; the logits file is named in it.
inline std::filesystem::path oracle_ref(const std::string& name, const std::string& prompt) {
  return oracle_root_of(name) / "ref" / (name + "." + prompt + ".json");
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
