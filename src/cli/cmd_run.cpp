// `moetier run` (generate from a prompt) and `moetier chat` (interactive, the KV cache kept across turns).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <random>
#include <string>

#include <fmt/format.h>

#include "chat/chat_format.h"
#include "cli/commands.h"
#include "cli/model_flags.h"
#include "engine/engine.h"
#include "model/eval.h"
#include "model/generator.h"
#include "sample/sampler.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/json_file.h"

namespace moetier::cli {
namespace {

struct SamplingFlags {
  sample::SamplerParams p;
  std::string seed = "random";

  void add_to(CLI::App& cmd) {
    cmd.add_option("--temp", p.temperature, "temperature; 0 = greedy (always the most likely token)")
        ->capture_default_str();
    cmd.add_option("--top-k", p.top_k, "sample among the k most likely tokens (0 = all)")->capture_default_str();
    cmd.add_option("--top-p", p.top_p, "nucleus: the smallest set reaching this probability (1 = off)")
        ->capture_default_str();
    cmd.add_option("--min-p", p.min_p, "drop tokens below min-p x the top token's probability (0 = off)")
        ->capture_default_str();
    cmd.add_option("--repeat-penalty", p.repeat_penalty, "penalise recently seen tokens (1 = off)")
        ->capture_default_str();
    cmd.add_option("--repeat-last-n", p.repeat_last_n, "how many recent tokens the penalty looks at")
        ->capture_default_str();
    cmd.add_option("--seed", seed, "random seed: the same seed gives the same text (default: random, logged)")
        ->capture_default_str();
  }
  sample::SamplerParams resolve() {
    if (seed == "random") {
      p.seed = std::random_device{}();
    } else {
      try {
        size_t used = 0;
        p.seed = std::stoull(seed, &used);
        if (used != seed.size()) throw std::invalid_argument(seed);
      } catch (const std::exception&) {
        fail("--seed '{}' is not a non-negative integer (or 'random')", seed);
      }
    }
    if (p.temperature < 0.0f) fail("--temp {} must be >= 0", p.temperature);
    if (p.top_p <= 0.0f || p.top_p > 1.0f) fail("--top-p {} must be in (0, 1]", p.top_p);
    if (p.min_p < 0.0f || p.min_p >= 1.0f) fail("--min-p {} must be in [0, 1)", p.min_p);
    if (p.repeat_penalty <= 0.0f) fail("--repeat-penalty {} must be > 0", p.repeat_penalty);
    if (p.temperature > 0.0f) fmt::print(stderr, "sampling: seed {}, temp {}, top-k {}, top-p {}, min-p {}\n", p.seed,
                                         p.temperature, p.top_k, p.top_p, p.min_p);
    else
      fmt::print(stderr, "sampling: greedy\n");
    return p;
  }
};

struct ChatFlags {
  std::string format = "auto";
  bool no_think = false;
  std::string system;

