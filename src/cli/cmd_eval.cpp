// `moetier eval`: teacher-forced evaluation of a token sequence — perplexity, logits and routing dumps, and the
// comparison with logits saved from another run or engine (KL divergence, top-1 agreement).
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/model_flags.h"
#include "engine/engine.h"
#include "gguf/gguf.h"
#include "model/eval.h"
#include "model/token_input.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/f32_file.h"
#include "util/text_file.h"

namespace moetier::cli {

namespace {

struct EvalArgs {
  ModelFlags model;
  TelemetryFlags telemetry;
  std::string tokens_file;
  std::string text_file;
  std::string prompt;
  std::string logits_out;
  std::string routing_out;
  std::string kl_base;
  std::optional<int64_t> decode_from;  // unset: the input's own prefill length
  bool exact_activations = false;
};

// Creates an output file (empty) before anything loads, so an unwritable path fails at once, not after the
// evaluation; the file is written in full once the evaluation is done.
void check_writable(const char* flag, const std::string& path) {
  if (path.empty()) return;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail("{} {}: cannot write it: {}", flag, path, std::strerror(errno));
}

void run_eval(const EvalArgs& a) {
  const int n_inputs = int{!a.tokens_file.empty()} + int{!a.text_file.empty()} + int{!a.prompt.empty()};
  if (n_inputs != 1) fail("eval: give exactly one of --tokens, -f/--file or -p/--prompt");
  check_writable("--logits-out", a.logits_out);
  check_writable("--routing-out", a.routing_out);

  // The input's length decides the default context, so it is read (and text tokenized) before the engine loads;
  // token ids are checked against the model's vocabulary once it is loaded.
  model::TokenInput in;
  if (!a.tokens_file.empty()) {
    in = model::read_token_input(a.tokens_file, 0);
  } else {
    const gguf::GgufModel file = gguf::GgufModel::open(a.model.model);
    const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_metadata(file.metadata());
    in.tokens = tok.encode(a.text_file.empty() ? a.prompt : util::read_text_file(a.text_file, "-f"), true, false);
    if (in.tokens.empty()) fail("eval: the text encodes to no tokens");
    in.n_prompt = static_cast<int64_t>(in.tokens.size());
    in.n_prefill = std::max<int64_t>(in.n_prompt - 1, 1);
  }
  if (a.decode_from) {
    if (*a.decode_from > static_cast<int64_t>(in.tokens.size())) {
      fail("--decode-from {} is beyond the {} tokens evaluated", *a.decode_from, in.tokens.size());
    }
    in.n_prefill = *a.decode_from;
  }

  engine::EngineConfig cfg = a.model.config();
  const auto n_tokens = static_cast<int64_t>(in.tokens.size());
  if (cfg.n_ctx == 0) cfg.n_ctx = n_tokens;
  if (n_tokens > cfg.n_ctx) fail("eval: {} tokens do not fit the context of {} (raise -c)", n_tokens, cfg.n_ctx);
  if (a.exact_activations) cfg.rounding = quant::ActivationRounding::exact;
  a.telemetry.apply(cfg, "eval");
  cfg.telemetry.settings = {{"eval_tokens", std::to_string(in.tokens.size())},
                            {"eval_prefill", std::to_string(in.n_prefill)}};
  const auto e = engine::load_engine(cfg);
  if (!a.tokens_file.empty()) model::check_token_vocab(in, "--tokens " + a.tokens_file, e->info().n_vocab);
  const model::EvalResult r = model::evaluate(e->model(), in.tokens, in.n_prefill, e->hooks());
  const telemetry::RunSummary summary = e->finish();

  fmt::print("model: {} ({}), {} tokens ({} in the first batch, then one at a time)\n", a.model.model,
             e->info().architecture, r.n_rows, in.n_prefill);
  if (r.n_rows >= 2) {
    fmt::print("perplexity: {:.4f} over {} predictions\n", r.perplexity, r.n_rows - 1);
  } else {
    fmt::print("perplexity: none: one token predicts no token of the input (give at least 2)\n");
  }

  if (!a.logits_out.empty()) {
    util::write_f32(a.logits_out, r.logits);
    fmt::print("logits: {} rows x {} written to {}\n", r.n_rows, r.n_vocab, a.logits_out);
  }
  if (!a.routing_out.empty()) {
    nlohmann::json rows = nlohmann::json::array();
    for (int64_t i = 0; i < r.n_rows; ++i) {
      nlohmann::json layers = nlohmann::json::array();
      for (int64_t l = 0; l < r.n_moe_layers; ++l) {
        nlohmann::json ids = nlohmann::json::array();
        for (int64_t k = 0; k < r.n_expert_used; ++k) {
          ids.push_back(r.routing[static_cast<size_t>((i * r.n_moe_layers + l) * r.n_expert_used + k)]);
        }
        layers.push_back(std::move(ids));
      }
      rows.push_back(std::move(layers));
    }
    std::ofstream out(a.routing_out);
    if (!out) fail("cannot create {}", a.routing_out);
    out << rows.dump() << "\n";
    if (!out) fail("error writing {}", a.routing_out);
    fmt::print("routing: {} rows x {} MoE layers x {} experts written to {}\n", r.n_rows, r.n_moe_layers,
               r.n_expert_used, a.routing_out);
  }
  if (!a.kl_base.empty()) {
    const std::vector<float> base = util::read_f32(a.kl_base);
    if (base.size() != r.logits.size()) {
      fail("--kl-base {} holds {} floats, expected {} ({} rows x n_vocab {})", a.kl_base, base.size(),
           r.logits.size(), r.n_rows, r.n_vocab);
    }
    const model::LogitsComparison c = model::compare_logits(r.logits, base, r.n_vocab);
    fmt::print("KL divergence vs base: mean {:.6f}, max {:.6f} nats; top-1 agreement {}/{} ({:.2f}%)\n", c.mean_kl,
               c.max_kl, c.argmax_same, c.n_rows,
               100.0 * static_cast<double>(c.argmax_same) / static_cast<double>(c.n_rows));
    fmt::print("logits rel error vs base: mean {:.3e}, max {:.3e}\n", c.mean_rel, c.max_rel);
  }
  fmt::print("\n{}", e->format_summary(summary));
}

}  // namespace

void register_eval(CLI::App& app) {
  auto args = std::make_shared<EvalArgs>();
  CLI::App* cmd = app.add_subcommand("eval", "teacher-forced evaluation: perplexity, logits/routing dumps, KL vs saved logits");
  args->model.add_to(*cmd, "context size in tokens (0: the number of tokens evaluated)");
  cmd->add_option("--tokens", args->tokens_file,
                  "token ids, evaluated as given (no BOS added): a JSON list inline ('[1,2,3]') or in a file, or an "
                  "oracle case file {prompt_tokens, greedy_tokens} (evaluates prompt + greedy[:-1], the prompt as one "
                  "batch)");
  cmd->add_option("-f,--file", args->text_file, "text file to tokenize (with BOS) and evaluate");
  cmd->add_option("-p,--prompt", args->prompt, "text to tokenize (with BOS) and evaluate");
  cmd->add_option("--logits-out", args->logits_out, "write logits as float32 rows x n_vocab (little-endian)");
  cmd->add_option("--routing-out", args->routing_out, "write routed expert ids as JSON [row][moe layer][k]");
  cmd->add_option("--kl-base", args->kl_base, "compare with logits saved by --logits-out (or a reference engine)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--decode-from", args->decode_from,
                  "tokens before N run as one batch, the rest one at a time (default: the oracle prompt length; "
                  "for a plain list or text, all but the last token)")
      ->transform(whole<int64_t>(0));
  cmd->add_flag("--exact-activations", args->exact_activations,
                "multiply quantized weights with float activations instead of the default 8-bit activations and "
                "integer dot products (Q8_0/Q8_K, as GGUF reference engines do); slower, for judging that rounding");
  args->telemetry.add_to(*cmd);
  cmd->callback([args] { run_eval(*args); });
}

}  // namespace moetier::cli
