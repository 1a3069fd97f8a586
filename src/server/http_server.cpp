#include "server/http_server.h"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "chat/conversation.h"
#include "model/model.h"
#include "server/monitor_page.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/scheduler.h"
#include "server/stats_export.h"
#include "server/task.h"
#include "telemetry/live_stats.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace moetier::server {
namespace {

// How long a waiting handler goes without writing: the keep-alive byte that finds a departed client. The first
// write after the peer closed still succeeds (the peer answers it with a reset), the second fails, so a client that
// leaves is noticed within two of these.
constexpr std::chrono::milliseconds kHeartbeat{100};

void send_json(httplib::Response& res, int status, const nlohmann::json& j) {
  res.status = status;
  res.set_content(to_body(j), "application/json");
}

void send_error(httplib::Response& res, int status, const std::string& message) {
  send_json(res, status, error_object(status, message));
}

// Where the prompt leaves the reply, for the reasoning parser: what the rendered prompt ends with.
chat::ReplyStart reply_start(const chat::Options& o, const std::string& prompt) {
  switch (o.format) {
    case chat::Format::chatml:
      if (o.no_think) return chat::ReplyStart::answer;
      return prompt.ends_with("<think>\n") ? chat::ReplyStart::thought : chat::ReplyStart::open;
    case chat::Format::harmony: return o.no_think ? chat::ReplyStart::answer : chat::ReplyStart::open;
    case chat::Format::mistral:
    case chat::Format::gemma:
    case chat::Format::gemma4: return chat::ReplyStart::answer;
  }
  return chat::ReplyStart::open;
}

}  // namespace

struct HttpServer::Impl {
  ServerConfig cfg;
  httplib::Server svr;
  std::thread listener;
  std::atomic<bool> ready{false};
  const model::Model* model = nullptr;
  const tokenizer::Tokenizer* tok = nullptr;
  Scheduler* scheduler = nullptr;
  const telemetry::LiveStats* live = nullptr;
  std::atomic<int64_t> next_id{1};
  int64_t started_unix = 0;
  // Completions submitted whose reply is not yet written out (drain()): counted from before the submission until
  // httplib destroys the response, after its last write.
  std::atomic<int64_t> replies_in_flight{0};
  struct InFlight {
    std::atomic<int64_t>& n;
    explicit InFlight(std::atomic<int64_t>& count) : n(count) { ++n; }
    ~InFlight() { --n; }
    InFlight(const InFlight&) = delete;
    InFlight& operator=(const InFlight&) = delete;
  };

  explicit Impl(ServerConfig c) : cfg(std::move(c)) {}

  bool check_ready(httplib::Response& res) {
    if (ready.load()) return true;
    send_error(res, 503, "the model is loading: retry when GET /health answers ok");
    return false;
  }

  void routes();
  void completion(const std::string& body, httplib::Response& res, bool chat);
  std::shared_ptr<Task> make_task(const std::string& body, bool chat);
  // Registers a POST endpoint that reads its body itself: httplib would otherwise treat the body of a request
  // sent as application/x-www-form-urlencoded (curl -d without -H 'Content-Type: application/json') as a form
  // and refuse it past 8 KiB with a 413. The body limit (ServerConfig::max_body_bytes) still applies.
  void post(const std::string& path, std::function<void(const std::string&, httplib::Response&)> handler);
};

void HttpServer::Impl::post(const std::string& path,
                            std::function<void(const std::string&, httplib::Response&)> handler) {
  svr.Post(path, [handler](const httplib::Request&, httplib::Response& res, const httplib::ContentReader& reader) {
    std::string body;
    reader([&](const char* data, size_t n) {
      body.append(data, n);
      return true;
    });
    handler(body, res);
  });
  // The endpoint exists: another method is a 405, not a 404.
  svr.Get(path, [](const httplib::Request& req, httplib::Response& res) {
    send_error(res, 405, fmt::format("{} takes POST", req.path));
    res.set_header("Allow", "POST");
  });
}

