#include "model/rope.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <numbers>

namespace moetier::model {

namespace {

float corr_dim(int64_t n_rot, int64_t n_ctx_orig, float beta, float base) {
  return static_cast<float>(n_rot) *
         std::log(static_cast<float>(n_ctx_orig) / (beta * 2.0f * std::numbers::pi_v<float>)) /
         (2.0f * std::log(base));
}

}  // namespace

Rope::Rope(const RopeConfig& cfg) : cfg_(cfg) {
  assert(cfg.n_rot > 0 && cfg.n_rot % 2 == 0);
  assert(cfg.freq_factors.empty() || static_cast<int64_t>(cfg.freq_factors.size()) == cfg.n_rot / 2);
  theta_scale_ = std::pow(cfg.freq_base, -2.0f / static_cast<float>(cfg.n_rot));
  if (cfg.yarn_factor != 1.0f) {
    freq_scale_ = 1.0f / cfg.yarn_factor;
    ext_factor_ = cfg.yarn_ext_factor;
    mscale_ = cfg.yarn_attn_factor;
    if (ext_factor_ != 0.0f) mscale_ *= 1.0f + 0.1f * std::log(cfg.yarn_factor);
    const float lo = std::floor(corr_dim(cfg.n_rot, cfg.yarn_n_ctx_orig, cfg.yarn_beta_fast, cfg.freq_base));
    const float hi = std::ceil(corr_dim(cfg.n_rot, cfg.yarn_n_ctx_orig, cfg.yarn_beta_slow, cfg.freq_base));
    corr_lo_ = std::max(0.0f, lo);
    corr_hi_ = std::min(static_cast<float>(cfg.n_rot - 1), hi);
  }
}

std::pair<float, float> Rope::rotation(int64_t i, float theta_extrap) const {
  // The pair's unscaled angle: ggml divides by the frequency factor before YaRN.
  const float te = cfg_.freq_factors.empty() ? theta_extrap : theta_extrap / cfg_.freq_factors[static_cast<size_t>(i)];
  float theta = freq_scale_ * te;
  if (ext_factor_ != 0.0f) {
    const float y = (static_cast<float>(i) - corr_lo_) / std::max(0.001f, corr_hi_ - corr_lo_);
    const float ramp = (1.0f - std::min(1.0f, std::max(0.0f, y))) * ext_factor_;
    theta = theta * (1.0f - ramp) + te * ramp;
  }
  return {std::cos(theta) * mscale_, std::sin(theta) * mscale_};
}

void Rope::table(int64_t pos, float* cs) const {
  // theta is advanced by repeated multiplication, as ggml does (and apply() does), so angles agree to the last bit.
  float theta_extrap = static_cast<float>(pos);
  for (int64_t i = 0; i < cfg_.n_rot / 2; ++i) {
    const auto [c, s] = rotation(i, theta_extrap);
    cs[2 * i] = c;
    cs[2 * i + 1] = s;
    theta_extrap *= theta_scale_;
  }
}

void Rope::apply(float* x, int64_t n_heads, int64_t head_dim, int64_t pos) const {
  const int64_t half = cfg_.n_rot / 2;
  float theta_extrap = static_cast<float>(pos);
  for (int64_t i = 0; i < half; ++i) {
    const auto [c, s] = rotation(i, theta_extrap);
    for (int64_t h = 0; h < n_heads; ++h) {
      float* v = x + h * head_dim;
      const int64_t a = cfg_.style == RopeStyle::normal ? 2 * i : i;
      const int64_t b = cfg_.style == RopeStyle::normal ? 2 * i + 1 : i + half;
      const float x0 = v[a], x1 = v[b];
      v[a] = x0 * c - x1 * s;
      v[b] = x0 * s + x1 * c;
    }
    theta_extrap *= theta_scale_;
  }
}

}  // namespace moetier::model
