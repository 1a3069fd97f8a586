#include "model/gqa.h"

namespace moetier::model {

GqaHparams read_gqa_hparams(const ArchMetadata& md, const CommonHparams& c, HeadDim head_dim, RopeDims rope_dims) {
  GqaHparams hp;
  hp.n_head = md.count("attention.head_count");
  hp.n_head_kv = md.count_or("attention.head_count_kv", hp.n_head);
  md.require(hp.n_head % hp.n_head_kv == 0, "attention.head_count_kv", hp.n_head_kv, "a divisor of head_count");
  switch (head_dim) {
    case HeadDim::from_width:
      md.require(c.n_embd % hp.n_head == 0, "attention.head_count", hp.n_head, "a divisor of embedding_length");
      hp.head_dim = c.n_embd / hp.n_head;
      break;
    case HeadDim::key_length_or_width:
      hp.head_dim = md.count_or("attention.key_length", c.n_embd / hp.n_head);
      break;
    case HeadDim::key_length:
      hp.head_dim = md.count("attention.key_length");
      break;
  }
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
  s.kv_elements_per_position = 2 * c.n_layer * hp.kv_width();
  s.max_query_heads_per_kv = hp.n_head / hp.n_head_kv;
  return s;
}

}  // namespace moetier::model