std::shared_ptr<Task> HttpServer::Impl::make_task(const std::string& body, bool chat) {
  auto t = std::make_shared<Task>();
  t->id = next_id.fetch_add(1);
  t->req = chat ? parse_chat_request(body, cfg.defaults) : parse_completion_request(body, cfg.defaults);
  const int64_t n_vocab = model->info().n_vocab;
  if (chat) {
    chat::Options o = cfg.chat;
    if (t->req.enable_thinking) o.no_think = !*t->req.enable_thinking;
    if (!t->req.reasoning_effort.empty()) o.reasoning_effort = t->req.reasoning_effort;
    std::string text;
    try {
      text = chat::render_conversation(o, t->req.messages);
    } catch (const Error& e) {
      throw RequestError(400, fmt::format("messages: {}", e.what()));
    }
    t->prompt = tok->encode(text, true, true);
    t->format = o.format;
    t->reply_start = reply_start(o, text);
  } else if (!t->req.prompt_tokens.empty()) {
    for (const int32_t id : t->req.prompt_tokens) {
      if (id < 0 || id >= n_vocab)
        throw RequestError(400, fmt::format("prompt: token id {} is outside the vocabulary (0..{})", id, n_vocab - 1));
    }
    t->prompt = t->req.prompt_tokens;
  } else {
    t->prompt = tok->encode(t->req.prompt, true, false);
  }
  try {
    t->sampler = std::make_unique<sample::Sampler>(t->req.sampling, n_vocab);
  } catch (const Error& e) {
    throw RequestError(400, e.what());  // a logit_bias id outside the vocabulary
  }
  const auto n = static_cast<int64_t>(t->prompt.size());
  const int64_t n_ctx = model->info().n_ctx;
  if (n == 0) throw RequestError(400, "the prompt has no tokens");
  if (n >= n_ctx) {
    throw RequestError(400, fmt::format("the prompt is {} tokens, which does not fit the context of {} tokens (one "
                                        "more is needed to generate): shorten it, or start the server with a larger -c",
                                        n, n_ctx));
  }
  return t;
}

