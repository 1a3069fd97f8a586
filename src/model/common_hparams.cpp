#include "model/common_hparams.h"

#include "util/error.h"

namespace moetier::model {

CommonHparams read_common_hparams(const gguf::GgufModel& file, const ArchMetadata& md) {
  CommonHparams hp;
  hp.n_embd = md.count("embedding_length");
  hp.n_layer = md.count("block_count");
  hp.n_ctx_train = md.count("context_length");
  hp.norm_eps = md.positive_float("attention.layer_norm_rms_epsilon");
  const gguf::TensorInfo* emb = file.find("token_embd.weight");
  if (emb == nullptr) fail("tensor 'token_embd.weight' is missing from {}", file.path().string());
  if (emb->n_dims != 2 || emb->ne[0] != hp.n_embd) {
    fail("tensor 'token_embd.weight' has shape {}, expected [{}, n_vocab]", emb->shape_string(), hp.n_embd);
  }
  hp.n_vocab = emb->ne[1];
  return hp;
}

}  // namespace moetier::model
