// The per-sequence state of a model's recurrent layers (Gated DeltaNet, model/delta_net.h): what an attention
// layer keeps in its KV cache, a recurrent layer keeps as a fixed-size summary of every token it has read. One
// RecurrentState belongs to one sequence (ModelOptions::n_seq) and holds, for each recurrent layer, its
// convolution window and its delta-rule state, allocated once at load.
//
// Unlike a KV cache, a summary cannot be cut back: after reading positions 0 .. n - 1 it can continue at position
// n or start over at 0, nothing else (Model::can_keep). Each layer records the position it has read up to, so a
// forward pass at any other position is an internal error rather than a silently stale state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace moetier::model {

class RecurrentState {
 public:
  RecurrentState() = default;
  // n_layer recurrent layers, each with conv_elems floats of convolution window and ssm_elems floats of state.
  RecurrentState(int64_t n_layer, int64_t conv_elems, int64_t ssm_elems);

  int64_t n_layer() const { return static_cast<int64_t>(pos_.size()); }
  // Layer l's convolution window [conv_elems] and delta-rule state [ssm_elems] (layouts: model/delta_net.h).
  float* conv(int64_t l) { return conv_.data() + l * conv_elems_; }
  float* ssm(int64_t l) { return ssm_.data() + l * ssm_elems_; }

  // Makes layer l ready to read tokens from position pos: at pos 0 its state is zeroed (a new sequence); at any
  // other position it must have read exactly positions 0 .. pos - 1. Throws moetier::Error (an internal error:
  // the caller rewound a recurrent model to a length it cannot keep) otherwise.
  void begin(int64_t l, int64_t pos);
  // Layer l has read n more tokens.
  void advance(int64_t l, int64_t n) { pos_[static_cast<size_t>(l)] += n; }

 private:
  int64_t conv_elems_ = 0;
  int64_t ssm_elems_ = 0;
  std::vector<float> conv_;   // [n_layer, conv_elems]
  std::vector<float> ssm_;    // [n_layer, ssm_elems]
  std::vector<int64_t> pos_;  // [n_layer]: tokens each layer has read (the next position it expects)
};

}  // namespace moetier::model