void HttpServer::Impl::completion(const std::string& body, httplib::Response& res, bool chat) {
  if (!check_ready(res)) return;
  std::shared_ptr<Task> task;
  try {
    task = make_task(body, chat);
  } catch (const RequestError& e) {
    send_error(res, e.status(), e.what());
    return;
  }
  const ReplyId rid{fmt::format("{}-{}-{}", chat ? "chatcmpl" : "cmpl", started_unix, task->id),
                    std::chrono::duration_cast<std::chrono::seconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count(),
                    cfg.model_id};
  const bool stream = task->req.stream;
  const bool include_usage = task->req.include_usage;
  const auto in_flight = std::make_shared<InFlight>(replies_in_flight);  // held by `release` below
  scheduler->submit(task);

  // The provider runs on this connection's thread after the headers are sent, until it returns false or calls
  // done(). `state` lives as long as the provider (httplib copies the lambda).
  struct State {
    bool first = true;
    chat::ReplyDelta total;  // non-streamed: the whole reply
    std::deque<TaskEvent> events;
    std::chrono::steady_clock::time_point last_write = std::chrono::steady_clock::now();
  };
  auto state = std::make_shared<State>();
  const auto provider = [task, state, rid, stream, include_usage, chat](size_t, httplib::DataSink& sink) -> bool {
    const auto write = [&](std::string_view s) {
      state->last_write = std::chrono::steady_clock::now();
      if (sink.write(s.data(), s.size())) return true;
      task->cancelled = true;  // the client is gone
      return false;
    };
    if (stream && chat && state->first) {
      state->first = false;
      if (!write(sse_event(chat_chunk(rid, {}, true)))) return false;
    }
    const char* keep_alive = stream ? ": keep-alive\n\n" : " ";
    if (!task->wait(state->events, kHeartbeat)) return write(keep_alive);
    for (TaskEvent& e : state->events) {
      switch (e.kind) {
        case TaskEvent::Kind::delta:
          if (stream) {
            const auto j = chat ? chat_chunk(rid, e.delta, false) : text_chunk(rid, e.delta.content);
            if (!write(sse_event(j))) return false;
          } else {
            state->total.reasoning += e.delta.reasoning;
            state->total.content += e.delta.content;
            // Nothing else is written until the reply is whole: a keep-alive now and then still finds a client
            // that left while the tokens flow.
            if (std::chrono::steady_clock::now() - state->last_write >= kHeartbeat && !write(keep_alive)) return false;
          }
          break;
        case TaskEvent::Kind::done:
          if (stream) {
            const auto j = chat ? chat_chunk(rid, {}, false, e.finish_reason) : text_chunk(rid, "", e.finish_reason);
            if (!write(sse_event(j))) return false;
            if (include_usage && !write(sse_event(usage_chunk(rid, chat, e.usage)))) return false;
            if (!write(kSseDone)) return false;
          } else {
            const auto j = chat ? chat_completion(rid, state->total, e.finish_reason, e.usage)
                                : text_completion(rid, state->total.content, e.finish_reason, e.usage);
            if (!write(to_body(j))) return false;
          }
          sink.done();
          return true;
        case TaskEvent::Kind::error: {
          // Headers (200) are already sent: the error goes in the body, as OpenAI's streams carry one.
          const auto j = error_object(500, e.message);
          if (!write(stream ? sse_event(j) : to_body(j))) return false;
          if (stream) write(kSseDone);
          sink.done();
          return true;
        }
      }
    }
    return true;
  };
  // Called when the reply ends, normally or because the connection did: either way the request is over. It holds
  // `in_flight` until httplib destroys the response, after the reply's last write.
  const auto release = [task, in_flight](bool) {
    task->cancelled = true;
    (void)in_flight;
  };
  res.set_chunked_content_provider(stream ? "text/event-stream" : "application/json", provider, release);
  if (stream) res.set_header("Cache-Control", "no-cache");
}

void HttpServer::Impl::routes() {
  svr.set_payload_max_length(cfg.max_body_bytes);
  svr.set_keep_alive_timeout(1);  // seconds: an idle keep-alive connection does not hold up shutdown longer
  svr.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    // A browser's CORS preflight (OPTIONS) carries no credentials by design.
    if (cfg.api_key.empty() || req.path == "/" || req.path == "/health" || req.method == "OPTIONS")
      return httplib::Server::HandlerResponse::Unhandled;
    const std::string auth = req.get_header_value("Authorization");
    if (auth == "Bearer " + cfg.api_key) return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, 401, auth.empty() ? "an API key is required: send the header 'Authorization: Bearer KEY'"
                                      : "the API key is not valid");
    return httplib::Server::HandlerResponse::Handled;
  });
  svr.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;  // a handler's own answer
    if (res.status == 404) {
      send_error(res, 404, fmt::format("no endpoint {} {}", req.method, req.path));
    } else if (res.status == 413) {
      send_error(res, 413, "the request body is too large");
    } else {
      send_error(res, res.status, fmt::format("HTTP status {}", res.status));
    }
  });
  svr.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(res, 500, what);
  });

  svr.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (ready.load()) {
      send_json(res, 200, {{"status", "ok"}});
    } else {
      send_json(res, 503, {{"status", "loading"}, {"error", error_object(503, "the model is loading")["error"]}});
    }
  });
  svr.Get("/", [](const httplib::Request&, httplib::Response& res) {
    const std::string_view page = monitor_page();
    res.set_content(page.data(), page.size(), "text/html; charset=utf-8");
  });
  svr.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    nlohmann::json m = {{"id", cfg.model_id}, {"object", "model"}, {"created", started_unix}, {"owned_by", "moetier"}};
    send_json(res, 200, {{"object", "list"}, {"data", nlohmann::json::array({m})}});
  });
  post("/v1/chat/completions", [this](const std::string& body, httplib::Response& res) { completion(body, res, true); });
  post("/v1/completions", [this](const std::string& body, httplib::Response& res) { completion(body, res, false); });
  post("/tokenize", [this](const std::string& body, httplib::Response& res) {
    if (!check_ready(res)) return;
    try {
      const TokenizeRequest t = parse_tokenize_request(body);
      send_json(res, 200, {{"tokens", tok->encode(t.content, t.add_special, t.parse_special)}});
    } catch (const RequestError& e) {
      send_error(res, e.status(), e.what());
    }
  });
  post("/detokenize", [this](const std::string& body, httplib::Response& res) {
    if (!check_ready(res)) return;
    try {
      const auto ids = parse_detokenize_request(body, model->info().n_vocab);
      // The ids of a whole text (what /tokenize gives): the space a SentencePiece vocabulary puts before it goes.
      send_json(res, 200, {{"content", tok->decode(ids, {.strip_space_prefix = true})}});
    } catch (const RequestError& e) {
      send_error(res, e.status(), e.what());
    }
  });
  svr.Get("/v1/moetier/stats", [this](const httplib::Request&, httplib::Response& res) {
    if (!check_ready(res)) return;
    send_json(res, 200, stats_json(scheduler->stats(), live->snapshot()));
  });
  svr.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    if (!check_ready(res)) return;
    res.set_content(prometheus_text(scheduler->stats(), live->snapshot()), "text/plain; version=0.0.4");
  });
}

