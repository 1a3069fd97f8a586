// The table from general.architecture to the code that builds that architecture. Each architecture lives in its
// own file (arch_<name>.cpp) with its hyperparameters, tensor binding and layer forward; adding one means one
// new file and one line in registry.cpp. Shared blocks: model/gqa.h (attention), model/moe_layers.h (the
// routed-expert layers and dense FFNs), model/decoder.h (embedding, residual halves, output).
#pragma once

#include <memory>
#include <span>
#include <string_view>

#include "model/model.h"

namespace moetier::model {

using ModelFactory = std::unique_ptr<Model> (*)(const gguf::GgufModel& file, const ModelOptions& opts,
                                               std::unique_ptr<moe::ExpertSource> experts);

using ArchSummarizer = ArchSummary (*)(const gguf::GgufModel& file);

struct ArchitectureEntry {
  std::string_view name;  // general.architecture value
  ModelFactory make;
  ArchSummarizer summarize;
};

std::span<const ArchitectureEntry> architectures();
// nullptr when unsupported.
const ArchitectureEntry* find_architecture(std::string_view name);

// Factories, one per arch_*.cpp.
std::unique_ptr<Model> make_llama(const gguf::GgufModel&, const ModelOptions&, std::unique_ptr<moe::ExpertSource>);
std::unique_ptr<Model> make_qwen3moe(const gguf::GgufModel&, const ModelOptions&, std::unique_ptr<moe::ExpertSource>);
std::unique_ptr<Model> make_qwen35moe(const gguf::GgufModel&, const ModelOptions&, std::unique_ptr<moe::ExpertSource>);
std::unique_ptr<Model> make_gptoss(const gguf::GgufModel&, const ModelOptions&, std::unique_ptr<moe::ExpertSource>);
std::unique_ptr<Model> make_gemma4(const gguf::GgufModel&, const ModelOptions&, std::unique_ptr<moe::ExpertSource>);
ArchSummary summarize_llama(const gguf::GgufModel&);
ArchSummary summarize_qwen3moe(const gguf::GgufModel&);
ArchSummary summarize_qwen35moe(const gguf::GgufModel&);
ArchSummary summarize_gptoss(const gguf::GgufModel&);
ArchSummary summarize_gemma4(const gguf::GgufModel&);

}  // namespace moetier::model
