// `moetier run` (generate from a prompt) and `moetier chat` (interactive, the KV cache kept across turns).
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <limits>
#include <memory>
#include <random>
#include <string>

#include <fmt/format.h>

#include "chat/chat_format.h"
#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/generation_flags.h"
#include "cli/interrupt.h"
#include "cli/model_flags.h"
#include "cli/output.h"
#include "engine/engine.h"
#include "model/generator.h"
#include "model/token_input.h"
#include "sample/sampler.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/text_file.h"

namespace moetier::cli {
namespace {

// False when standard output could not be written: generation then stops, and main() reports why.
bool print_piece(const std::string& s) { return write_stdout(s); }

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

// After the generated text and a blank line: the run's summary on stdout. A run that a stop signal ended early
// says so, here and in the metrics CSV's summary.
void print_summary(engine::Engine& e) {
  if (const int sig = stop_signal(); sig != 0) e.recorder().set_interrupted(signal_name(sig));
  const auto s = e.finish();
  print_piece(fmt::format("\n{}", e.format_summary(s)));
}

// Why generate() returned.
enum class Stop { end_of_text, limit, context_full, signal, output_failed };

// Generates up to n_predict tokens (< 0: until end of generation or a full context), printing each as it comes,
// and stops early for a stop signal (checked before every token) or at the first write to stdout that fails.
// Every printed token except the last is run; the last one is run too when `run_last` (chat keeps a complete
// context for the next turn), also after a Ctrl-C, so the context holds exactly the tokens printed.
Stop generate(model::Generator& g, const tokenizer::Tokenizer& tok, int64_t n_predict, bool run_last) {
  int32_t pending = -1;  // sampled and printed, not yet run
  Stop why = Stop::limit;
  for (int64_t i = 0; n_predict < 0 || i < n_predict; ++i) {
    if (stop_signal() != 0) {
      why = Stop::signal;
      break;
    }
    if (pending >= 0) {
      if (g.context_full()) {
        fmt::print(stderr, "\n[context full at {} tokens: stopping; raise -c for longer output]\n", g.n_ctx());
        return Stop::context_full;
      }
      g.decode(pending);
      pending = -1;
    }
    const int32_t t = g.sample();
    if (tok.is_eog(t)) return Stop::end_of_text;
    if (!print_piece(tok.token_to_piece(t))) return Stop::output_failed;
    pending = t;
  }
  // SIGTERM ends the chat too: running the last token for a next turn would only delay that.
  if (pending >= 0 && run_last && !g.context_full() && stop_signal() != SIGTERM) g.decode(pending);
  return why;
}

void register_run_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "generate text from a prompt, streaming it as it is produced");
  cmd->footer("Ctrl-C (or SIGTERM) stops generation: the summary is printed, the --csv summary says "
              "interrupted=SIGINT, and the exit status is 130 (143 for SIGTERM); a second Ctrl-C ends at once. A "
              "standard output that cannot be written stops generation with an error (exit status 1); a reader "
              "that leaves (| head) ends the run quietly (SIGPIPE, 141).");
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
    bool ignore_eos = false;
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
      ->capture_default_str()
      ->transform(n_predict_check());
  cmd->add_flag("--chat", o->chat_mode, "wrap the prompt as one user turn in the model's chat format")->excludes(tk);
  cmd->add_flag("--ignore-eos", o->ignore_eos,
                "never stop at an end-of-generation token: they are banned from sampling (as llama.cpp's flag), so "
                "generation runs to -n or a full context");
  o->sampling.add_to(*cmd);
  o->chat.add_to(*cmd);
  o->telemetry.add_to(*cmd);
  cmd->callback([o] {
    if (o->prompt.empty() && o->file.empty() && o->tokens.empty())
      fail("run: give a prompt with -p TEXT, -f FILE or --tokens FILE.json");
    const std::string text = !o->file.empty() ? util::read_text_file(o->file, "-f") : o->prompt;
    // Read before the model loads, so a malformed list fails at once; the ids are checked against its vocabulary
    // once it is loaded.
    const model::TokenInput ids = o->tokens.empty() ? model::TokenInput{} : model::read_token_input(o->tokens, 0);
    auto sp = o->sampling.resolve();
    auto e = load_for(o->model, o->telemetry, sp, "run", o->n_predict);
    const auto tok = tokenizer::Tokenizer::from_metadata(e->file().metadata());
    if (o->ignore_eos) sp.banned.assign(tok.eog_ids().begin(), tok.eog_ids().end());
    sample::Sampler sampler(sp, e->info().n_vocab);
    std::vector<int32_t> prompt;
    if (!o->tokens.empty()) {
      model::check_token_vocab(ids, "--tokens " + o->tokens, e->info().n_vocab);
      prompt.assign(ids.tokens.begin(), ids.tokens.begin() + ids.n_prompt);  // an oracle case: its prompt_tokens
    } else if (o->chat_mode) {
      const auto co = o->chat.resolve(e->file().metadata(), tok);
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
    // From here Ctrl-C stops the run with its summary; while loading, above, it ends the process at once.
    const StopSignals stop_signals;
    g.set_stop_flag(&stop_flag());
    const bool prefilled = g.prefill(prompt);
    bool printed = true;
    if (!o->tokens.empty()) {
      for (const int32_t t : prompt) printed = printed && print_piece(tok.token_to_piece(t));
    } else if (!o->chat_mode) {
      printed = print_piece(text);
    }
    if (prefilled && printed) generate(g, tok, o->n_predict, false);
    print_piece("\n");
    print_summary(*e);
  });
}

void register_chat_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("chat", "interactive chat: one line per user turn, the context kept across turns");
  cmd->footer("Ctrl-C during a reply ends the reply (the text printed so far stays in the context) and the prompt "
              "returns; Ctrl-C at the prompt ends the chat with the summary (exit status 130); SIGTERM ends it "
              "(143).");
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
      ->capture_default_str()
      ->transform(n_predict_check());
  o->sampling.add_to(*cmd);
  o->chat.add_to(*cmd);
  o->telemetry.add_to(*cmd);
  cmd->callback([o] {
    const auto sp = o->sampling.resolve();
    auto e = load_for(o->model, o->telemetry, sp, "chat", o->n_predict);
    // From here Ctrl-C during a reply ends the reply, and at the prompt the chat; SIGTERM ends the chat. While
    // loading, above, either ends the process at once.
    const StopSignals stop_signals;
    const auto tok = tokenizer::Tokenizer::from_metadata(e->file().metadata());
    sample::Sampler sampler(sp, e->info().n_vocab);
    const auto co = o->chat.resolve(e->file().metadata(), tok);
    model::Generator g(e->model(), sampler, e->hooks());
    if (e->records_routing()) g.record_routing();
    g.set_stop_flag(&stop_flag());
    const bool tty = isatty(STDIN_FILENO) != 0;
    if (tty)
      fmt::print(stderr, "type a message and press enter; Ctrl-C stops a reply; an empty line, end of input (Ctrl-D) "
                         "or Ctrl-C at the prompt ends the chat\n");
    LineReader input;
    bool first = true;
    std::string line;
    while (stop_signal() == 0) {
      if (tty && !print_piece("> ")) break;
      if (input.next(line) != LineReader::Result::line || (tty && line.empty())) break;
      if (line.empty()) continue;
      const auto ids = tok.encode(chat::render_user_turn(co, line, first, !first), first, true);
      if (g.n_past() + static_cast<int64_t>(ids.size()) >= g.n_ctx()) {
        fmt::print(stderr, "[the context of {} tokens is full: ending the chat; raise -c for longer chats]\n", g.n_ctx());
        break;
      }
      const int64_t before = g.n_past();
      if (!g.prefill(ids)) {  // stopped within a long message: drop the whole turn from the context
        g.rewind(before);
        if (stop_signal() != SIGINT) break;
        clear_stop();
        fmt::print(stderr, "[interrupted: the message was dropped from the context]\n");
        continue;
      }
      first = false;
      const Stop why = generate(g, tok, o->n_predict, true);
      if (!print_piece("\n") || why == Stop::output_failed) break;
      if (why == Stop::signal) {
        if (stop_signal() != SIGINT) break;
        clear_stop();
        fmt::print(stderr, "[interrupted: the reply so far stays in the context]\n");
      }
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
