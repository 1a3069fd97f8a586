// The server's request queue and its engine thread. Requests wait in arrival order for a free slot; a free slot is
// chosen by the longest prompt prefix its KV cache already holds (then the least recently used), as llama-server
// does. The engine thread runs the busy slots in turn, one step each (a prefill chunk or a decode token), so with
// `--parallel 2` two replies advance together; the model computes one sequence at a time.
//
// Cancelling (Task::cancelled) works the same for a queued and a running request: the thread drops it at its next
// look, and only that request. Thread-safe: submit(), stats() and stop() from any thread.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <string_view>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "model/generator.h"
#include "model/model.h"
#include "server/server_stats.h"
#include "server/slot.h"
#include "server/task.h"
#include "tokenizer/tokenizer.h"

namespace moetier::server {

class Scheduler {
 public:
  // model.info().n_seq slots, one per sequence. `hooks` sees every step. `base` holds the stats fields the
  // scheduler does not own (state, model id and info), copied into every stats() answer. `log` (may be empty)
  // gets one line per request that ends: its slot, prompt and reused tokens, tokens generated, speed, finish.
  Scheduler(model::Model& model, const tokenizer::Tokenizer& tok, model::StepHooks* hooks, bool record_routing,
            ServerStats base, std::function<void(std::string_view)> log = {});
  ~Scheduler();  // stop()
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a request. After stop(), the task is cancelled at once with an error event.
  void submit(std::shared_ptr<Task> task);
  // Cancels every queued and running request (their handlers get an error event: the server is stopping), then
  // ends the engine thread. Idempotent.
  void stop();
  ServerStats stats() const;

 private:
  void loop();
  void admit();  // under mu_: queued tasks into free slots; drops cancelled queued ones
  void record(const RequestRecord& r);  // under mu_

  std::vector<std::unique_ptr<Slot>> slots_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Task>> queue_;
  bool stopping_ = false;
  ServerStats stats_;
  std::function<void(std::string_view)> log_;
  std::thread thread_;  // last: started when everything above exists
};

}  // namespace moetier::server
