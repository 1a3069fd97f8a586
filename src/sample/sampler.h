// Token sampling from logits: repetition penalty, top-k, top-p (nucleus), min-p, temperature, then a draw —
// the order llama.cpp's default sampler chain applies them, so the same flags mean the same thing.
//
// Sources: nucleus sampling (Holtzman et al. 2020, "The Curious Case of Neural Text Degeneration"); min-p
// (Nguyen et al. 2024, "Turning Up the Heat: Min-p Sampling"); the repetition penalty of CTRL (Keskar et al. 2019):
// a positive logit is divided by the penalty, a negative one multiplied.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

namespace moetier::sample {

struct SamplerParams {
  float temperature = 0.8f;     // >= 0; 0: greedy (argmax), the other settings are then ignored
  int32_t top_k = 40;           // keep the k most likely tokens, >= 0; 0 keeps all
  float top_p = 0.95f;          // keep the smallest set whose probability reaches p, in (0, 1]; 1 keeps all
  float min_p = 0.05f;          // drop tokens below min_p x the top token's probability, in [0, 1); 0 keeps all
  float repeat_penalty = 1.0f;  // > 0; 1 = off
  int32_t repeat_last_n = 64;   // how many previous tokens the penalties look at, >= 0
  // OpenAI's penalties, as llama.cpp applies them over the same window: logit -= frequency_penalty x count +
  // presence_penalty x (count > 0), count the token's occurrences in the window. Each in [-2, 2]; 0 = off.
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  uint64_t seed = 0;            // the same seed and inputs give the same tokens
  // OpenAI's logit_bias: (token id, bias) pairs added to those logits before anything else (llama.cpp's sampler
  // chain starts with it too); ids in [0, n_vocab), each bias in [-100, 100] (-100 all but bans a token, 100 all
  // but forces it). Greedy sampling honours it.
  std::vector<std::pair<int32_t, float>> logit_bias;
  // Tokens never sampled (their logits become -inf after the bias), ids in [0, n_vocab): `run --ignore-eos` bans
  // the end-of-generation tokens, as llama.cpp's flag does. Greedy sampling honours it.
  std::vector<int32_t> banned;
};

class Sampler {
 public:
  // Allocates its candidate buffers for n_vocab tokens once; sample() allocates nothing. Throws moetier::Error
  // naming the setting for a value outside the ranges above (NaN or infinite included): the CLI checks its flags
  // as it parses them, this guards every other caller.
  Sampler(const SamplerParams& p, int64_t n_vocab);

  // Next token from logits [n_vocab]; `history` holds the tokens so far (prompt and generated), of which the
  // last repeat_last_n are penalised.
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history);

  const SamplerParams& params() const { return p_; }

 private:
  struct Candidate {
    int32_t id;
    float logit;
  };
  double uniform01();  // [0, 1), 53 bits: the same stream on every platform for a given seed

  SamplerParams p_;
  std::vector<Candidate> cand_;  // [n_vocab]
  std::vector<float> prob_;      // [n_vocab]
  std::mt19937_64 rng_;
};

}  // namespace moetier::sample
