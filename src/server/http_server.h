// The HTTP side of `moetier serve` (cpp-httplib): the OpenAI endpoints, llama-server's /health, /tokenize and
// /detokenize, Prometheus /metrics, the monitor page (/) and its JSON (/v1/moetier/stats).
//
// It listens before the model is loaded, so /health can answer "loading" (503) while the engine loads; attach()
// then hands it the loaded engine's parts and it answers "ok". Until then every other endpoint is 503.
//
// Replies are written as the engine produces them (chunked transfer): a streamed reply as server-sent events, a
// non-streamed one as a JSON body once the reply is complete. While a request waits (queued, or between tokens) the
// connection carries keep-alive bytes (an SSE comment; JSON whitespace before a non-streamed body, which JSON
// allows): a write that fails means the client is gone, and its request is cancelled, queued or running.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "server/server_config.h"

namespace moetier::model {
class Model;
}
namespace moetier::tokenizer {
class Tokenizer;
}
namespace moetier::telemetry {
class LiveStats;
}

namespace moetier::server {

class Scheduler;

class HttpServer {
 public:
  explicit HttpServer(ServerConfig cfg);
  ~HttpServer();  // stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds cfg.host:cfg.port and starts answering on a thread of its own. Throws moetier::Error naming the address
  // when it cannot bind (in use, not an address of this machine). Returns the port (the one chosen for port 0).
  int start();
  // From now on the model endpoints are served by these (which must outlive the server or its stop()).
  // `chat` is the chat format resolved for the model (ServerConfig::chat is replaced by it).
  void attach(const model::Model& model, const tokenizer::Tokenizer& tok, const chat::Options& chat,
              Scheduler& scheduler, const telemetry::LiveStats& live);
  // Waits until every completion's reply has been written out, or `limit` has passed: after the scheduler has ended
  // every request (an error event for those in progress), their connection threads still have to write it, and
  // stop() ends the replies still being written where they are (httplib stops calling a chunked reply's provider).
  void drain(std::chrono::milliseconds limit);
  // Stops listening and waits for the connection threads (call after the scheduler has ended every request, and
  // drain()).
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace moetier::server
