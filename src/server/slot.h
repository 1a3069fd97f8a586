// One of the server's `--parallel` slots: a sequence of the model (its own KV cache) with the generator over it,
// and the request it runs. A slot keeps its context between requests: the next request on it keeps the longest
// common prefix of its prompt with the tokens already in the KV cache (a chat's earlier turns are not computed
// again) and prefills only the rest.
//
// A request runs as steps the scheduler interleaves with the other slots' (one prefill chunk of at most n_batch
// tokens, or one decode token, per step). Each sampled token's text goes through the UTF-8 buffer, the stop
// strings and (for chat) the reasoning parser, and what they release is sent to the request's handler.
// Runs on the scheduler's thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "chat/reasoning.h"
#include "model/generator.h"
#include "model/model.h"
#include "sample/sampler.h"
#include "server/server_stats.h"
#include "server/task.h"
#include "server/text_stream.h"
#include "tokenizer/tokenizer.h"

namespace moetier::server {

class Slot {
 public:
  // Called with the request's record when a request ends, after the slot is free and before the request's last
  // event (done or error) is sent: whoever reads the statistics after a reply arrived finds that reply counted.
  using OnEnd = std::function<void(const RequestRecord&)>;

  // `hooks` (may be null) sees every step; `record_routing` makes the steps report their routing to it.
  Slot(int index, model::Model& model, const tokenizer::Tokenizer& tok, model::StepHooks* hooks, bool record_routing,
       OnEnd on_end);

  int index() const { return index_; }
  bool busy() const { return task_ != nullptr; }
  // How many leading tokens of `prompt` the KV cache already holds (at most prompt.size() - 1: the last prompt
  // token is always run, for its logits).
  int64_t reusable(std::span<const int32_t> prompt) const;
  // When the slot last finished a request (least recently used slots are taken first among equals).
  std::chrono::steady_clock::time_point last_used() const { return last_used_; }

  // Starts `task` (the slot must be free): keeps the reusable prefix, makes the request's sampler.
  void start(std::shared_ptr<Task> task);
  // Runs the request's next step. When the request ends in this step (finished, or found cancelled) the slot is
  // free and on_end has seen its record. Never throws: an engine error ends the request with an error event.
  void step();
  // Ends the running request with an error event carrying `message` (the server is stopping); the slot is free.
  void abort(const std::string& message);

 private:
  void emit(int32_t token);
  // Ends the request: `reason` is its finish reason; a non-empty `error` is sent as its last event instead of the
  // held text and the done event.
  void finish(const std::string& reason, const std::string& error = {});

  int index_;
  OnEnd on_end_;
  model::Model& model_;
  const tokenizer::Tokenizer& tok_;
  sample::Sampler idle_sampler_;  // the generator's sampler between requests (never used to sample); a request
                                  // brings its own (Task::sampler)
  model::Generator gen_;
  std::chrono::steady_clock::time_point last_used_{};

  // The running request.
  std::shared_ptr<Task> task_;
  int64_t reused_ = 0;       // prompt tokens kept from the previous request
  int64_t prefilled_ = 0;    // prompt tokens in the KV cache so far (reused ones included)
  int32_t pending_ = -1;     // sampled, not yet emitted nor run
  int64_t completion_ = 0;   // tokens emitted
  std::chrono::steady_clock::time_point started_, first_token_;
  bool have_first_ = false;
  Utf8Buffer utf8_;
  std::optional<StopMatcher> stop_;
  std::optional<chat::ReasoningParser> parser_;  // chat requests
  chat::ReplyDelta out_;     // released by this step, sent at its end
};

}  // namespace moetier::server
