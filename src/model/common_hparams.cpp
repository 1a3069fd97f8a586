#include "model/common_hparams.h"

#include <set>

#include "gguf/tensor_binder.h"
#include "util/error.h"

namespace moetier::model {

namespace {

// block_count must name exactly the blocks whose tensors the file has, blk.0 .. blk.(n_layer - 1): it sizes the
// per-block state before any tensor is bound, so a count from a corrupt header (2^32 - 1) would allocate first
// and fail later, and a count smaller than the blocks present would silently drop layers. The set of block
// indices is bounded by the tensor count, which the header parser bounded by the file size.
void check_block_count(const gguf::GgufModel& file, const ArchMetadata& md, int64_t n_layer) {
  std::set<int64_t> blocks;
  for (const auto& t : file.tensors()) {
    if (const auto b = gguf::block_index(t.name)) blocks.insert(*b);
  }
  const std::string present =
      blocks.empty() ? std::string("no blk.N tensors")
                     : fmt::format("tensors of {} blocks, numbered up to blk.{}", blocks.size(), *blocks.rbegin());
  if (!blocks.empty() && *blocks.rbegin() >= n_layer) {
    fail("metadata key '{}' is {}, but {} has {}: block_count must be at least {}", md.key("block_count"), n_layer,
         file.path().string(), present, *blocks.rbegin() + 1);
  }
  int64_t missing = 0;
  for (const int64_t b : blocks) {
    if (b != missing) break;
    ++missing;
  }
  if (missing < n_layer) {
    fail("metadata key '{}' is {}, but {} has no tensor of block blk.{} ({})", md.key("block_count"), n_layer,
         file.path().string(), missing, present);
  }
}

}  // namespace

CommonHparams read_common_hparams(const gguf::GgufModel& file, const ArchMetadata& md) {
  CommonHparams hp;
  hp.n_embd = md.count("embedding_length");
  hp.n_layer = md.count("block_count");
  check_block_count(file, md, hp.n_layer);
  hp.n_ctx_train = md.count("context_length");
  hp.norm_eps = md.positive_float("attention.layer_norm_rms_epsilon");
  const gguf::TensorInfo* emb = file.find("token_embd.weight");
  if (emb == nullptr) fail("tensor 'token_embd.weight' is missing from {}", file.path().string());
  if (emb->n_dims != 2) {
    fail("tensor 'token_embd.weight' has shape {}, expected [n_embd, n_vocab]", emb->shape_string());
  }
  if (emb->ne[0] != hp.n_embd) {
    fail("metadata key '{}' is {}, but tensor 'token_embd.weight' has shape {}, expected [{}, n_vocab]",
         md.key("embedding_length"), hp.n_embd, emb->shape_string(), hp.n_embd);
  }
  hp.n_vocab = emb->ne[1];
  if (hp.n_vocab < 1) fail("tensor 'token_embd.weight' has shape {}: no token rows", emb->shape_string());
  if (md.has("vocab_size")) {
    const int64_t v = md.count("vocab_size");
    if (v != hp.n_vocab) {
      fail("metadata key '{}' is {}, but tensor 'token_embd.weight' has shape {}: {} rows, one per token",
           md.key("vocab_size"), v, emb->shape_string(), hp.n_vocab);
    }
  }
  return hp;
}

}  // namespace moetier::model
