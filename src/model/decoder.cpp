#include "model/decoder.h"

#include <algorithm>
#include <cstring>

#include "model/rmsnorm.h"
#include "moe/resident_experts.h"
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

int64_t experts_used(const ArchMetadata& md, int64_t n_expert, const ModelOptions& opts) {
  const int64_t k = md.count("expert_used_count");
  md.require(k <= n_expert, "expert_used_count", k, "at most expert_count");
  if (opts.n_expert_used == 0) return k;
  if (opts.n_expert_used < 1 || opts.n_expert_used > n_expert) {
    fail("n_expert_used override {} is out of range, expected 1..{} (the model's expert_count)", opts.n_expert_used,
         n_expert);
  }
  return opts.n_expert_used;
}

std::unique_ptr<moe::ExpertSource> resolve_experts(const gguf::GgufModel& file, const moe::ExpertShape& shape,
                                                   std::unique_ptr<moe::ExpertSource> given) {
  if (!given) return std::make_unique<moe::ResidentExperts>(file, shape);
  const moe::ExpertShape& g = given->shape();
  if (g.n_layer != shape.n_layer || g.n_expert != shape.n_expert || g.n_embd != shape.n_embd ||
      g.n_ff != shape.n_ff || g.has_bias != shape.has_bias) {
    fail("expert source shape (layers {}, experts {}, n_embd {}, n_ff {}) does not match the model's "
         "(layers {}, experts {}, n_embd {}, n_ff {})",
         g.n_layer, g.n_expert, g.n_embd, g.n_ff, shape.n_layer, shape.n_expert, shape.n_embd, shape.n_ff);
  }
  return given;
}

DecoderModel::DecoderModel(const gguf::GgufModel& file, const CommonHparams& hp, const ModelOptions& opts)
    : file_(file), bind_(file), hp_(hp), opts_(opts) {
  info_.architecture = file.architecture();
  info_.n_vocab = hp.n_vocab;
  info_.n_embd = hp.n_embd;
  info_.n_layer = hp.n_layer;
  if (opts.n_ctx < 0) fail("context size {} is negative", opts.n_ctx);
  if (opts.n_batch < 1) fail("batch size {} must be at least 1", opts.n_batch);
  if (opts.threads < 1 || opts.threads > 1024) fail("thread count {} is out of range, expected 1..1024", opts.threads);
  info_.n_ctx = opts.n_ctx > 0 ? opts.n_ctx : std::min<int64_t>(hp.n_ctx_train, 4096);
  info_.n_batch = std::min(opts.n_batch, info_.n_ctx);
  tok_embd_ = bind_.matrix("token_embd.weight", hp.n_embd, hp.n_vocab);
  out_norm_ = bind_.vector("output_norm.weight", hp.n_embd);
  output_ = bind_.has("output.weight") ? bind_.matrix("output.weight", hp.n_embd, hp.n_vocab) : tok_embd_;
}

void DecoderModel::setup(const DecoderSizes& s) {
  const int64_t B = info_.n_batch, D = hp_.n_embd;
  info_.n_moe_layers = s.n_moe_layers;
  info_.n_expert = s.n_expert;
  info_.n_expert_used = s.n_expert_used;
  kv_ = KvCache(hp_.n_layer, info_.n_ctx, s.kv_width, opts_.kv_type);
  mm_ = quant::MatmulScratch(std::max(s.max_cols, D), B, opts_.rounding, B * std::max<int64_t>(s.n_expert_used, 1));
  if (opts_.threads > 1) {
    pool_ = std::make_unique<util::ThreadPool>(opts_.threads);
    mm_.set_pool(pool_.get());
  }
  x_.assign(static_cast<size_t>(B * D), 0.0f);
  xn_.assign(static_cast<size_t>(B * D), 0.0f);
  tmp_.assign(static_cast<size_t>(B * D), 0.0f);
  route_.assign(static_cast<size_t>(B * std::max<int64_t>(s.n_expert_used, 1)), 0);
}

