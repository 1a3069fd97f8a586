// The generation flags `run`, `chat` and `serve` share: sampling (--temp, --top-k, --top-p, --min-p, the penalties,
// --seed), the chat format (--chat-format, --no-think, --system) and -n's check. They only map onto the sampler's
// and the chat format's settings.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "chat/chat_format.h"
#include "gguf/gguf.h"
#include "sample/sampler.h"
#include "tokenizer/tokenizer.h"

namespace moetier::cli {

struct SamplingFlags {
  sample::SamplerParams p;
  std::string seed = "random";

  // `seed_help` replaces --seed's description (serve: the seed of requests that send none).
  void add_to(CLI::App& cmd, const char* seed_help = nullptr);
  // The parameters with the seed resolved (random: drawn here); logs the settings on stderr. The flags' ranges
  // are checked as they are parsed (cli/flag_checks.h); the sampler checks them again.
  sample::SamplerParams resolve();
  // The --seed given, or nullopt for random (-1): what a server gives requests that send no seed.
  std::optional<uint64_t> fixed_seed() const;
};

struct ChatFlags {
  std::string format = "auto";
  bool no_think = false;
  std::string system;

  void add_to(CLI::App& cmd, bool with_system = true);
  // The options for this model: the format from --chat-format or the model; warns on stderr when the vocabulary
  // lacks the format's control tokens, then logs "chat format: ..." (chat's ready-for-input line).
  chat::Options resolve(const gguf::Metadata& md, const tokenizer::Tokenizer& tok) const;
};

// -n: -1 or a count (the option's own type would take any negative number as "until the end").
CLI::Validator n_predict_check();

}  // namespace moetier::cli
