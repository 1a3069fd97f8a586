// Flags shared by the subcommands that load a model for inference (run, chat), and the loading itself, so
// every command spells and validates them the same way.
#pragma once

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "gguf/gguf.h"
#include "model/model.h"

namespace moetier::cli {

struct ModelFlags {
  std::string model;
  int64_t n_ctx = 0;  // 0: the model's training context, at most 4096
  int64_t n_batch = 512;
  std::string kv_type = "f16";
  int64_t n_expert_used = 0;

  // Registers -m, -c, -b, --kv-type, --n-expert-used on `cmd`.
  void add_to(CLI::App& cmd);
  model::ModelOptions options() const;  // throws moetier::Error for a bad value, naming the flag
};

// An opened file and the model built over it (the model points into the file's mapping).
struct LoadedModel {
  std::unique_ptr<gguf::GgufModel> file;
  std::unique_ptr<model::Model> model;
};

// Opens and loads, logging the decisions on stderr (context size, an --n-expert-used override being lossy).
LoadedModel load(const ModelFlags& f);

}  // namespace moetier::cli
