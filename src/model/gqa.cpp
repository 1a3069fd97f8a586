#include "model/gqa.h"

#include <string>

#include "util/error.h"

namespace moetier::model {

namespace {

// heads x head_dim must be the row count of blk.0's `tensor` ([n_embd, heads x head_dim]): checked by division,
// since the product of two corrupt values may overflow. `head_dim_from` says where the head size came from.
void check_head_rows(const gguf::GgufModel& file, const ArchMetadata& md, const CommonHparams& c, const char* tensor,
                     const char* key, int64_t heads, int64_t head_dim, std::string_view head_dim_from) {
  const std::string name = gguf::block_tensor(0, tensor);
  const gguf::TensorInfo* t = file.find(name);
  if (t == nullptr) fail("tensor '{}' is missing from {}", name, file.path().string());
  const int64_t rows = t->ne[1];
  if (t->n_dims != 2 || rows % heads != 0 || rows / heads != head_dim) {
    int64_t want = 0;
    const std::string want_rows = __builtin_mul_overflow(heads, head_dim, &want)
                                      ? fmt::format("{} x {} (overflows int64)", heads, head_dim)
                                      : fmt::format("{}", want);
    fail("metadata key '{}' is {} with a head size of {} ({}), but tensor '{}' has shape {}, expected [{}, {}] "
         "(n_embd, {} x head size)",
         md.key(key), heads, head_dim, head_dim_from, name, t->shape_string(), c.n_embd, want_rows, key);
  }
}

}  // namespace

GqaHparams read_gqa_hparams(const gguf::GgufModel& file, const ArchMetadata& md, const CommonHparams& c,
                            HeadDim head_dim, RopeDims rope_dims) {
  GqaHparams hp;
  hp.n_head = md.count("attention.head_count");
  hp.n_head_kv = md.count_or("attention.head_count_kv", hp.n_head);
  md.require(hp.n_head % hp.n_head_kv == 0, "attention.head_count_kv", hp.n_head_kv, "a divisor of head_count");
  std::string head_dim_from = md.key("attention.key_length");
  switch (head_dim) {
    case HeadDim::from_width:
      md.require(c.n_embd % hp.n_head == 0, "attention.head_count", hp.n_head, "a divisor of embedding_length");
      hp.head_dim = c.n_embd / hp.n_head;
      head_dim_from = "embedding_length / head_count";
      break;
    case HeadDim::key_length_or_width:
      if (!md.has("attention.key_length")) {
        md.require(c.n_embd >= hp.n_head, "attention.head_count", hp.n_head,
                   "at most embedding_length (the head size defaults to embedding_length / head_count)");
        head_dim_from = "embedding_length / head_count";
      }
      hp.head_dim = md.count_or("attention.key_length", c.n_embd / hp.n_head);
      break;
    case HeadDim::key_length:
      hp.head_dim = md.count("attention.key_length");
      break;
  }
  // Against the tensors before anything is sized by them (the KV cache, the attention's buffers): head_count and
  // the head size by attn_q, head_count_kv by attn_k. Every block is bound with the same shapes later.
  check_head_rows(file, md, c, "attn_q.weight", "attention.head_count", hp.n_head, hp.head_dim, head_dim_from);
  check_head_rows(file, md, c, "attn_k.weight", "attention.head_count_kv", hp.n_head_kv, hp.head_dim, head_dim_from);
  const int64_t v_len = md.count_or("attention.value_length", hp.head_dim);
  md.require(v_len == hp.head_dim, "attention.value_length", v_len, "equal to the key head size");
  if (rope_dims == RopeDims::whole_head) {
    md.require(hp.head_dim % 2 == 0, "attention.key_length", hp.head_dim, "even (RoPE rotates the whole head)");
    hp.n_rot = hp.head_dim;
  } else {
    hp.n_rot = md.count_or("rope.dimension_count", hp.head_dim);
    md.require(hp.n_rot % 2 == 0 && hp.n_rot <= hp.head_dim, "rope.dimension_count", hp.n_rot,
               "even and at most the head size");
  }
  hp.freq_base = md.positive_float_or("rope.freq_base", 10000.0f);
  return hp;
}

AttentionConfig gqa_attention_config(const GqaHparams& hp, const CommonHparams& c, RopeStyle style) {
  AttentionConfig ac;
  ac.n_embd = c.n_embd;
  ac.n_head = hp.n_head;
  ac.n_head_kv = hp.n_head_kv;
  ac.head_dim = hp.head_dim;
  ac.norm_eps = c.norm_eps;
  ac.rope.style = style;
  ac.rope.n_rot = hp.n_rot;
  ac.rope.freq_base = hp.freq_base;
  return ac;
}

AttentionWeights bind_gqa_attention(const gguf::TensorBinder& bind, int64_t il, const GqaHparams& hp, int64_t n_embd,
                                    AttentionTensors with) {
  using gguf::block_tensor;
  const int64_t D = n_embd, nq = hp.q_width(), nkv = hp.kv_width();
  AttentionWeights w;
  w.wq = bind.matrix(block_tensor(il, "attn_q.weight"), D, nq);
  w.wk = bind.matrix(block_tensor(il, "attn_k.weight"), D, nkv);
  w.wv = bind.matrix(block_tensor(il, "attn_v.weight"), D, nkv);
  w.wo = bind.matrix(block_tensor(il, "attn_output.weight"), nq, D);
  if (with.biases) {
    w.bq = bind.vector(block_tensor(il, "attn_q.bias"), nq);
    w.bk = bind.vector(block_tensor(il, "attn_k.bias"), nkv);
    w.bv = bind.vector(block_tensor(il, "attn_v.bias"), nkv);
    w.bo = bind.vector(block_tensor(il, "attn_output.bias"), D);
  }
  if (with.qk_norm) {
    w.q_norm = bind.vector(block_tensor(il, "attn_q_norm.weight"), hp.head_dim);
    w.k_norm = bind.vector(block_tensor(il, "attn_k_norm.weight"), hp.head_dim);
  }
  if (with.sinks) w.sinks = bind.vector(block_tensor(il, "attn_sinks.weight"), hp.n_head);
  return w;
}

ArchSummary gqa_summary(const CommonHparams& c, const GqaHparams& hp) {
  ArchSummary s;
  s.n_ctx_train = c.n_ctx_train;
  s.n_layer = c.n_layer;
  // Both factors are bounded by tensors of the file (block names, attn_k's rows), but their product is not.
  if (__builtin_mul_overflow(2 * c.n_layer, hp.kv_width(), &s.kv_elements_per_position)) {
    fail("the KV cache's elements per position (2 x block_count {} x head_count_kv {} x head size {}) overflow int64",
         c.n_layer, hp.n_head_kv, hp.head_dim);
  }
  s.max_query_heads_per_kv = hp.n_head / hp.n_head_kv;
  return s;
}

}  // namespace moetier::model
