// `moetier synth`: write a synthetic MoE model (real architecture shape, random finite weights) as GGUF,
// streaming in constant memory.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include "synth/preset.h"

namespace moetier::synth {

struct SynthOptions {
  ModelShape shape;
  std::string type = "Q4_K_M";       // quant mix, see model_plan.h
  uint64_t seed = 1;
  std::filesystem::path vocab;       // empty: generated vocabulary of shape.n_vocab tokens
  std::filesystem::path output;
  uint64_t alignment = 32;           // general.alignment; 4096 puts every tensor on a page boundary
  // Called after each chunk with bytes written so far and the total, from the writing thread.
  std::function<void(uint64_t done, uint64_t total)> progress;
};

struct SynthResult {
  uint64_t file_bytes = 0;
  uint64_t expert_bytes = 0;
  uint64_t n_tensors = 0;
  double seconds = 0.0;
};

// Throws moetier::Error on a bad option or an I/O failure (naming the output file). The weights are a pure
// function of (options, seed): the same command writes the same file.
SynthResult write_synthetic_model(const SynthOptions& opts);

}  // namespace moetier::synth
