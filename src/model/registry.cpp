#include "model/registry.h"

#include <array>
#include <string>

#include "util/error.h"

namespace moetier::model {

namespace {

constexpr std::array<ArchitectureEntry, 3> kArchitectures{{
    {"gpt-oss", &make_gptoss},
    {"llama", &make_llama},
    {"qwen3moe", &make_qwen3moe},
}};

}  // namespace

std::span<const ArchitectureEntry> architectures() { return kArchitectures; }

const ArchitectureEntry* find_architecture(std::string_view name) {
  for (const auto& a : kArchitectures) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

std::unique_ptr<Model> load_model(const gguf::GgufModel& file, const ModelOptions& opts,
                                  std::unique_ptr<moe::ExpertSource> experts) {
  const std::string arch = file.architecture();
  const ArchitectureEntry* entry = find_architecture(arch);
  if (entry == nullptr) {
    std::string names;
    for (const auto& a : kArchitectures) names += (names.empty() ? "" : ", ") + std::string(a.name);
    fail("unsupported architecture '{}' in {} (supported: {})", arch, file.path().string(), names);
  }
  return entry->make(file, opts, std::move(experts));
}

}  // namespace moetier::model
