#include "sample/greedy.h"

#include <cassert>

namespace moetier::sample {

int32_t argmax(std::span<const float> logits) {
  assert(!logits.empty());
  size_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > logits[best]) best = i;
  }
  return static_cast<int32_t>(best);
}

}  // namespace moetier::sample
