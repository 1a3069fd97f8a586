#include "server/slot.h"

#include <algorithm>
#include <exception>
#include <utility>

namespace moetier::server {
namespace {

double ms_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

sample::SamplerParams greedy() {
  sample::SamplerParams p;
  p.temperature = 0.0f;
  return p;
}

}  // namespace

Slot::Slot(int index, model::Model& model, const tokenizer::Tokenizer& tok, model::StepHooks* hooks,
           bool record_routing, OnEnd on_end)
    : index_(index),
      on_end_(std::move(on_end)),
      model_(model),
      tok_(tok),
      idle_sampler_(greedy(), model.info().n_vocab),
      gen_(model, idle_sampler_, hooks, index) {
  if (record_routing) gen_.record_routing();
}

int64_t Slot::reusable(std::span<const int32_t> prompt) const {
  const auto h = gen_.history();
  const size_t limit = std::min(h.size(), prompt.empty() ? size_t{0} : prompt.size() - 1);
  size_t n = 0;
  while (n < limit && h[n] == prompt[n]) ++n;
  // A model with recurrent layers keeps its whole context or nothing (Model::can_keep): a shorter common prefix
  // would carry the previous request's state, so it is not reused.
  if (!model_.can_keep(static_cast<int64_t>(n), static_cast<int64_t>(h.size()))) return 0;
  return static_cast<int64_t>(n);
}

void Slot::start(std::shared_ptr<Task> task) {
  task_ = std::move(task);
  const CompletionRequest& r = task_->req;
  reused_ = r.cache_prompt ? reusable(task_->prompt) : 0;
  gen_.rewind(reused_);
  prefilled_ = reused_;
  pending_ = -1;
  completion_ = 0;
  started_ = std::chrono::steady_clock::now();
  have_first_ = false;
  utf8_ = Utf8Buffer();
  stop_.emplace(r.stop);
  if (r.chat) {
    parser_.emplace(task_->format, task_->reply_start);
  } else {
    parser_.reset();
  }
  gen_.set_sampler(*task_->sampler);
  out_ = {};
}

void Slot::emit(int32_t token) {
  // Harmony replies keep control tokens' text (the channel markers) for the reasoning parser, which never shows it;
  // otherwise a control token shows nothing, as `run` prints it (Qwen's <think> markers are user-defined tokens,
  // whose text always shows).
  const bool markers = parser_.has_value() && task_->format == chat::Format::harmony;
  const std::string piece = tok_.token_to_piece(token, markers);
  const StopMatcher::Result s = stop_->push(utf8_.push(piece));
  if (parser_) {
    chat::ReplyDelta d = parser_->feed(s.text);
    out_.reasoning += d.reasoning;
    out_.content += d.content;
  } else {
    out_.content += s.text;
  }
}

void Slot::finish(const std::string& reason, const std::string& error) {
  const auto now = std::chrono::steady_clock::now();
  // The request's last events, held until its record is counted.
  std::vector<TaskEvent> last;
  if (!error.empty()) {
    last.push_back(TaskEvent::error(error));
  } else if (reason != "cancelled") {
    // The end of the reply releases what was held: an unfinished UTF-8 sequence, a partial stop string that never
    // completed, text the reasoning parser kept in case it began a marker.
    if (!stop_->stopped()) {
      std::string tail = stop_->push(utf8_.flush()).text;
      if (!stop_->stopped()) tail += stop_->flush();
      if (parser_) {
        chat::ReplyDelta d = parser_->feed(tail);
        out_.reasoning += d.reasoning;
        out_.content += d.content;
      } else {
        out_.content += tail;
      }
    }
    if (parser_) {
      chat::ReplyDelta d = parser_->finish();
      out_.reasoning += d.reasoning;
      out_.content += d.content;
    }
    if (!out_.empty()) last.push_back(TaskEvent::text(std::move(out_)));
    last.push_back(TaskEvent::done(reason, Usage{.prompt_tokens = static_cast<int64_t>(task_->prompt.size()),
                                                 .completion_tokens = completion_,
                                                 .cached_tokens = reused_}));
  }
  RequestRecord rec;
  rec.id = task_->id;
  rec.endpoint = task_->req.chat ? "chat" : "completions";
  rec.slot = index_;
  rec.prompt_tokens = static_cast<int64_t>(task_->prompt.size());
  rec.reused_tokens = reused_;
  rec.completion_tokens = completion_;
  rec.queue_ms = ms_between(task_->arrived, started_);
  rec.ttft_ms = have_first_ ? ms_between(task_->arrived, first_token_) : 0.0;
  const double decode_ms = have_first_ ? ms_between(first_token_, now) : 0.0;
  rec.decode_tps = completion_ > 1 && decode_ms > 0 ? static_cast<double>(completion_ - 1) * 1000.0 / decode_ms : 0.0;
  rec.finish_reason = reason;
  gen_.set_sampler(idle_sampler_);
  const std::shared_ptr<Task> task = std::move(task_);
  out_ = {};
  last_used_ = now;
  if (on_end_) on_end_(rec);
  for (auto& e : last) task->send(std::move(e));
}

void Slot::abort(const std::string& message) { finish("cancelled", message); }

void Slot::step() {
  if (!task_) return;
  if (task_->cancelled.load(std::memory_order_relaxed)) return finish("cancelled");
  try {
    const auto& prompt = task_->prompt;
    const auto n_prompt = static_cast<int64_t>(prompt.size());
    if (prefilled_ < n_prompt) {
      // One chunk per step, so a long prompt on one slot does not stall the other slots' replies.
      const int64_t len = std::min(model_.info().n_batch, n_prompt - prefilled_);
      gen_.prefill(std::span(prompt).subspan(static_cast<size_t>(prefilled_), static_cast<size_t>(len)));
      prefilled_ += len;
      if (prefilled_ < n_prompt) return;
      if (task_->req.max_tokens == 0) return finish("length");
      pending_ = gen_.sample();
      first_token_ = std::chrono::steady_clock::now();
      have_first_ = true;
      return;
    }
    const int32_t t = pending_;
    if (tok_.is_eog(t)) return finish("stop");
    emit(t);
    ++completion_;
    if (stop_->stopped()) return finish("stop");
    if (!out_.empty()) {
      task_->send(TaskEvent::text(std::move(out_)));
      out_ = {};
    }
    if (task_->req.max_tokens >= 0 && completion_ >= task_->req.max_tokens) return finish("length");
    if (gen_.context_full()) return finish("length");
    gen_.decode(t);
    pending_ = gen_.sample();
  } catch (const std::exception& e) {
    // The KV cache may hold a partial chunk: forget the slot's context rather than reuse it.
    gen_.rewind(0);
    finish("error", *e.what() != 0 ? e.what() : "the engine failed");
  }
}

}  // namespace moetier::server
