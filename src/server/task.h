// One request on its way through the server: what the HTTP handler parsed and tokenized, and the channel the
// engine's thread sends the reply through (deltas as they are produced, then the end). The handler thread waits on
// the channel and writes to the client; either side may cancel (the client left, the server stops).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "chat/reasoning.h"
#include "sample/sampler.h"
#include "server/openai_request.h"
#include "server/openai_response.h"

namespace moetier::server {

// What the engine's thread sends a waiting handler.
struct TaskEvent {
  enum class Kind { delta, done, error };
  Kind kind = Kind::delta;
  chat::ReplyDelta delta;     // delta: text released (chat: split into reasoning and content; completions: content)
  std::string finish_reason;  // done: "stop" or "length"
  Usage usage;                // done
  std::string message;        // error: what went wrong (the reply ends)

  static TaskEvent text(chat::ReplyDelta d) {
    TaskEvent e;
    e.delta = std::move(d);
    return e;
  }
  static TaskEvent done(std::string finish_reason, const Usage& usage) {
    TaskEvent e;
    e.kind = Kind::done;
    e.finish_reason = std::move(finish_reason);
    e.usage = usage;
    return e;
  }
  static TaskEvent error(std::string message) {
    TaskEvent e;
    e.kind = Kind::error;
    e.message = std::move(message);
    return e;
  }
};

struct Task {
  int64_t id = 0;
  CompletionRequest req;
  std::vector<int32_t> prompt;  // [n_prompt] token ids, checked to fit the context with room for one token
  // The request's sampler, made (and its settings checked against the vocabulary) by the handler, so a bad
  // setting is a 400 before the request is queued; its candidate buffers are allocated then, not per token.
  std::unique_ptr<sample::Sampler> sampler;
  chat::Format format = chat::Format::chatml;       // how the reply is split (chat requests)
  chat::ReplyStart reply_start = chat::ReplyStart::answer;
  std::chrono::steady_clock::time_point arrived = std::chrono::steady_clock::now();

  // Raised by the handler when the client is gone, or by the server when it stops: the engine's thread drops the
  // task at its next step (or before it starts), and no more events are sent.
  std::atomic<bool> cancelled{false};

  // Engine thread -> handler.
  void send(TaskEvent e) {
    {
      std::lock_guard lock(mu_);
      events_.push_back(std::move(e));
    }
    cv_.notify_one();
  }
  // Waits up to `timeout` for events and moves them all into `out` (cleared first). Returns false on timeout.
  bool wait(std::deque<TaskEvent>& out, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    out.clear();
    if (!cv_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return false;
    out.swap(events_);
    return true;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<TaskEvent> events_;
};

}  // namespace moetier::server
