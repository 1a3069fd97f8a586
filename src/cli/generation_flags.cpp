#include "cli/generation_flags.h"

#include <limits>
#include <random>

#include <fmt/format.h>

#include "cli/flag_checks.h"

namespace moetier::cli {

void SamplingFlags::add_to(CLI::App& cmd, const char* seed_help) {
  cmd.add_option("--temp", p.temperature, "temperature; 0 = greedy (always the most likely token)")
      ->capture_default_str()
      ->check(real<float>(0.0f));
  cmd.add_option("--top-k", p.top_k, "sample among the k most likely tokens (0 = all)")
      ->capture_default_str()
      ->transform(whole<int32_t>(0));
  cmd.add_option("--top-p", p.top_p, "nucleus: the smallest set reaching this probability (1 = off)")
      ->capture_default_str()
      ->check(real<float>(0.0f, 1.0f, Ends::open_low));
  cmd.add_option("--min-p", p.min_p, "drop tokens below min-p x the top token's probability (0 = off)")
      ->capture_default_str()
      ->check(real<float>(0.0f, 1.0f, Ends::open_high));
  cmd.add_option("--repeat-penalty", p.repeat_penalty, "penalise recently seen tokens (1 = off)")
      ->capture_default_str()
      ->check(real<float>(0.0f, std::numeric_limits<float>::max(), Ends::open_low));
  cmd.add_option("--repeat-last-n", p.repeat_last_n, "how many recent tokens the penalty looks at")
      ->capture_default_str()
      ->transform(whole<int32_t>(0));
  cmd.add_option("--presence-penalty", p.presence_penalty,
                 "subtract this from the logit of every token seen in the last --repeat-last-n (0 = off)")
      ->capture_default_str()
      ->check(real<float>(-2.0f, 2.0f));
  cmd.add_option("--frequency-penalty", p.frequency_penalty,
                 "subtract this times its count from the logit of every token seen in the last --repeat-last-n "
                 "(0 = off)")
      ->capture_default_str()
      ->check(real<float>(-2.0f, 2.0f));
  cmd.add_option("--seed", seed,
                 seed_help != nullptr ? seed_help
                                      : "random seed from 0 to 2^64-1: the same seed gives the same text; random or -1 "
                                        "(as llama.cpp): a random one, logged")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](std::string& s) -> std::string {
            if (s == "random" || s == "-1" || parse_whole<uint64_t>(s, 0, UINT64_MAX)) return {};
            return s + " is not random, -1 (random) or " + whole_phrase<uint64_t>(0, UINT64_MAX);
          },
          "random|-1|≥ 0"));
}

sample::SamplerParams SamplingFlags::resolve() {
  const std::optional<uint64_t> fixed = fixed_seed();
  p.seed = fixed ? *fixed : std::random_device{}();
  if (p.temperature > 0.0f)
    fmt::print(stderr, "sampling: seed {}, temp {}, top-k {}, top-p {}, min-p {}\n", p.seed, p.temperature, p.top_k,
               p.top_p, p.min_p);
  else
    fmt::print(stderr, "sampling: greedy\n");
  return p;
}

std::optional<uint64_t> SamplingFlags::fixed_seed() const {
  if (seed == "random" || seed == "-1") return std::nullopt;
  return parse_whole<uint64_t>(seed, 0, UINT64_MAX);
}

void ChatFlags::add_to(CLI::App& cmd, bool with_system) {
  cmd.add_option("--chat-format", format,
                 "chatml (Qwen), harmony (gpt-oss), mistral ([INST]), gemma (<start_of_turn>), gemma4 (<|turn>); auto: "
                 "from the model's chat template or architecture")
      ->capture_default_str();
  cmd.add_flag("--no-think", no_think,
               "answer without reasoning: ChatML adds an empty think block, harmony goes to the final channel");
  if (with_system) cmd.add_option("--system", system, "system message");
}

chat::Options ChatFlags::resolve(const gguf::Metadata& md, const tokenizer::Tokenizer& tok) const {
  chat::Options o;
  o.format = format == "auto" ? chat::detect_format(md) : chat::parse_format(format);
  o.no_think = no_think;
  o.think_opens = o.format == chat::Format::chatml && chat::template_opens_think(md);
  o.system_prompt = system;
  std::string missing;
  for (const std::string_view m : chat::control_markers(o)) {
    if (!tok.find_token(m)) missing += (missing.empty() ? "" : " ") + std::string(m);
  }
  if (!missing.empty()) {
    fmt::print(stderr,
               "moetier: warning: the vocabulary has no {} token{}: the {} markers are read as plain text, so the "
               "model sees no chat turns (is --chat-format right for this model?)\n",
               missing, missing.find(' ') == std::string::npos ? "" : "s", chat::format_name(o.format));
  }
  // Last, after any warning: chat's tests (and a user) take this line as "ready for input".
  fmt::print(stderr, "chat format: {}{}\n", chat::format_name(o.format),
             no_think ? " (no think)" : o.think_opens ? " (the template opens the think block)" : "");
  return o;
}

CLI::Validator n_predict_check() {
  return whole<int64_t>(-1, std::numeric_limits<int64_t>::max(),
                        "-1 (until the end) or " + whole_phrase<int64_t>(0, std::numeric_limits<int64_t>::max()));
}

}  // namespace moetier::cli
