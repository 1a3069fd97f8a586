// Greedy decoding: the most likely next token. Other samplers (temperature, top-k/p) come later beside it.
#pragma once

#include <cstdint>
#include <span>

namespace moetier::sample {

// Index of the largest logit; the lowest index among equal maxima (as the reference engine's argmax).
// logits must be non-empty.
int32_t argmax(std::span<const float> logits);

}  // namespace moetier::sample
