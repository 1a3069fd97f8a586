// Text generation over a Model: the context (token history and KV positions), prefill in batches, sampling and
// one-token decode, with the timings `run` and `chat` report. Shared by both commands and the tests.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <vector>

#include "model/model.h"
#include "sample/sampler.h"

namespace moetier::model {

// Called around every step the generator runs (a prefill of a whole prompt, or one decode token), on the
// generator's thread: the streaming expert store and telemetry use it to close their per-step records.
class StepHooks {
 public:
  virtual ~StepHooks() = default;
  virtual void begin(bool prefill) = 0;
  // n_tokens run in this step; seconds of wall time it took.
  virtual void end(bool prefill, int64_t n_tokens, double seconds) = 0;
  // After each forward pass when the generator records routing (Generator::record_routing): the tokens at
  // positions pos .. pos + n - 1 chose `routing` [n, n_moe_layers, n_expert_used] expert ids (router order).
  // A prefill longer than n_batch calls this once per chunk, between its begin() and end(). The span is the
  // generator's buffer, valid until the next forward pass.
  virtual void routed(int64_t /*pos*/, int64_t /*n*/, std::span<const int32_t> /*routing*/) {}
};

class Generator {
 public:
  // `model` and `sampler` must outlive the generator. Allocates the logits buffer [n_vocab] and reserves the
  // history for n_ctx tokens once.
  // `seq`: the model's sequence (KV cache) this generator's context lives in (Model::set_sequence), selected before
  // every forward pass, so generators on different sequences of one model may take turns.
  Generator(Model& model, sample::Sampler& sampler, StepHooks* hooks = nullptr, int seq = 0);

  // Runs `tokens` after the current context, in chunks of the model's n_batch (the prefill). Throws
  // moetier::Error when they do not fit in the context, saying how many tokens are free. Returns false when the
  // stop flag (set_stop_flag) was raised between two chunks: the chunks run so far are in the context and counted
  // as the step, the rest not.
  bool prefill(std::span<const int32_t> tokens);
  // A non-zero value of `*flag` makes prefill() stop at the next chunk boundary (Ctrl-C in `run` and `chat`);
  // the flag must outlive the generator. Null (the default): never stop.
  void set_stop_flag(const std::atomic<int>* flag) { stop_ = flag; }
  // Drops the tokens after the first `n_past` from the context (chat drops a turn whose prefill was stopped). The
  // KV cache rows past it are simply overwritten later. A model that cannot keep that prefix (Model::can_keep: one
  // with recurrent layers, whose state summarises every token read) runs the kept tokens again from position 0, as
  // one prefill step (seen by the hooks, counted in prefill_tokens; the stop flag is not checked). There are no
  // logits to sample from until the next run.
  void rewind(int64_t n_past);
  // Samples with `sampler` from now on (a server's slot takes each request's settings); it must outlive its use.
  void set_sampler(sample::Sampler& sampler) { sampler_ = &sampler; }
  // Samples the next token from the logits of the last token run. Does not run it.
  int32_t sample();
  // Makes every later forward pass fill a routing buffer [n_batch, n_moe_layers, n_expert_used] (allocated here,
  // once) and hand it to the hooks' routed(). No-op for a model without routed experts.
  void record_routing();
  // Runs one token (normally the one just sampled) at the next position. Throws when the context is full.
  void decode(int32_t token);

  int64_t n_past() const { return static_cast<int64_t>(history_.size()); }
  int64_t n_ctx() const { return model_.info().n_ctx; }
  bool context_full() const { return n_past() >= n_ctx(); }
  std::span<const int32_t> history() const { return history_; }

  // Accumulated over the generator's life: tokens and seconds of prefill and of decode.
  int64_t prefill_tokens = 0;
  double prefill_seconds = 0.0;
  int64_t decode_tokens = 0;
  double decode_seconds = 0.0;

 private:
  Model& model_;
  sample::Sampler* sampler_;                // never null
  StepHooks* hooks_;                        // may be null
  int seq_;                                 // the model's sequence
  const std::atomic<int>* stop_ = nullptr;  // may be null
  std::vector<float> logits_;               // [n_vocab]: the last token's logits
  std::vector<int32_t> history_;            // [n_past]: every token in the KV cache
  bool have_logits_ = false;
  std::vector<int32_t> routing_;              // [n_batch, n_moe_layers, n_expert_used] when recording, else empty
  size_t routing_per_token_ = 0;              // n_moe_layers * n_expert_used
  std::span<int32_t> routing_for(int64_t n);  // the buffer's first n tokens, or empty when not recording
  // Runs `tokens` after the context in chunks of n_batch, as one prefill step; with `stoppable`, stops between
  // chunks when the stop flag is raised. Returns the tokens run.
  int64_t run_prefill(std::span<const int32_t> tokens, bool stoppable);
  std::vector<int32_t> kept_;  // [n_ctx] reserved: the tokens rewind() runs again
};

}  // namespace moetier::model
