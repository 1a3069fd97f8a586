#include "model/moe_layers.h"

#include <cassert>
#include <initializer_list>
#include <string>
#include <string_view>

#include "moe/resident_experts.h"
#include "util/error.h"

namespace moetier::model {

MoeHparams read_moe_hparams(const gguf::GgufModel& file, const ArchMetadata& md, const CommonHparams& c,
                            const ModelOptions& opts, int64_t n_ff_fallback) {
  MoeHparams hp;
  hp.n_expert = md.count("expert_count");
  const int64_t k = md.count("expert_used_count");
  md.require(k <= hp.n_expert, "expert_used_count", k, "at most expert_count");
  hp.n_expert_used = k;
  if (opts.n_expert_used != 0) {
    if (opts.n_expert_used < 1 || opts.n_expert_used > hp.n_expert) {
      fail("n_expert_used override {} is out of range, expected 1..{} (the model's expert_count)", opts.n_expert_used,
           hp.n_expert);
    }
    hp.n_expert_used = opts.n_expert_used;
  }
  const bool ff_fallback = n_ff_fallback > 0 && !md.has("expert_feed_forward_length");
  hp.n_ff_exp = ff_fallback ? n_ff_fallback : md.count("expert_feed_forward_length");
  hp.n_dense_lead = md.count_or("leading_dense_block_count", 0, 0);
  md.require(hp.n_dense_lead < c.n_layer, "leading_dense_block_count", hp.n_dense_lead,
             "less than block_count (at least one MoE layer)");
  // Against the first MoE block's router [n_embd, n_expert] and stacked up projection [n_embd, n_ff, n_expert]
  // before the routers, the expert source and the MoE block's buffers are sized by them; the other MoE blocks are
  // bound with the same shapes.
  const int64_t il = hp.n_dense_lead, D = c.n_embd, E = hp.n_expert, F = hp.n_ff_exp;
  check_shape(file, md, "expert_count", E, gguf::block_tensor(il, "ffn_gate_inp.weight"), {D, E},
              fmt::format("[{}, {}] (n_embd, expert_count)", D, E));
  const char* ff_key = ff_fallback ? "feed_forward_length" : "expert_feed_forward_length";
  const std::string gate_up = gguf::block_tensor(il, "ffn_gate_up_exps.weight");
  hp.merged_gate_up = file.find(gate_up) != nullptr;
  if (hp.merged_gate_up) {
    check_shape(file, md, ff_key, F, gate_up, {D, 2 * F, E},
                fmt::format("[{}, {}, {}] (n_embd, 2 x {}, expert_count)", D, 2 * F, E, ff_key));
  } else {
    check_shape(file, md, ff_key, F, gguf::block_tensor(il, "ffn_up_exps.weight"), {D, F, E},
                fmt::format("[{}, {}, {}] (n_embd, {}, expert_count)", D, F, E, ff_key));
  }
  return hp;
}

void check_dense_ffn_length(const gguf::GgufModel& file, const ArchMetadata& md, int64_t il, int64_t n_embd,
                            int64_t n_ff) {
  check_shape(file, md, "feed_forward_length", n_ff, gguf::block_tensor(il, "ffn_up.weight"), {n_embd, n_ff},
              fmt::format("[{}, {}] (n_embd, feed_forward_length)", n_embd, n_ff));
}

MoeLayers::MoeLayers(const gguf::GgufModel& file, const gguf::TensorBinder& bind, int64_t n_layer, int64_t n_embd,
                     const MoeHparams& hp, const RouterConfig& router, const GluConfig& glu, MoeTensors with,
                     int64_t max_tok, RoutingOverride* routing_override, std::unique_ptr<moe::ExpertSource> experts)
    : hp_(hp), ordinal_(static_cast<size_t>(n_layer), -1) {
  using gguf::block_tensor;
  for (int64_t il = hp.n_dense_lead; il < n_layer; ++il) {
    ordinal_[static_cast<size_t>(il)] = static_cast<int64_t>(layers_.size());
    layers_.push_back(il);
    RouterWeights& r = routers_.emplace_back();
    r.gate_inp = bind.matrix(block_tensor(il, "ffn_gate_inp.weight"), n_embd, hp.n_expert);
    if (with.router_bias) r.bias = bind.vector(block_tensor(il, "ffn_gate_inp.bias"), hp.n_expert);
    if (with.expert_scale) r.expert_scale = bind.vector(block_tensor(il, "ffn_down_exps.scale"), hp.n_expert);
  }
  moe::ExpertShape shape;
  shape.n_moe_layers = n_moe_layers();
  shape.moe_layers = layers_;
  shape.n_expert = hp.n_expert;
  shape.n_embd = n_embd;
  shape.n_ff = hp.n_ff_exp;
  shape.has_bias = with.expert_bias;
  shape.merged_gate_up = hp.merged_gate_up;
  if (!experts) {
    auto resident = std::make_unique<moe::ResidentExperts>(file, shape, bind.expert_repack_target(),
                                                             bind.evict_expert_pages());
    repacked_expert_stacks_ = resident->repacked_stacks();
    experts_ = std::move(resident);
    experts_in_file_ = true;
  } else {
    const moe::ExpertShape& g = experts->shape();
    if (g.moe_layers != shape.moe_layers || g.n_expert != shape.n_expert || g.n_embd != shape.n_embd ||
        g.n_ff != shape.n_ff || g.has_bias != shape.has_bias || g.merged_gate_up != shape.merged_gate_up) {
      fail(
          "expert source shape (MoE layers {} from block {}, experts {}, n_embd {}, n_ff {}{}) does not match the "
          "model's (MoE layers {} from block {}, experts {}, n_embd {}, n_ff {}{})",
          g.n_moe_layers, g.moe_layers.empty() ? -1 : g.moe_layers.front(), g.n_expert, g.n_embd, g.n_ff,
          g.merged_gate_up ? ", merged gate_up" : "", shape.n_moe_layers, layers_.front(), shape.n_expert, shape.n_embd,
          shape.n_ff, shape.merged_gate_up ? ", merged gate_up" : "");
    }
    experts_ = std::move(experts);
  }
  ffn_ = MoeFfn(router, glu, n_embd, hp.n_ff_exp, max_tok);
  ffn_.set_routing_override(routing_override);
}

void MoeLayers::forward(int64_t il, const float* xn, int64_t n_tok, float* out, int32_t* routing, compute::Backend& be,
                        const float* xr) {
  const int64_t m = ordinal(il);
  assert(m >= 0 && "moe_block on a dense block");
  ffn_.forward(m, routers_[static_cast<size_t>(m)], *experts_, xn, xr, n_tok, out, routing, be);
}

FfnWeights bind_dense_ffn(const gguf::TensorBinder& bind, int64_t il, int64_t n_embd, int64_t n_ff) {
  using gguf::block_tensor;
  FfnWeights w;
  w.gate = bind.matrix(block_tensor(il, "ffn_gate.weight"), n_embd, n_ff);
  w.up = bind.matrix(block_tensor(il, "ffn_up.weight"), n_embd, n_ff);
  w.down = bind.matrix(block_tensor(il, "ffn_down.weight"), n_ff, n_embd);
  return w;
}

}  // namespace moetier::model
