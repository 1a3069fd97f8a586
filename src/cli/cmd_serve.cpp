// `moetier serve`: the OpenAI-compatible HTTP server (server/http_server.h) over one engine, loaded through the same
// EngineConfig as `run`. The flags only map onto the engine's and the server's configuration.
#include <chrono>
#include <csignal>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "chat/chat_format.h"
#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/generation_flags.h"
#include "cli/interrupt.h"
#include "cli/model_flags.h"
#include "engine/engine.h"
#include "model/model.h"
#include "server/http_server.h"
#include "server/scheduler.h"
#include "server/server_config.h"
#include "telemetry/live_stats.h"
#include "tokenizer/tokenizer.h"

namespace moetier::cli {

void register_serve(CLI::App& app) {
  auto* cmd = app.add_subcommand("serve", "serve the model over HTTP: the OpenAI API (/v1/chat/completions, "
                                          "/v1/completions) and a live monitor page at /");
  cmd->footer(
      "Endpoints: POST /v1/chat/completions and /v1/completions (stream true/false), GET /v1/models, GET /health "
      "(503 while loading, then ok), POST /tokenize and /detokenize, GET /metrics (Prometheus), GET / (monitor "
      "page) and GET /v1/moetier/stats (its JSON). The sampling flags and -n are the defaults of a request that "
      "leaves the field out. Ctrl-C (or SIGTERM) stops the server: queued and running "
      "requests end with an error event, the summary is printed, and the exit status is 130 (143).");
  struct Opts {
    ModelFlags model;
    SamplingFlags sampling;
    ChatFlags chat;
    server::ServerConfig server;
    int64_t n_predict = -1;
    int parallel = 1;
  };
  auto o = std::make_shared<Opts>();
  o->model.add_to(*cmd);
  cmd->add_option("--host", o->server.host, "address to listen on (0.0.0.0: every interface)")->capture_default_str();
  cmd->add_option("--port", o->server.port, "port to listen on (0: any free port, logged)")
      ->capture_default_str()
      ->transform(whole<int>(0, 65535));
  cmd->add_option("--parallel", o->parallel,
                  "requests served at once (llama-server's -np), each in its own slot with its own KV cache of -c "
                  "positions")
      ->capture_default_str()
      ->transform(whole<int>(1, model::kMaxSequences));
  cmd->add_option("--api-key", o->server.api_key,
                  "require 'Authorization: Bearer KEY' on every endpoint but / and /health");
  cmd->add_option("--threads-http", o->server.http_threads,
                  "connections served at once (streams, queued requests, monitor polls)")
      ->capture_default_str()
      ->transform(whole<int>(2, 1024));
  cmd->add_option("-n,--n-predict", o->n_predict,
                  "most tokens per reply when a request sets no max_tokens (-1: until the end of the reply or a full "
                  "context)")
      ->capture_default_str()
      ->transform(n_predict_check());
  o->sampling.add_to(*cmd, "the seed of every request that sends none, from 0 to 2^64-1; random or -1: each such "
                          "request draws its own");
  o->chat.add_to(*cmd, false);
  cmd->callback([o] {
    engine::EngineConfig cfg = o->model.config();
    cfg.n_seq = o->parallel;
    cfg.telemetry.command = "serve";
    server::ServerConfig sc = o->server;
    sc.defaults.sampling = o->sampling.p;
    sc.defaults.seed = o->sampling.fixed_seed();  // --seed N: every request without "seed"; else each draws one
    sc.defaults.max_tokens = o->n_predict;
    sc.model_id = std::filesystem::path(cfg.model).filename().string();
    // A client that leaves makes a write fail with EPIPE, which the server handles; the signal would end it.
    std::signal(SIGPIPE, SIG_IGN);

    // Listening before loading: /health answers "loading" (503) meanwhile, as llama-server's does.
    server::HttpServer http(sc);
    const int port = http.start();
    // An IPv6 address goes in brackets in a URL (RFC 3986).
    const std::string host = sc.host.find(':') != std::string::npos ? "[" + sc.host + "]" : sc.host;
    fmt::print(stderr, "listening on http://{}:{} (loading the model)\n", host, port);
    auto e = engine::load_engine(cfg);
    const auto tok = tokenizer::Tokenizer::from_metadata(e->file().metadata());
    const chat::Options co = o->chat.resolve(e->file().metadata(), tok);
    telemetry::LiveStats live(e->hooks(), e->stream(), e->info());
    if (e->stream() == nullptr) live.set_mapped_expert_bytes(telemetry::routed_expert_bytes(e->file()));
    server::ServerStats base;
    base.state = "ok";
    base.model_id = sc.model_id;
    for (const auto& d : e->decisions()) base.model_info.emplace_back(d.topic, d.text);
    server::Scheduler scheduler(e->model(), tok, &live, true, base,
                                [](std::string_view line) { fmt::print(stderr, "{}\n", line); });
    // From here Ctrl-C stops the server cleanly; while loading, above, it ends the process at once.
    const StopSignals stop_signals;
    http.attach(e->model(), tok, co, scheduler, live);
    fmt::print(stderr, "ready: OpenAI API at http://{0}:{1}/v1, monitor at http://{0}:{1}/ ({2} slot{3})\n", host,
               port, o->parallel, o->parallel == 1 ? "" : "s");
    while (stop_signal() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    fmt::print(stderr, "stopping ({}): ending the requests in progress\n", signal_name(stop_signal()));
    scheduler.stop();
    // Their connection threads write the error events out before the server stops (seconds at most: each is
    // waiting for its task's next event).
    http.drain(std::chrono::seconds(2));
    http.stop();
    e->recorder().set_interrupted(signal_name(stop_signal()));
    const auto s = e->finish();
    fmt::print(stderr, "{}", e->format_summary(s));
  });
}

}  // namespace moetier::cli
