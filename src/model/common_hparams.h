// The hyperparameters every architecture reads the same way (model width, depth, context, norm epsilon, vocabulary).
#pragma once

#include <cstdint>

#include "gguf/gguf.h"
#include "model/arch_metadata.h"

namespace moetier::model {

// Hyperparameters every architecture reads the same way.
struct CommonHparams {
  int64_t n_vocab = 0;
  int64_t n_embd = 0;    // <arch>.embedding_length
  int64_t n_layer = 0;   // <arch>.block_count
  int64_t n_ctx_train = 0;  // <arch>.context_length
  float norm_eps = 0;    // <arch>.attention.layer_norm_rms_epsilon
};
// Reads the above (n_vocab from token_embd.weight's shape, since not every file carries <arch>.vocab_size).
CommonHparams read_common_hparams(const gguf::GgufModel& file, const ArchMetadata& md);

}  // namespace moetier::model
