// An activation buffer that says where it lives. The residual stream and a block's input and output are
// allocated by the backend that computes on them (compute/backend.h), and host code reads them through host() only
// where they are in host memory (asserted). Host memory is the only kind today; the GPU backend adds a device form
// (a buffer handle and offset in place of the vector) with its own factory.
#pragma once

#include <cassert>
#include <cstddef>
#include <vector>

#include "quant/matmul.h"

namespace moetier::compute {

class Activations {
 public:
  Activations() = default;
  // n floats of host memory, zeroed.
  static Activations host_floats(size_t n) {
    Activations a;
    a.host_.assign(n, 0.0f);
    return a;
  }

  quant::Memory memory() const { return memory_; }
  size_t size() const { return host_.size(); }
  float* host() {
    assert(memory_ == quant::Memory::host);
    return host_.data();
  }
  const float* host() const {
    assert(memory_ == quant::Memory::host);
    return host_.data();
  }

 private:
  quant::Memory memory_ = quant::Memory::host;
  std::vector<float> host_;  // [size()] floats when memory_ is host
};

}  // namespace moetier::compute
