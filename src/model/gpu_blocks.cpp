#include "model/gpu_blocks.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cmath>
#include <functional>

#include "util/error.h"

namespace moetier::model {

namespace {

gpu::GluKind glu_kind(const GluConfig& c) {
  switch (c.kind) {
    case GluConfig::Kind::swiglu: return gpu::GluKind::swiglu;
    case GluConfig::Kind::swiglu_oai: return gpu::GluKind::swiglu_oai;
    case GluConfig::Kind::geglu: return gpu::GluKind::geglu;
  }
  return gpu::GluKind::swiglu;
}

}  // namespace

GpuBlocks::GpuBlocks(gpu::DeviceStep& step, const GpuBlockSizes& s) : step_(step), s_(s) {
  const int64_t B = s.n_batch, D = s.n_embd, C = s.max_cols, K = std::max<int64_t>(s.n_expert_used, 1);
  const int64_t F = s.n_ff_exp, BK = B * K;
  const int64_t max_kv = *std::max_element(s.kv_width.begin() + s.first_layer, s.kv_width.end());
  x_ = step.alloc(B * D);
  xn_ = step.alloc(B * D);
  out_ = step.alloc(B * D);
  const int64_t xr = std::max(B * C, BK * std::max(D, F));
  for (gpu::DevArray& a : xr_) a = step.alloc(xr);
  q_ = step.alloc(B * C);
  ctx_ = step.alloc(B * C);
  k_ = step.alloc(B * max_kv);
  v_ = step.alloc(B * max_kv);
  table_ = step.alloc(B * C);
  gate_ = step.alloc(std::max(B * C, BK * F));
  up_ = step.alloc(std::max(B * C, BK * F));
  if (s.n_expert > 0) {
    xg_ = step.alloc(BK * D);
    rows_ = step.alloc(BK);
    slots_ = step.alloc(BK * D);
    router_ = step.alloc(B * s.n_expert);
    mix_ = step.alloc(BK * 2);
    table_up_ = step.alloc(2 * s.n_expert * 4);
    table_down_ = step.alloc(s.n_expert * 4);
  }
  // The output head in slices of at most 2^24 logits (64 MiB) when every token's logits are asked for.
  logit_rows_ = std::clamp<int64_t>((int64_t{1} << 24) / s.n_vocab, 1, B);
  logits_ = step.alloc(logit_rows_ * s.n_vocab);
  for (int64_t q = 0; q < s.n_seq; ++q) {
    for (int64_t l = 0; l < s.n_layer; ++l) {
      kv_.push_back(l >= s.first_layer ? step.kv_cache(s.n_ctx, s.kv_width[static_cast<size_t>(l)]) : -1);
    }
  }
  table_host_.resize(static_cast<size_t>(B * C));
  mix_host_.resize(static_cast<size_t>(BK * 2));
  rows_host_.resize(static_cast<size_t>(BK));
  delivered_.resize(static_cast<size_t>(std::max<int64_t>(s.n_expert, 1)));
  on_gpu_.reserve(static_cast<size_t>(s.n_expert));
  on_cpu_.reserve(static_cast<size_t>(s.n_expert));
  tokens_.reserve(static_cast<size_t>(s.n_expert));
  slot_w_.reserve(static_cast<size_t>(s.n_expert));
  grouped_.reserve(static_cast<size_t>(2 * std::max<int64_t>(s.n_expert, 1)));
}

void GpuBlocks::register_constant(std::span<const float> v) {
  assert(registering_);
  dev(v);
}

void GpuBlocks::finish_setup() {
  // The staging buffers hold the largest single transfer: an upload of the residual stream, a RoPE table, a MoE
  // layer's mix or grouped-product table, a download of router logits or of a slice of logits.
  const int64_t B = s_.n_batch, D = s_.n_embd, K = std::max<int64_t>(s_.n_expert_used, 1);
  step_.finish_setup(std::max({B * D, B * s_.max_cols, B * K * 2, 8 * s_.n_expert, B * s_.n_expert,
                               logit_rows_ * s_.n_vocab, s_.tiered ? B * K * D : 0}));
  std::sort(consts_.begin(), consts_.end(),
            [](const auto& a, const auto& b) { return std::less<const float*>()(a.first.data(), b.first.data()); });
}

void GpuBlocks::discard() {
  step_.discard();
  table_for_ = nullptr;
}

gpu::DevArray GpuBlocks::dev(std::span<const float> v) {
  const std::less<const float*> before;
  if (registering_) {
    const gpu::DevArray a = step_.constant(v);  // the same span again: the same copy (DeviceStep::constant)
    consts_.emplace_back(v, a);
    return a;
  }
  // The registered span that starts at or before v and holds all of it.
  auto it = std::upper_bound(consts_.begin(), consts_.end(), v.data(),
                             [&](const float* p, const auto& c) { return before(p, c.first.data()); });
  if (it != consts_.begin()) {
    const auto& [span, arr] = *--it;
    const auto off = v.data() - span.data();
    if (off >= 0 && static_cast<size_t>(off) + v.size() <= span.size())
      return arr.sub(off, static_cast<int64_t>(v.size()));
  }
  fail("GPU step: a constant of {} floats was not registered at setup", v.size());
}

gpu::DevArray GpuBlocks::round(const quant::WeightView& w, gpu::DevArray x, int64_t rows, int64_t cols, int scratch) {
  return step_.round_for(w.type, x, xr_[scratch], rows, cols);
}

void GpuBlocks::rounded_inputs(std::span<const quant::WeightView* const> ws, gpu::DevArray x, int64_t rows,
                               int64_t cols, gpu::DevArray* out) {
  assert(ws.size() <= 3);
  int next = 0;
  for (size_t i = 0; i < ws.size(); ++i) {
    const int grid = gpu::activation_grid(ws[i]->type);
    size_t j = 0;
    while (j < i && gpu::activation_grid(ws[j]->type) != grid) ++j;
    out[i] = j < i ? out[j] : round(*ws[i], x, rows, cols, next++);
  }
}

void GpuBlocks::begin(const float* x, int64_t n_tok) {
  if (registering_) return;
  step_.upload(x, x_.sub(0, n_tok * s_.n_embd));
}

void GpuBlocks::attention_block(int64_t il, int seq, std::span<const float> norm, const Attention& attn,
                                const AttentionWeights& w, int64_t pos0, int64_t n_tok) {
  const AttentionConfig& c = attn.config();
  assert(!c.v_norm && !c.output_gate && !w.wv.empty());  // the architectures that run here have neither
  // attention.comp holds a query head in 256 floats of shared memory and reads the cache two halves a word.
  if (c.head_dim > 256 || c.head_dim % 2 != 0)
    fail("the GPU attention takes even head sizes up to 256, not {}", c.head_dim);
  const gpu::DevArray g = dev(norm), bq = dev_or_empty(w.bq), bk = dev_or_empty(w.bk), bv = dev_or_empty(w.bv),
                      bo = dev_or_empty(w.bo), qn = dev_or_empty(w.q_norm), kn = dev_or_empty(w.k_norm),
                      sinks = dev_or_empty(w.sinks);
  if (registering_) {
    for (const quant::WeightView* m : {&w.wq, &w.wk, &w.wv, &w.wo}) step_.check_product(*m);
    return;
  }
  const int64_t D = s_.n_embd, hd = c.head_dim, nh = c.n_head, nkv = c.n_head_kv, nq = nh * hd, nk = nkv * hd;
  const int64_t n_rot = c.rope.n_rot;
  step_.rms_norm(x_, g, xn_, n_tok, D, s_.norm_eps);
  const quant::WeightView* ws[3] = {&w.wq, &w.wk, &w.wv};
  gpu::DevArray in[3];
  rounded_inputs(ws, xn_, n_tok, D, in);
  step_.product(w.wq, in[0], q_, n_tok);
  step_.product(w.wk, in[1], k_, n_tok);
  step_.product(w.wv, in[2], v_, n_tok);
  if (!bq.empty()) step_.add(q_, bq, n_tok, nq, true);
  if (!bk.empty()) step_.add(k_, bk, n_tok, nk, true);
  if (!bv.empty()) step_.add(v_, bv, n_tok, nk, true);
  if (!qn.empty()) step_.rms_norm(q_, qn, q_, n_tok * nh, hd, c.norm_eps);
  if (!kn.empty()) step_.rms_norm(k_, kn, k_, n_tok * nkv, hd, c.norm_eps);
  // The angles of this call's positions, computed on the host as the CPU computes them; the layers after the
  // first of a call read the same table.
  if (table_for_ != &attn || table_pos0_ != pos0 || table_n_ != n_tok) {
    for (int64_t t = 0; t < n_tok; ++t) attn.rope().table(pos0 + t, table_host_.data() + t * n_rot);
    step_.upload(table_host_.data(), table_.sub(0, n_tok * n_rot));
    table_for_ = &attn;
    table_pos0_ = pos0;
    table_n_ = n_tok;
  }
  const bool neox = c.rope.style == RopeStyle::neox;
  step_.rope(q_, table_, n_tok, nh, hd, n_rot, neox);
  step_.rope(k_, table_, n_tok, nkv, hd, n_rot, neox);
  const int kv = kv_[static_cast<size_t>(seq * s_.n_layer + il)];
  step_.kv_store(kv, k_, v_, pos0, n_tok);
  const gpu::AttentionOp op{.kv = kv,
                            .pos0 = pos0,
                            .n_tok = n_tok,
                            .n_head = nh,
                            .n_head_kv = nkv,
                            .head_dim = hd,
                            .scale = c.scale != 0.0f ? c.scale : 1.0f / std::sqrt(static_cast<float>(hd)),
                            .window = w.sliding_window,
                            .sinks = sinks};
  step_.attention(op, q_, ctx_);
  const gpu::DevArray ctx = round(w.wo, ctx_, n_tok, nq);
  if (bo.empty()) {
    step_.product(w.wo, ctx, x_, n_tok, /*accumulate=*/true);  // the residual add in the product's dispatch
    return;
  }
  step_.product(w.wo, ctx, out_, n_tok);
  step_.add(out_, bo, n_tok, D, true);  // the bias joins the product before the residual, as on the CPU
  step_.add(x_, out_, n_tok, D, false);
}

void GpuBlocks::ffn_block(std::span<const float> norm, const FfnWeights& w, const GluConfig& glu, int64_t n_tok) {
  const gpu::DevArray g = dev(norm);
  if (registering_) {
    for (const quant::WeightView* m : {&w.gate, &w.up, &w.down}) step_.check_product(*m);
    return;
  }
  const int64_t D = s_.n_embd, F = w.gate.rows;
  step_.rms_norm(x_, g, xn_, n_tok, D, s_.norm_eps);
  const quant::WeightView* ws[2] = {&w.gate, &w.up};
  gpu::DevArray in[2];
  rounded_inputs(ws, xn_, n_tok, D, in);
  step_.product(w.gate, in[0], gate_, n_tok);
  step_.product(w.up, in[1], up_, n_tok);
  step_.glu(glu_kind(glu), glu.alpha, glu.limit, gate_, up_, gate_, n_tok * F);
  step_.product(w.down, round(w.down, gate_, n_tok, F), x_, n_tok, /*accumulate=*/true);
}

MoeFfn& GpuBlocks::route(int64_t il, std::span<const float> norm, MoeLayers& moe, int64_t n_tok, int32_t* routing,
                         util::ThreadPool* pool, float* xn_host) {
  const RouterWeights& rw = moe.router(il);
  assert(rw.expert_scale.empty());  // Gemma 4's per-expert scale: not an architecture that runs here
  MoeFfn& ffn = moe.ffn();
  const int64_t D = s_.n_embd, E = s_.n_expert;
  step_.rms_norm(x_, dev(norm), xn_, n_tok, D, s_.norm_eps);
  step_.product(rw.gate_inp, round(rw.gate_inp, xn_, n_tok, D), router_, n_tok);
  step_.download(router_.sub(0, n_tok * E), ffn.logits());
  if (xn_host != nullptr) step_.download(xn_.sub(0, n_tok * D), xn_host);
  step_.submit();
  ffn.route_batch(moe.ordinal(il), rw, ffn.logits(), n_tok, routing, pool);
  return ffn;
}

void GpuBlocks::begin_experts(MoeFfn& ffn, int64_t n_tok) {
  const int64_t D = s_.n_embd, K = s_.n_expert_used, P = n_tok * K;
  // The experts' input rows in grouped order (at one token every chosen expert reads the token's row itself).
  if (n_tok > 1) {
    for (int64_t p = 0; p < P; ++p) rows_host_[static_cast<size_t>(p)] = ffn.slot(p) / static_cast<int32_t>(K);
    step_.gather(xn_, std::span<const int32_t>(rows_host_.data(), static_cast<size_t>(P)), D, xg_, rows_);
  }
  ffn_ = &ffn;
  n_tok_ = n_tok;
  moe_x_ = {};
  grouped_.clear();
}

void GpuBlocks::record_experts(std::span<const int32_t> experts, const GluConfig& glu, int64_t n_tok) {
  const MoeFfn& ffn = *ffn_;
  const int64_t D = s_.n_embd, F = s_.n_ff_exp, P = n_tok * s_.n_expert_used;
  // Every expert's gate and up: one dispatch each for a layer's gates and ups (their stacks are placed whole, or
  // their slots lie in one buffer).
  step_.products_grouped(grouped_, table_up_);
  for (const int32_t e : experts) {
    const moe::ExpertWeights& w = delivered_[static_cast<size_t>(e)];
    const int64_t p0 = ffn.start(e), c = ffn.count(e);
    if (w.gate_bias != nullptr)
      step_.add(gate_.sub(p0 * F, c * F), dev({w.gate_bias, static_cast<size_t>(F)}), c, F, true);
    if (w.up_bias != nullptr) step_.add(up_.sub(p0 * F, c * F), dev({w.up_bias, static_cast<size_t>(F)}), c, F, true);
  }
  // Over every position: those of experts computed elsewhere hold stale values that nothing reads.
  step_.glu(glu_kind(glu), glu.alpha, glu.limit, gate_, up_, gate_, P * F);
  const gpu::DevArray h = round(delivered_[static_cast<size_t>(experts.front())].down, gate_, P, F);
  grouped_.clear();
  for (const int32_t e : experts) {
    const int64_t p0 = ffn.start(e), c = ffn.count(e);
    grouped_.push_back({delivered_[static_cast<size_t>(e)].down, h.sub(p0 * F, c * F), slots_.sub(p0 * D, c * D), c});
  }
  step_.products_grouped(grouped_, table_down_);
  for (const int32_t e : experts) {
    const float* b = delivered_[static_cast<size_t>(e)].down_bias;
    const int64_t p0 = ffn.start(e), c = ffn.count(e);
    if (b != nullptr) step_.add(slots_.sub(p0 * D, c * D), dev({b, static_cast<size_t>(D)}), c, D, true);
  }
}

void GpuBlocks::combine_experts(const MoeFfn& ffn, int64_t n_tok) {
  const int64_t D = s_.n_embd, K = s_.n_expert_used, P = n_tok * K;
  for (int64_t ts = 0; ts < P; ++ts) {
    mix_host_[static_cast<size_t>(2 * ts)] = static_cast<float>(ffn.position(ts));
    mix_host_[static_cast<size_t>(2 * ts + 1)] = ffn.weight(ts);
  }
  step_.upload(mix_host_.data(), mix_.sub(0, 2 * P));
  step_.combine(slots_, mix_, x_, n_tok, K, D, /*accumulate=*/true);
}

void GpuBlocks::moe_block_gpu(int64_t il, std::span<const float> norm, MoeLayers& moe, const GluConfig& glu,
                              int64_t n_tok, int32_t* routing, util::ThreadPool* pool) {
  if (registering_) {
    dev(norm);
    step_.check_product(moe.router(il).gate_inp);
    return;
  }
  MoeFfn& ffn = route(il, norm, moe, n_tok, routing, pool, nullptr);
  begin_experts(ffn, n_tok);
  moe.experts().fetch(moe.ordinal(il), ffn.chosen(), *this);
  record_experts(ffn.chosen(), glu, n_tok);
  combine_experts(ffn, n_tok);
}

void GpuBlocks::moe_block_tiered(int64_t il, std::span<const float> norm, MoeLayers& moe, const GluConfig& glu,
                                 int64_t n_tok, int32_t* routing, util::ThreadPool* pool, moe::VramTier& tier,
                                 compute::Backend& cpu, float* xn_host) {
  if (registering_) {
    dev(norm);
    step_.check_product(moe.router(il).gate_inp);
    return;
  }
  MoeFfn& ffn = route(il, norm, moe, n_tok, routing, pool, xn_host);
  const auto m = static_cast<int32_t>(moe.ordinal(il));
  const std::span<const int32_t> chosen = ffn.chosen();
  tier.lookup(m, chosen);  // copies the experts that just took a slot into it
  tokens_.clear();
  for (const int32_t e : chosen) tokens_.push_back(ffn.count(e));
  tier.share(m, chosen, tokens_);  // the misses that cross PCIe for this layer
  on_gpu_.clear();
  on_cpu_.clear();
  slot_w_.clear();
  for (size_t i = 0; i < chosen.size(); ++i) {
    if (tier.on_slot(i) || tier.staged(i)) {
      on_gpu_.push_back(chosen[i]);
      slot_w_.push_back(tier.weights(m, chosen[i]));
    } else {
      on_cpu_.push_back(chosen[i]);
    }
  }
  if (!on_gpu_.empty()) {
    begin_experts(ffn, n_tok);
    on_experts(on_gpu_, slot_w_);
    record_experts(on_gpu_, glu, n_tok);
    // The GPU computes its experts while the CPU computes the others.
    if (!on_cpu_.empty()) step_.submit_async();
  }
  if (!on_cpu_.empty()) {
    const auto t0 = std::chrono::steady_clock::now();
    ffn.compute_experts(m, moe.experts(), on_cpu_, xn_host, n_tok, cpu);
    // Each CPU expert's rows of slots_ (its positions are contiguous); the GPU's experts write the others.
    const int64_t D = s_.n_embd;
    int64_t positions = 0;
    for (const int32_t e : on_cpu_) {
      const int64_t p0 = ffn.start(e), c = ffn.count(e);
      positions += c;
      step_.upload(ffn.position_outputs() + p0 * D, slots_.sub(p0 * D, c * D));
    }
    tier.observe_cpu(static_cast<int64_t>(on_cpu_.size()), positions,
                     std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  combine_experts(ffn, n_tok);
}

void GpuBlocks::on_experts(std::span<const int32_t> experts, std::span<const moe::ExpertWeights> weights) {
  const int64_t D = s_.n_embd, F = s_.n_ff_exp;
  for (size_t i = 0; i < experts.size(); ++i) {
    const auto e = experts[i];
    const moe::ExpertWeights& w = weights[i];
    delivered_[static_cast<size_t>(e)] = w;
    if (moe_x_.empty()) {
      // Gate and up read one rounded copy of the layer's input (all the layer's experts share their types).
      const quant::WeightView* ws[2] = {&w.gate, &w.up};
      gpu::DevArray in[2];
      rounded_inputs(ws, n_tok_ > 1 ? xg_ : xn_, n_tok_ > 1 ? n_tok_ * s_.n_expert_used : 1, D, in);
      moe_x_ = in[0];
      moe_up_x_ = in[1];
    }
    const int64_t p0 = ffn_->start(e), c = ffn_->count(e);
    const int64_t r0 = n_tok_ > 1 ? p0 : 0;  // one token: every expert reads row 0
    grouped_.push_back({w.gate, moe_x_.sub(r0 * D, c * D), gate_.sub(p0 * F, c * F), c});
    grouped_.push_back({w.up, moe_up_x_.sub(r0 * D, c * D), up_.sub(p0 * F, c * F), c});
  }
}

void GpuBlocks::moe_block_cpu(int64_t il, std::span<const float> norm, MoeLayers& moe, int64_t n_tok,
                              int32_t* routing, compute::Backend& cpu, float* xn_host, float* out_host) {
  const gpu::DevArray g = dev(norm);
  if (registering_) return;
  const int64_t D = s_.n_embd;
  step_.rms_norm(x_, g, xn_, n_tok, D, s_.norm_eps);
  step_.download(xn_.sub(0, n_tok * D), xn_host);
  step_.submit();
  moe.forward(il, xn_host, n_tok, out_host, routing, cpu);
  step_.upload(out_host, out_.sub(0, n_tok * D));
  step_.add(x_, out_, n_tok, D, false);
}

void GpuBlocks::end(float* x_host, int64_t first, int64_t rows) {
  step_.download(x_.sub(first * s_.n_embd, rows * s_.n_embd), x_host);
  step_.submit();
}

void GpuBlocks::logits(std::span<const float> out_norm, const quant::WeightView& output, int64_t first, int64_t rows,
                       float* logits) {
  const gpu::DevArray g = dev(out_norm);
  if (registering_) {
    step_.check_product(output);
    return;
  }
  const int64_t D = s_.n_embd, V = s_.n_vocab;
  step_.rms_norm(x_.sub(first * D, rows * D), g, xn_, rows, D, s_.norm_eps);
  for (int64_t t0 = 0; t0 < rows; t0 += logit_rows_) {
    const int64_t nt = std::min(logit_rows_, rows - t0);
    step_.product(output, round(output, xn_.sub(t0 * D, nt * D), nt, D), logits_, nt);
    step_.download(logits_.sub(0, nt * V), logits + t0 * V);
    step_.submit();
  }
}

}  // namespace moetier::model