HttpServer::HttpServer(ServerConfig cfg) : impl_(std::make_unique<Impl>(std::move(cfg))) {
  impl_->started_unix =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  const int threads = impl_->cfg.http_threads;
  impl_->svr.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  // httplib's default also sets SO_REUSEPORT, with which a second server binds the same port and the kernel
  // shares the connections between the two: SO_REUSEADDR alone lets a restart take the port back from TIME_WAIT
  // and makes a port in use an error.
  impl_->svr.set_socket_options([](socket_t sock) {
    const int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  // Browser clients on other origins (web UIs calling the API directly) may read the replies, as llama-server
  // allows; the API key, when set, still guards every endpoint.
  impl_->svr.set_default_headers({{"Access-Control-Allow-Origin", "*"}});
  impl_->svr.Options(".*", [](const httplib::Request&, httplib::Response& res) {
    res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
    res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
    res.status = 204;
  });
  impl_->routes();
}

HttpServer::~HttpServer() { stop(); }

int HttpServer::start() {
  Impl& s = *impl_;
  int port = s.cfg.port;
  if (port == 0) {
    port = s.svr.bind_to_any_port(s.cfg.host);
    if (port < 0) fail("--host {}: cannot listen on any port of this address", s.cfg.host);
  } else if (!s.svr.bind_to_port(s.cfg.host, port)) {
    fail("cannot listen on {}:{}: the port is in use or the address is not one of this machine's (--host, --port)",
         s.cfg.host, port);
  }
  s.listener = std::thread([&s] { s.svr.listen_after_bind(); });
  // stop() does nothing to a server that is not running yet, and a load that fails at once would stop it before
  // it runs, leaving the listener to run forever: return only once it is.
  for (int i = 0; i < 5000 && !s.svr.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return port;
}

void HttpServer::attach(const model::Model& model, const tokenizer::Tokenizer& tok, const chat::Options& chat,
                        Scheduler& scheduler, const telemetry::LiveStats& live) {
  impl_->cfg.chat = chat;
  impl_->model = &model;
  impl_->tok = &tok;
  impl_->scheduler = &scheduler;
  impl_->live = &live;
  impl_->ready = true;
}

void HttpServer::drain(std::chrono::milliseconds limit) {
  if (!impl_) return;
  const auto until = std::chrono::steady_clock::now() + limit;
  while (impl_->replies_in_flight.load() > 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void HttpServer::stop() {
  if (!impl_) return;
  impl_->svr.stop();
  if (impl_->listener.joinable()) impl_->listener.join();
}

}  // namespace moetier::server
