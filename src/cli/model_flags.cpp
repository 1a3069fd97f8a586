#include "cli/model_flags.h"

#include <cstdio>

#include <fmt/format.h>

#include "util/error.h"

namespace moetier::cli {

void ModelFlags::add_to(CLI::App& cmd) {
  cmd.add_option("-m,--model", model, "GGUF model file (for a split model, its first shard)")->required();
  cmd.add_option("-c,--ctx-size", n_ctx,
                 "context size in tokens (KV cache positions); 0: the model's training context, at most 4096")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd.add_option("-b,--batch-size", n_batch, "most prompt tokens per forward pass (prefill chunk)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd.add_option("--kv-type", kv_type, "KV cache element type: f16 or f32")->capture_default_str();
  cmd.add_option("--n-expert-used", n_expert_used,
                 "override the model's top-k experts per token (lossy: changes the model's output)")
      ->check(CLI::PositiveNumber);
}

model::ModelOptions ModelFlags::options() const {
  model::ModelOptions o;
  o.n_ctx = n_ctx;
  o.n_batch = n_batch;  // the model caps it at the context size
  o.n_expert_used = n_expert_used;
  if (kv_type == "f16")
    o.kv_type = model::KvType::f16;
  else if (kv_type == "f32")
    o.kv_type = model::KvType::f32;
  else
    fail("--kv-type '{}' is not one of f16, f32", kv_type);
  return o;
}

LoadedModel load(const ModelFlags& f) {
  LoadedModel lm;
  const auto opts = f.options();
  lm.file = std::make_unique<gguf::GgufModel>(gguf::GgufModel::open(f.model));
  lm.model = model::load_model(*lm.file, opts);
  const auto& info = lm.model->info();
  fmt::print(stderr, "model: {} ({}, {} layers, n_embd {}, n_vocab {}", f.model, info.architecture, info.n_layer,
             info.n_embd, info.n_vocab);
  if (info.n_moe_layers > 0)
    fmt::print(stderr, ", {} MoE layers x {} experts, top-{}", info.n_moe_layers, info.n_expert, info.n_expert_used);
  fmt::print(stderr, "), context {} tokens, KV cache {}\n", info.n_ctx, f.kv_type);
  if (f.n_expert_used > 0)
    fmt::print(stderr, "note: --n-expert-used {} overrides the model's top-k: output differs from the model's own\n",
               f.n_expert_used);
  return lm;
}

}  // namespace moetier::cli
