// What `moetier serve` is told by its flags beyond the engine's configuration: where it listens, who may call it,
// and what a request gets for the fields it leaves out.
#pragma once

#include <string>

#include "chat/chat_format.h"
#include "server/openai_request.h"

namespace moetier::server {

struct ServerConfig {
  std::string host = "127.0.0.1";  // loopback by default: serving a LAN is a choice (--host 0.0.0.0)
  int port = 8080;                 // 0: any free port (the log says which)
  std::string api_key;             // empty: no key; else every endpoint but / and /health needs "Bearer KEY"
  int http_threads = 8;            // connections served at once (streams, stats polls, queued requests)
  size_t max_body_bytes = 16u << 20;  // larger request bodies are answered 413
  RequestDefaults defaults;        // the sampling flags and -n
  chat::Options chat;              // the chat format (resolved from the model or --chat-format) and --no-think
  std::string model_id;            // the name /v1/models lists and replies carry (the model's file name)
};

}  // namespace moetier::server
