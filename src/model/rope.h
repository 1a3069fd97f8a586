// Rotary position embedding, RoPE (Su et al. 2021, "RoFormer"), with YaRN context extension (Peng et al. 2023,
// "YaRN: Efficient Context Window Extension of Large Language Models").
//
// Pair i (i < n_rot/2) of a head vector rotates by theta_i = pos * base^(-2i/n_rot). Two pairings exist:
//   normal (GPT-J / llama): elements (2i, 2i+1);   neox (GPT-NeoX, Qwen, gpt-oss): elements (i, i + n_rot/2).
// Elements at and beyond n_rot are left unchanged.
//
// YaRN (as ggml's rope_yarn evaluates it, which is what GGUF models are run with): with s = 1/factor,
//   theta_interp = s * theta_extrap;  ramp_i = 1 - clamp((i - lo) / max(0.001, hi - lo), 0, 1)
//   theta = theta_interp * (1 - ramp_i * ext) + theta_extrap * ramp_i * ext
//   cos, sin scaled by mscale = attn_factor * (1 + 0.1 * ln(factor))
// where lo = floor(corr_dim(beta_fast)), hi = ceil(corr_dim(beta_slow)) clamped to [0, n_rot-1], and
//   corr_dim(b) = n_rot * ln(n_ctx_orig / (2 pi b)) / (2 ln base).
// The gpt-oss reference (model card / reference implementation) uses the same ramp with beta_fast 32, beta_slow 1
// and "concentration" 0.1 ln(factor) + 1.
//
// Frequency factors (ggml's rope_ext freq_factors, a model's rope_freqs.weight [n_rot/2]): pair i rotates by
// theta_i / freq_factors[i] before YaRN. Gemma 4's global layers use them for "proportional" RoPE: factor 1 for
// the pairs that rotate and 1e30 for the rest, whose angle is then ~1e-30 (cos 1: left as they are).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace moetier::model {

enum class RopeStyle { normal, neox };

struct RopeConfig {
  RopeStyle style = RopeStyle::normal;
  int64_t n_rot = 0;         // rotated dimensions per head (even, <= head_dim)
  float freq_base = 10000.0f;
  // YaRN; factor 1 disables it.
  float yarn_factor = 1.0f;       // context extension factor (freq_scale = 1 / factor)
  int64_t yarn_n_ctx_orig = 0;    // the training context length the ramp is computed for
  float yarn_beta_fast = 32.0f;
  float yarn_beta_slow = 1.0f;
  float yarn_ext_factor = 1.0f;   // mix of extrapolation in the ramp (ggml's ext_factor)
  float yarn_attn_factor = 1.0f;  // extra multiplier on mscale
  std::vector<float> freq_factors;  // [n_rot/2] divisors of each pair's angle, or empty (all 1)
};

class Rope {
 public:
  Rope() = default;
  explicit Rope(const RopeConfig& cfg);
  // Rotates x [n_heads, head_dim] in place for position `pos`.
  void apply(float* x, int64_t n_heads, int64_t head_dim, int64_t pos) const;
  // cs[n_rot / 2, 2]: the (cos, sin) apply() rotates pair i by at position `pos`, mscale included (what a GPU
  // step's RoPE kernel reads, so that both rotate by the same numbers).
  void table(int64_t pos, float* cs) const;
  const RopeConfig& config() const { return cfg_; }

 private:
  // (cos, sin) * mscale of pair i whose unscaled angle is theta_extrap (pos * base^(-2i/n_rot)).
  std::pair<float, float> rotation(int64_t i, float theta_extrap) const;
  RopeConfig cfg_;
  float theta_scale_ = 1.0f;  // base^(-2/n_rot)
  float freq_scale_ = 1.0f;
  float ext_factor_ = 0.0f;
  float mscale_ = 1.0f;
  float corr_lo_ = 0.0f, corr_hi_ = 0.0f;
};

}  // namespace moetier::model