  void add_to(CLI::App& cmd) {
    cmd.add_option("--chat-format", format,
                   "chatml (Qwen), harmony (gpt-oss), mistral ([INST]); auto: from the model's chat template or "
                   "architecture")
        ->capture_default_str();
    cmd.add_flag("--no-think", no_think,
                 "answer without reasoning: ChatML adds an empty think block, harmony goes to the final channel");
    cmd.add_option("--system", system, "system message");
  }
  chat::Options resolve(const gguf::Metadata& md) const {
    chat::Options o;
    o.format = format == "auto" ? chat::detect_format(md) : chat::parse_format(format);
    o.no_think = no_think;
    o.system_prompt = system;
    fmt::print(stderr, "chat format: {}{}\n", chat::format_name(o.format), no_think ? " (no think)" : "");
    return o;
  }
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("-f {}: cannot open the prompt file", path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// --tokens LIST|FILE: a JSON list of token ids given inline (an argument that starts with '['), or a file holding one
// or an oracle case object's "prompt_tokens" (what `eval --tokens` reads). Run as given: no BOS is added. Throws
// naming the argument for anything else or an id outside the vocabulary.
std::vector<int32_t> read_prompt_tokens(const std::string& path, int64_t n_vocab) {
  nlohmann::json j;
  if (path.starts_with('[')) {
    try {
      j = nlohmann::json::parse(path);
    } catch (const nlohmann::json::exception& e) {
      fail("--tokens {}: not a valid JSON list: {}", path, e.what());
    }
  } else if (!std::filesystem::exists(path)) {
    fail("--tokens {}: no such file (give a file, or the ids inline as a JSON list such as [1,2,3])", path);
  } else {
    j = util::read_json_lenient(path);
  }
  const nlohmann::json& arr = j.is_object() && j.contains("prompt_tokens") ? j["prompt_tokens"] : j;
  if (!arr.is_array()) fail("--tokens {}: not a JSON list of token ids (nor an object with 'prompt_tokens')", path);
  std::vector<int32_t> ids;
  ids.reserve(arr.size());
  for (const auto& x : arr) {
    if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() >= n_vocab)
      fail("--tokens {}: '{}' is not a token id of this model's vocabulary (0 ..< {})", path, x.dump(), n_vocab);
    ids.push_back(x.get<int32_t>());
  }
  return ids;
}

void print_piece(const std::string& s) {
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fflush(stdout);
}

// The sampling settings for the metrics CSV's `# config` lines, after the engine's.
std::vector<std::pair<std::string, std::string>> sampling_settings(const sample::SamplerParams& p, int64_t n_predict) {
  std::vector<std::pair<std::string, std::string>> c;
  c.emplace_back("n_predict", std::to_string(n_predict));
  c.emplace_back("sampling", p.temperature > 0.0f ? "random" : "greedy");
  c.emplace_back("temp", fmt::format("{}", p.temperature));
  c.emplace_back("top_k", fmt::format("{}", p.top_k));
  c.emplace_back("top_p", fmt::format("{}", p.top_p));
  c.emplace_back("min_p", fmt::format("{}", p.min_p));
  c.emplace_back("repeat_penalty", fmt::format("{}", p.repeat_penalty));
  c.emplace_back("repeat_last_n", fmt::format("{}", p.repeat_last_n));
  // Greedy sampling never draws: a seed then changes nothing, and `report --compare` should not list it.
  c.emplace_back("seed", p.temperature > 0.0f ? fmt::format("{}", p.seed) : std::string("unused (greedy)"));
  return c;
}

// The engine for `run` or `chat`: the model flags, the telemetry sinks and the sampling settings as one config.
std::unique_ptr<engine::Engine> load_for(const ModelFlags& m, const TelemetryFlags& t, const sample::SamplerParams& p,
                                         const char* command, int64_t n_predict) {
  engine::EngineConfig cfg = m.config();
  t.apply(cfg, command);
  cfg.telemetry.settings = sampling_settings(p, n_predict);
  return engine::load_engine(cfg);
}

// After the generated text and a blank line: the run's summary on stdout.
void print_summary(engine::Engine& e) {
  const auto s = e.finish();
  std::fflush(stdout);
  fmt::print(stdout, "\n{}", e.format_summary(s));
  std::fflush(stdout);
}

// Generates up to n_predict tokens (< 0: until end of generation or a full context), printing each as it comes.
// Returns whether it stopped on an end-of-generation token. Every printed token except the last is run; the last
// one is run too when `run_last` (chat keeps a complete context for the next turn).
bool generate(model::Generator& g, const tokenizer::Tokenizer& tok, int64_t n_predict, bool run_last) {
  int32_t pending = -1;  // sampled and printed, not yet run
  for (int64_t i = 0; n_predict < 0 || i < n_predict; ++i) {
    if (pending >= 0) {
      if (g.context_full()) {
        fmt::print(stderr, "\n[context full at {} tokens: stopping; raise -c for longer output]\n", g.n_ctx());
        return false;
      }
      g.decode(pending);
      pending = -1;
    }
    const int32_t t = g.sample();
    if (tok.is_eog(t)) return true;
    print_piece(tok.token_to_piece(t));
    pending = t;
  }
  if (pending >= 0 && run_last && !g.context_full()) g.decode(pending);
  return false;
}

void register_run_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "generate text from a prompt, streaming it as it is produced");
  struct Opts {
    ModelFlags model;
    SamplingFlags sampling;
    ChatFlags chat;
    TelemetryFlags telemetry;
    std::string prompt;
    std::string file;
    std::string tokens;
    int64_t n_predict = 128;
    bool chat_mode = false;
  };
  auto o = std::make_shared<Opts>();
  o->model.add_to(*cmd);
  auto* p = cmd->add_option("-p,--prompt", o->prompt, "prompt text");
  auto* f = cmd->add_option("-f,--file", o->file, "read the prompt from a file");
  auto* tk = cmd->add_option("--tokens", o->tokens,
                             "the prompt as token ids, run as given (no BOS added): a JSON list inline ('[1,2,3]') "
                             "or in a file, or a file with 'prompt_tokens' (as `eval --tokens` reads); for prompts "
                             "of an exact length");
  p->excludes(f);
  tk->excludes(p)->excludes(f);
  cmd->add_option("-n,--n-predict", o->n_predict, "tokens to generate (-1: until end of text or a full context)")
      ->capture_default_str();
  cmd->add_flag("--chat", o->chat_mode, "wrap the prompt as one user turn in the model's chat format")->excludes(tk);
  o->sampling.add_to(*cmd);
  o->chat.add_to(*cmd);
  o->telemetry.add_to(*cmd);
  cmd->callback([o] {
    if (o->prompt.empty() && o->file.empty() && o->tokens.empty())
      fail("run: give a prompt with -p TEXT, -f FILE or --tokens FILE.json");
    const std::string text = !o->file.empty() ? read_file(o->file) : o->prompt;
    const auto sp = o->sampling.resolve();
    auto e = load_for(o->model, o->telemetry, sp, "run", o->n_predict);
    const auto tok = tokenizer::Tokenizer::from_metadata(e->file().metadata());
    sample::Sampler sampler(sp, e->info().n_vocab);
    std::vector<int32_t> prompt;
    if (!o->tokens.empty()) {
      prompt = read_prompt_tokens(o->tokens, e->info().n_vocab);
    } else if (o->chat_mode) {
      const auto co = o->chat.resolve(e->file().metadata());
      prompt = tok.encode(chat::render_user_turn(co, text, true, false), true, true);
    } else {
      prompt = tok.encode(text, true, false);
    }
    if (prompt.empty()) fail("run: the prompt has no tokens");
    if (static_cast<int64_t>(prompt.size()) >= e->info().n_ctx)
      fail("the prompt is {} tokens, which does not fit the context of {} tokens (one more is needed to generate): "
           "raise -c or shorten the prompt",
           prompt.size(), e->info().n_ctx);
    model::Generator g(e->model(), sampler, e->hooks());
    if (e->records_routing()) g.record_routing();
    g.prefill(prompt);
    if (!o->tokens.empty()) {
      for (const int32_t t : prompt) print_piece(tok.token_to_piece(t));
    } else if (!o->chat_mode) {
      print_piece(text);
    }
    generate(g, tok, o->n_predict, false);
    print_piece("\n");
    print_summary(*e);
  });
}

void register_chat_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("chat", "interactive chat: one line per user turn, the context kept across turns");
  struct Opts {
    ModelFlags model;
    SamplingFlags sampling;
    ChatFlags chat;
    TelemetryFlags telemetry;
    int64_t n_predict = -1;
  };
  auto o = std::make_shared<Opts>();
  o->model.add_to(*cmd);
  cmd->add_option("-n,--n-predict", o->n_predict, "most tokens per reply (-1: until the end of the reply)")
      ->capture_default_str();
  o->sampling.add_to(*cmd);
  o->chat.add_to(*cmd);
  o->telemetry.add_to(*cmd);
  cmd->callback([o] {
    const auto sp = o->sampling.resolve();
    auto e = load_for(o->model, o->telemetry, sp, "chat", o->n_predict);
    const auto tok = tokenizer::Tokenizer::from_metadata(e->file().metadata());
    sample::Sampler sampler(sp, e->info().n_vocab);
    const auto co = o->chat.resolve(e->file().metadata());
    model::Generator g(e->model(), sampler, e->hooks());
    if (e->records_routing()) g.record_routing();
    const bool tty = isatty(STDIN_FILENO) != 0;
    if (tty) fmt::print(stderr, "type a message and press enter; an empty line or end of input (Ctrl-D) ends the chat\n");
    bool first = true;
    std::string line;
    while (true) {
      if (tty) print_piece("> ");
      if (!std::getline(std::cin, line) || (tty && line.empty())) break;
      if (line.empty()) continue;
      const auto ids = tok.encode(chat::render_user_turn(co, line, first, !first), first, true);
      if (g.n_past() + static_cast<int64_t>(ids.size()) >= g.n_ctx()) {
        fmt::print(stderr, "[the context of {} tokens is full: ending the chat; raise -c for longer chats]\n", g.n_ctx());
        break;
      }
      g.prefill(ids);
      first = false;
      generate(g, tok, o->n_predict, true);
      print_piece("\n");
    }
    print_summary(*e);
  });
}

}  // namespace

void register_run(CLI::App& app) {
  register_run_command(app);
  register_chat_command(app);
}

}  // namespace moetier::cli
