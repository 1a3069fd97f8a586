#include "server/scheduler.h"

#include <chrono>
#include <utility>

#include <fmt/format.h>

namespace moetier::server {
namespace {

// The record of a request that ended before it had a slot (its client left, or the server stopped).
RequestRecord cancelled_in_queue(const Task& t) {
  RequestRecord r;
  r.id = t.id;
  r.endpoint = t.req.chat ? "chat" : "completions";
  r.prompt_tokens = static_cast<int64_t>(t.prompt.size());
  r.queue_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t.arrived).count();
  r.finish_reason = "cancelled";
  return r;
}

}  // namespace

Scheduler::Scheduler(model::Model& model, const tokenizer::Tokenizer& tok, model::StepHooks* hooks,
                     bool record_routing, ServerStats base, std::function<void(std::string_view)> log)
    : stats_(std::move(base)), log_(std::move(log)) {
  const int n = model.info().n_seq;
  // A slot's request is counted before its reply's last event goes out (Slot::OnEnd). The engine thread holds no
  // lock while a slot steps, so it takes mu_ here.
  auto on_end = [this](const RequestRecord& r) {
    std::lock_guard lock(mu_);
    record(r);
  };
  for (int i = 0; i < n; ++i) slots_.push_back(std::make_unique<Slot>(i, model, tok, hooks, record_routing, on_end));
  stats_.n_slots = n;
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() { stop(); }

void Scheduler::submit(std::shared_ptr<Task> task) {
  {
    std::lock_guard lock(mu_);
    if (!stopping_) {
      queue_.push_back(std::move(task));
      stats_.queue_depth = static_cast<int64_t>(queue_.size());
      cv_.notify_one();
      return;
    }
  }
  task->cancelled = true;
  task->send(TaskEvent::error("the server is shutting down"));
}

void Scheduler::stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

ServerStats Scheduler::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void Scheduler::record(const RequestRecord& r) {
  ++stats_.requests_total;
  // Only the engine thread starts and ends requests on slots, and this runs on it.
  int64_t active = 0;
  for (const auto& s : slots_) active += s->busy() ? 1 : 0;
  stats_.active = active;
  stats_.prompt_tokens_total += r.prompt_tokens;
  stats_.reused_tokens_total += r.reused_tokens;
  stats_.completion_tokens_total += r.completion_tokens;
  stats_.recent.push_back(r);
  if (stats_.recent.size() > kRecentRequests) stats_.recent.erase(stats_.recent.begin());
  if (!log_) return;
  if (r.slot < 0) {
    log_(fmt::format("request {} ({}): {} after {:.0f} ms in the queue", r.id, r.endpoint, r.finish_reason, r.queue_ms));
    return;
  }
  // A rate needs two tokens: the first one's time is the prefill's (TTFT).
  const std::string rate = r.completion_tokens > 1 ? fmt::format(" at {:.1f} tok/s", r.decode_tps) : "";
  log_(fmt::format("request {} ({}): slot {}, prompt {} tokens ({} reused from the slot's KV cache), {} generated{}, "
                   "first token after {:.1f} ms ({:.1f} ms queued), finish {}",
                   r.id, r.endpoint, r.slot, r.prompt_tokens, r.reused_tokens, r.completion_tokens, rate, r.ttft_ms,
                   r.queue_ms, r.finish_reason));
}

void Scheduler::admit() {
  for (auto it = queue_.begin(); it != queue_.end();) {
    if ((*it)->cancelled.load(std::memory_order_relaxed)) {  // the client left while waiting
      record(cancelled_in_queue(**it));
      it = queue_.erase(it);
      continue;
    }
    Slot* best = nullptr;
    int64_t best_reuse = -1;
    for (auto& s : slots_) {
      if (s->busy()) continue;
      const int64_t reuse = s->reusable((*it)->prompt);
      if (reuse > best_reuse || (reuse == best_reuse && s->last_used() < best->last_used())) {
        best = s.get();
        best_reuse = reuse;
      }
    }
    if (best == nullptr) break;  // no free slot: the rest keep waiting, in order
    best->start(std::move(*it));
    it = queue_.erase(it);
  }
  int64_t active = 0;
  for (const auto& s : slots_) active += s->busy() ? 1 : 0;
  stats_.active = active;
  stats_.queue_depth = static_cast<int64_t>(queue_.size());
}

void Scheduler::loop() {
  for (;;) {
    bool any_busy = false;
    {
      std::unique_lock lock(mu_);
      if (stopping_) break;
      admit();
      for (const auto& s : slots_) any_busy = any_busy || s->busy();
      if (!any_busy) {
        // Nothing to run: sleep until a request arrives. The timeout lets a queued request whose client left be
        // dropped from the statistics without waiting for the next arrival.
        cv_.wait_for(lock, std::chrono::milliseconds(200));
        continue;
      }
    }
    // One step of each busy slot, outside the lock: handlers keep submitting and reading stats meanwhile.
    for (auto& s : slots_) {
      if (s->busy()) s->step();
    }
  }
  // Stopping: every request still here ends with an error event, so its handler closes its stream. Once
  // stopping_ is set nothing is queued any more, and the slots are this thread's.
  {
    std::lock_guard lock(mu_);
    for (auto& t : queue_) {
      t->cancelled = true;
      record(cancelled_in_queue(*t));
      t->send(TaskEvent::error("the server is shutting down"));
    }
    queue_.clear();
    stats_.queue_depth = 0;
  }
  for (auto& s : slots_) {
    if (s->busy()) s->abort("the server is shutting down");  // on_end takes mu_
  }
}

}  // namespace moetier::server
