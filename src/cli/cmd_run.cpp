// `moetier run` (generate from a prompt) and `moetier chat` (interactive, the KV cache kept across turns).
#include <unistd.h>

#include <chrono>
#include <cstdio>
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
#include "model/generator.h"
#include "sample/sampler.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

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

void print_piece(const std::string& s) {
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fflush(stdout);
}

void print_speed(const model::Generator& g, const moe::StreamingExperts* stream) {
  auto tps = [](int64_t n, double s) { return s > 0 ? static_cast<double>(n) / s : 0.0; };
  fmt::print(stderr, "prefill: {} tokens in {:.2f} s ({:.1f} tok/s) | decode: {} tokens in {:.2f} s ({:.1f} tok/s)\n",
             g.prefill_tokens, g.prefill_seconds, tps(g.prefill_tokens, g.prefill_seconds), g.decode_tokens,
             g.decode_seconds, tps(g.decode_tokens, g.decode_seconds));
  if (stream == nullptr) return;
  const auto& t = stream->totals();
  const double lookups = static_cast<double>(t.hits + t.misses);
  const double steps = static_cast<double>(g.decode_tokens + (g.prefill_tokens > 0 ? 1 : 0));
  fmt::print(stderr,
             "experts: hit rate {:.1f}% ({} hits, {} misses), {:.1f} MiB read ({:.1f} MiB per step), {} evictions, "
             "{:.1f} MiB re-read; I/O {:.0f} ms over lanes, stall {:.0f} ms, cache management {:.0f} ms\n",
             lookups > 0 ? 100.0 * static_cast<double>(t.hits) / lookups : 0.0, t.hits, t.misses,
             static_cast<double>(t.bytes_read) / 1048576.0,
             steps > 0 ? static_cast<double>(t.bytes_read) / 1048576.0 / steps : 0.0, t.evictions,
             static_cast<double>(t.reread_bytes) / 1048576.0, t.io_ms, t.stall_ms, t.mgmt_ms);
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
    std::string prompt;
    std::string file;
    int64_t n_predict = 128;
    bool chat_mode = false;
  };
  auto o = std::make_shared<Opts>();
  o->model.add_to(*cmd);
  auto* p = cmd->add_option("-p,--prompt", o->prompt, "prompt text");
  auto* f = cmd->add_option("-f,--file", o->file, "read the prompt from a file");
  p->excludes(f);
  cmd->add_option("-n,--n-predict", o->n_predict, "tokens to generate (-1: until end of text or a full context)")
      ->capture_default_str();
  cmd->add_flag("--chat", o->chat_mode, "wrap the prompt as one user turn in the model's chat format");
  o->sampling.add_to(*cmd);
  o->chat.add_to(*cmd);
  cmd->callback([o] {
    if (o->prompt.empty() && o->file.empty()) fail("run: give a prompt with -p TEXT or -f FILE");
    const std::string text = o->file.empty() ? o->prompt : read_file(o->file);
    auto lm = load(o->model);
    const auto tok = tokenizer::Tokenizer::from_metadata(lm.file->metadata());
    sample::Sampler sampler(o->sampling.resolve(), lm.model->info().n_vocab);
    std::vector<int32_t> prompt;
    if (o->chat_mode) {
      const auto co = o->chat.resolve(lm.file->metadata());
      prompt = tok.encode(chat::render_user_turn(co, text, true, false), true, true);
    } else {
      prompt = tok.encode(text, true, false);
    }
    if (prompt.empty()) fail("run: the prompt encodes to no tokens");
    if (static_cast<int64_t>(prompt.size()) >= lm.model->info().n_ctx)
      fail("the prompt is {} tokens, which does not fit the context of {} tokens (one more is needed to generate): "
           "raise -c or shorten the prompt",
           prompt.size(), lm.model->info().n_ctx);
    StreamStepHooks hooks(lm.stream);
    model::Generator g(*lm.model, sampler, &hooks);
    g.prefill(prompt);
    if (!o->chat_mode) print_piece(text);
    generate(g, tok, o->n_predict, false);
    print_piece("\n");
    print_speed(g, lm.stream);
  });
}

void register_chat_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("chat", "interactive chat: one line per user turn, the context kept across turns");
  struct Opts {
    ModelFlags model;
    SamplingFlags sampling;
    ChatFlags chat;
    int64_t n_predict = -1;
  };
  auto o = std::make_shared<Opts>();
  o->model.add_to(*cmd);
  cmd->add_option("-n,--n-predict", o->n_predict, "most tokens per reply (-1: until the end of the reply)")
      ->capture_default_str();
  o->sampling.add_to(*cmd);
  o->chat.add_to(*cmd);
  cmd->callback([o] {
    auto lm = load(o->model);
    const auto tok = tokenizer::Tokenizer::from_metadata(lm.file->metadata());
    sample::Sampler sampler(o->sampling.resolve(), lm.model->info().n_vocab);
    const auto co = o->chat.resolve(lm.file->metadata());
    StreamStepHooks hooks(lm.stream);
    model::Generator g(*lm.model, sampler, &hooks);
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
    print_speed(g, lm.stream);
  });
}

}  // namespace

void register_run(CLI::App& app) {
  register_run_command(app);
  register_chat_command(app);
}

}  // namespace moetier::cli