void DecoderModel::forward(std::span<const int32_t> tokens, int64_t pos, std::span<float> logits, LogitsMode mode,
                           std::span<int32_t> routing) {
  const auto n = static_cast<int64_t>(tokens.size());
  const int64_t D = hp_.n_embd, V = hp_.n_vocab, K = info_.n_expert_used, L = info_.n_moe_layers;
  if (n < 1 || n > info_.n_batch) fail("forward: {} tokens given, expected 1..{} (the batch size)", n, info_.n_batch);
  if (pos < 0 || pos + n > info_.n_ctx) {
    fail("forward: positions {}..{} do not fit the context of {} tokens", pos, pos + n - 1, info_.n_ctx);
  }
  const int64_t rows = mode == LogitsMode::all ? n : 1;
  if (static_cast<int64_t>(logits.size()) != rows * V) {
    fail("forward: logits span holds {} floats, expected {} ({} x n_vocab {})", logits.size(), rows * V, rows, V);
  }
  if (!routing.empty() && static_cast<int64_t>(routing.size()) != n * L * K) {
    fail("forward: routing span holds {} ids, expected {} (tokens {} x MoE layers {} x experts used {})",
         routing.size(), n * L * K, n, L, K);
  }
  for (int64_t t = 0; t < n; ++t) {
    const int32_t id = tokens[static_cast<size_t>(t)];
    if (id < 0 || id >= V) fail("forward: token id {} at index {} is outside the vocabulary (size {})", id, t, V);
    quant::dequantize_row(tok_embd_, id, x_.data() + t * D);
  }
  int64_t moe_index = 0;
  for (int64_t il = 0; il < hp_.n_layer; ++il) {
    const bool moe = is_moe_layer(il);
    layer(il, x_.data(), pos, n, moe && !routing.empty() ? route_.data() : nullptr);
    if (moe && !routing.empty()) {
      for (int64_t t = 0; t < n; ++t) {
        std::copy_n(route_.data() + t * K, K, routing.data() + (t * L + moe_index) * K);
      }
    }
    if (moe) ++moe_index;
  }
  const int64_t first = mode == LogitsMode::all ? 0 : n - 1;
  rms_norm(x_.data() + first * D, out_norm_.data(), xn_.data(), rows, D, hp_.norm_eps);
  quant::matmul(output_, xn_.data(), logits.data(), rows, mm_);
}

void DecoderModel::attention_block(int64_t il, float* x, const std::vector<float>& norm, Attention& attn,
                                   const AttentionWeights& w, int64_t pos0, int64_t n_tok) {
  rms_norm(x, norm.data(), xn_.data(), n_tok, hp_.n_embd, hp_.norm_eps);
  attn.forward(w, kv_, il, xn_.data(), pos0, n_tok, tmp_.data(), mm_);
  add_residual(x, tmp_.data(), n_tok * hp_.n_embd);
}

void DecoderModel::ffn_block(float* x, const std::vector<float>& norm, DenseFfn& ffn, const FfnWeights& w,
                             int64_t n_tok) {
  rms_norm(x, norm.data(), xn_.data(), n_tok, hp_.n_embd, hp_.norm_eps);
  ffn.forward(w, xn_.data(), n_tok, tmp_.data(), mm_);
  add_residual(x, tmp_.data(), n_tok * hp_.n_embd);
}

void DecoderModel::moe_block(int64_t il, float* x, const std::vector<float>& norm, MoeFfn& moe,
                             const RouterWeights& rw, moe::ExpertSource& experts, int64_t n_tok, int32_t* routing) {
  rms_norm(x, norm.data(), xn_.data(), n_tok, hp_.n_embd, hp_.norm_eps);
  moe.forward(il, rw, experts, xn_.data(), n_tok, tmp_.data(), routing, mm_);
  add_residual(x, tmp_.data(), n_tok * hp_.n_embd);
}

}  // namespace moetier::model
