#include "model/registry.h"

#include <array>
#include <string>

#include "util/error.h"

namespace moetier::model {

namespace {

constexpr std::array<ArchitectureEntry, 5> kArchitectures{{
    {"gemma4", &make_gemma4, &summarize_gemma4},
    {"gpt-oss", &make_gptoss, &summarize_gptoss},
    {"llama", &make_llama, &summarize_llama},
    {"qwen3moe", &make_qwen3moe, &summarize_qwen3moe},
    {"qwen35moe", &make_qwen35moe, &summarize_qwen35moe},
}};

}  // namespace

std::span<const ArchitectureEntry> architectures() { return kArchitectures; }

const ArchitectureEntry* find_architecture(std::string_view name) {
  for (const auto& a : kArchitectures) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

namespace {

// The file's architecture entry; throws listing the supported ones when there is none.
const ArchitectureEntry& entry_for(const gguf::GgufModel& file) {
  const std::string arch = file.architecture();
  const ArchitectureEntry* entry = find_architecture(arch);
  if (entry == nullptr) {
    std::string names;
    for (const auto& a : kArchitectures) names += (names.empty() ? "" : ", ") + std::string(a.name);
    fail("unsupported architecture '{}' in {} (supported: {})", arch, file.path().string(), names);
  }
  return *entry;
}

}  // namespace

std::unique_ptr<Model> load_model(const gguf::GgufModel& file, const ModelOptions& opts,
                                  std::unique_ptr<moe::ExpertSource> experts) {
  return entry_for(file).make(file, opts, std::move(experts));
}

ArchSummary summarize(const gguf::GgufModel& file) { return entry_for(file).summarize(file); }

}  // namespace moetier::model
