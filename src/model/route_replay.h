// RoutingOverride that replays a route_trace v1 file (trace/route_trace.h): each MoE layer's top-k comes from
// the trace, token by token, instead of the router — to benchmark a model (typically a synthetic one of the real
// shape) under real routing. Lossy: the output text means nothing; the expert traffic is the recorded one.
//
// Mapping. The trace's tokens are split into prefill tokens (phase 0) and decode tokens (phase 1), each in
// (turn, step) order; turns follow each other. A forward pass of more than one token is a prefill chunk and takes
// the next prefill tokens; a one-token pass is a decode step and takes the next decode token. So a prompt of P
// tokens uses the first P prefill rows and the i-th generated token uses the trace's i-th decode step, whatever
// the two prompts' lengths (a one-token last prefill chunk counts as decode: keep the prompt within -b). Every
// layer keeps its own cursor, so layers stay in step as long as each pass runs all layers.
// A (token, layer) without rows (recording engines skip the last layer for all prompt tokens but the last) takes
// the routing of the nearest token of the same turn and phase that has that layer: filled() counts them.
// Weights: the recorded router weights when every slot of a (token, layer) has one, otherwise uniform 1/k.
//
// Memory: the trace's routing [tokens, n_moe_layers, k] is held as dense arrays built at construction; route()
// allocates nothing. Thread-safety: one forward pass at a time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/router.h"
#include "trace/route_trace.h"

namespace moetier::model {

class RouteReplay final : public RoutingOverride {
 public:
  // `name` (the file) appears in every error. Throws moetier::Error when a (token, layer) lacks a slot in
  // [0, n_expert_used), repeats an expert or names one outside [0, n_expert).
  RouteReplay(const trace::RouteTrace& trace, std::string name);

  // Throws moetier::Error naming the file and both shapes unless the trace's n_moe_layers / n_expert equal the model's
  // (n_moe_layers / n_expert), or, when k > 0, its n_expert_used equals k.
  void check_model(int64_t n_moe_layers, int64_t n_expert, int64_t k) const;

  void route(int64_t layer, int64_t n_tok, int32_t* ids, float* weights) override;

  const trace::TraceHeader& header() const { return header_; }
  int64_t prefill_tokens() const { return n_prefill_; }
  int64_t decode_tokens() const { return n_decode_; }
  int64_t filled() const { return n_filled_; }  // (token, layer) pairs without rows, given a neighbour's routing

 private:
  trace::TraceHeader header_;
  std::string name_;
  int64_t k_ = 0;
  int64_t n_prefill_ = 0, n_decode_ = 0;
  int64_t n_filled_ = 0;
  std::vector<int32_t> ids_;     // [n_prefill + n_decode, n_moe_layers, k]: prefill tokens first, then decode
  std::vector<float> weights_;   // same shape
  std::vector<int64_t> prefill_cursor_;  // [n_moe_layers] next prefill token per layer
  std::vector<int64_t> decode_cursor_;   // [n_moe_layers] next decode token per layer
};

}  // namespace moetier::model
