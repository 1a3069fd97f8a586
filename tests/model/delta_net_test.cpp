// The Gated DeltaNet delta rule (model/delta_net.h): the chunked form a prompt runs equals the token-at-a-time
// recurrence a decode step runs, within float rounding, on random inputs; and a whole qwen35moe model gives the same
// logits for a prompt run as one batch, in chunks of n_batch, or one token at a time.
#include "model/delta_net.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include "gguf/gguf.h"
#include "hwy/targets.h"
#include "model/model.h"
#include "quant/kernels/matmul_kernels.h"
#include "test_support.h"

namespace moetier::model {
namespace {

// ||a - b|| / ||b||
double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(num / den);
}

// Random inputs of one value head, laid out as DeltaNet lays them: q, k, v of a token side by side in a row.
struct HeadInputs {
  int64_t n_tok, d_k, d_v, stride;
  std::vector<float> qkv;     // [n_tok, 2 d_k + d_v]: q and k L2-normalised (q also scaled by 1/sqrt(d_k))
  std::vector<float> g;       // [n_tok]: log-decay, as softplus(alpha + dt_bias) * A makes it (< 0)
  std::vector<float> beta;    // [n_tok]: in (0, 1)
  std::vector<float> state0;  // [d_v, d_k]: a state left by earlier tokens

  // decay_scale multiplies every log-decay: 10 makes ~-3 a token, so a chunk's cumulative decay passes e^-64,
  // where the chunked form flushes its factors (chunk_decay in model/delta_net.cpp).
  HeadInputs(int64_t n, int64_t dk, int64_t dv, uint32_t seed, float decay_scale = 1.0f)
      : n_tok(n),
        d_k(dk),
        d_v(dv),
        stride(2 * dk + dv),
        qkv(static_cast<size_t>(n * stride)),
        g(static_cast<size_t>(n)),
        beta(static_cast<size_t>(n)),
        state0(static_cast<size_t>(dv * dk)) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_real_distribution<float> uni(0.0f, 1.0f);
    for (auto& x : qkv) x = normal(rng);
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t part = 0; part < 2; ++part) {
        float* x = qkv.data() + t * stride + part * dk;
        double ss = 0.0;
        for (int64_t i = 0; i < dk; ++i) ss += static_cast<double>(x[i]) * x[i];
        const float s = static_cast<float>(1.0 / std::sqrt(ss)) * (part == 0 ? 1.0f / std::sqrt(float(dk)) : 1.0f);
        for (int64_t i = 0; i < dk; ++i) x[i] *= s;
      }
      const float a = normal(rng) - 1.0f;
      g[static_cast<size_t>(t)] = -std::log1p(std::exp(a)) * (0.5f + uni(rng)) * decay_scale;
      beta[static_cast<size_t>(t)] = 1.0f / (1.0f + std::exp(-normal(rng)));
    }
    for (auto& x : state0) x = 0.1f * normal(rng);
  }

  DeltaHead head(float* out) const {
    DeltaHead h;
    h.q = qkv.data();
    h.k = qkv.data() + d_k;
    h.v = qkv.data() + 2 * d_k;
    h.qkv_stride = stride;
    h.g = g.data();
    h.beta = beta.data();
    h.gb_stride = 1;
    h.out = out;
    h.out_stride = d_v;
    return h;
  }
};

struct HeadRun {
  std::vector<float> out, state;
};

HeadRun recurrent(const HeadInputs& in) {
  HeadRun r{std::vector<float>(static_cast<size_t>(in.n_tok * in.d_v)), in.state0};
  delta_rule_recurrent(in.head(r.out.data()), in.n_tok, in.d_k, in.d_v, r.state.data());
  return r;
}

HeadRun chunked(const HeadInputs& in, int64_t chunk) {
  HeadRun r{std::vector<float>(static_cast<size_t>(in.n_tok * in.d_v)), in.state0};
  DeltaChunkScratch s(chunk, in.d_k, in.d_v);
  delta_rule_chunked(in.head(r.out.data()), in.n_tok, in.d_k, in.d_v, r.state.data(), s);
  return r;
}

// The chunked form reorders the same sums (and multiplies decays e^(G_r - G_s) where the recurrence applies them
// one token at a time): float rounding of O(chunk) terms, relative 1e-5 at most here; a wrong term, sign or decay
// lands at 1e-1 and beyond.
constexpr double kRoundingTolerance = 1e-5;

// On every Highway target the CPU runs (the chunk's sums are quant/kernels/vec_kernels.h's value sums).
TEST(DeltaNet, ChunkedEqualsRecurrent) {
  double worst = 0.0;
  for (const int64_t target : quant::kernels::compiled_targets()) {
    hwy::SetSupportedTargetsForTest(target);
    for (const int64_t chunk : {64, 16, 7}) {
      for (const int64_t n_tok : {1, 2, 63, 64, 65, 150}) {
        const HeadInputs in(n_tok, 64, 64, static_cast<uint32_t>(1000 * chunk + n_tok));
        const HeadRun a = recurrent(in), b = chunked(in, chunk);
        worst = std::max({worst, rel_l2(b.out, a.out), rel_l2(b.state, a.state)});
        EXPECT_LE(rel_l2(b.out, a.out), kRoundingTolerance)
            << hwy::TargetName(target) << " chunk " << chunk << " n_tok " << n_tok;
        EXPECT_LE(rel_l2(b.state, a.state), kRoundingTolerance)
            << hwy::TargetName(target) << " chunk " << chunk << " n_tok " << n_tok;
      }
    }
  }
  hwy::SetSupportedTargetsForTest(0);
  std::printf("  chunked vs recurrent: worst rel L2 %.2e (outputs and final states)\n", worst);
}

// Decays past e^-64 within a chunk, below which the chunked form flushes its factors to 0 (and W's rows with them),
// so that no subnormal float slows the sums. The flushed terms are below float precision against the undecayed
// ones: the forms still agree within rounding. At ~-1.1 a token only a chunk's last rows reach the flush and the
// state carried between chunks still counts; at ~-3 most of a chunk is flushed. On every target.
TEST(DeltaNet, ChunkedEqualsRecurrentUnderStrongDecay) {
  for (const int64_t target : quant::kernels::compiled_targets()) {
    hwy::SetSupportedTargetsForTest(target);
    for (const float scale : {3.7f, 10.0f}) {
      for (const int64_t n_tok : {64, 150}) {
        const HeadInputs in(n_tok, 64, 64, static_cast<uint32_t>(77 + n_tok), scale);
        ASSERT_LT(std::accumulate(in.g.begin(), in.g.begin() + 64, 0.0f), -64.0f);  // the flush is reached
        const HeadRun a = recurrent(in), b = chunked(in, 64);
        EXPECT_LE(rel_l2(b.out, a.out), kRoundingTolerance)
            << hwy::TargetName(target) << " scale " << scale << " n_tok " << n_tok;
        EXPECT_LE(rel_l2(b.state, a.state), kRoundingTolerance)
            << hwy::TargetName(target) << " scale " << scale << " n_tok " << n_tok;
      }
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

// A chunk whose cumulative decay rises somewhere (a positive log-decay: no real model's) takes its decays
// unflushed, and still equals the recurrence.
TEST(DeltaNet, ChunkedEqualsRecurrentWhereTheDecayRises) {
  HeadInputs in(150, 64, 64, 91, 10.0f);
  in.g[20] = 1.0f;
  in.g[100] = 2.0f;
  const HeadRun a = recurrent(in), b = chunked(in, 64);
  EXPECT_LE(rel_l2(b.out, a.out), kRoundingTolerance);
  EXPECT_LE(rel_l2(b.state, a.state), kRoundingTolerance);
}

// Head sizes that differ, and that no vector width divides (the sums' scalar tails), on every target.
TEST(DeltaNet, ChunkedEqualsRecurrentWithUnequalHeadSizes) {
  for (const int64_t target : quant::kernels::compiled_targets()) {
    hwy::SetSupportedTargetsForTest(target);
    for (const auto& [d_k, d_v] : {std::pair<int64_t, int64_t>{32, 48}, {20, 36}, {37, 5}}) {
      for (const int64_t chunk : {64, 7}) {
        const HeadInputs in(100, d_k, d_v, static_cast<uint32_t>(7 + d_k + chunk));
        const HeadRun a = recurrent(in), b = chunked(in, chunk);
        EXPECT_LE(rel_l2(b.out, a.out), kRoundingTolerance)
            << hwy::TargetName(target) << " d_k " << d_k << " d_v " << d_v << " chunk " << chunk;
        EXPECT_LE(rel_l2(b.state, a.state), kRoundingTolerance)
            << hwy::TargetName(target) << " d_k " << d_k << " d_v " << d_v << " chunk " << chunk;
      }
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

TEST(DeltaNet, ChunkedDiffersFromAWrongRecurrence) {
  // The comparison can fail: dropping the decay of one token moves the result far outside the tolerance.
  HeadInputs in(80, 64, 64, 11);
  const HeadRun a = recurrent(in);
  in.g[40] = 0.0f;
  const HeadRun b = chunked(in, 64);
  EXPECT_GT(rel_l2(b.out, a.out), 100 * kRoundingTolerance);
}

// A whole model: the prompt as one batch (the chunked delta rule, chunks of 64 inside), in chunks of n_batch, and
// one token at a time (the recurrence) give the same logits within rounding (2e-6 measured, 2e-5 allowed; a wrong
// decay or a lost state lands at 1e-1). The products are exact float products here, so that only the delta rule's
// and attention's summation orders differ.
TEST(DeltaNet, ModelPrefillMatchesDecode) {
  const auto f = gguf::GgufModel::open(test::oracle_model("tiny-qwen35moe-F16"));
  const int64_t n = 150;
  std::vector<int32_t> tokens(static_cast<size_t>(n));
  std::mt19937 rng(3);
  for (auto& t : tokens) t = static_cast<int32_t>(rng() % 500 + 3);
  const auto logits_of = [&](int64_t n_batch) {
    const auto m =
        load_model(f, ModelOptions{.n_ctx = 256, .n_batch = n_batch, .rounding = quant::ActivationRounding::exact});
    const int64_t V = m->info().n_vocab;
    std::vector<float> all(static_cast<size_t>(n * V));
    for (int64_t p = 0; p < n; p += n_batch) {
      const int64_t len = std::min(n_batch, n - p);
      m->forward(std::span(tokens).subspan(static_cast<size_t>(p), static_cast<size_t>(len)), p,
                 std::span(all).subspan(static_cast<size_t>(p * V), static_cast<size_t>(len * V)), LogitsMode::all);
    }
    return all;
  };
  const std::vector<float> whole = logits_of(256), batches = logits_of(48), single = logits_of(1);
  std::printf("  prefill vs decode logits: rel L2 %.2e (one batch), %.2e (batches of 48)\n", rel_l2(whole, single),
              rel_l2(batches, single));
  EXPECT_LE(rel_l2(whole, single), 2e-5);
  EXPECT_LE(rel_l2(batches, single), 2e-5);
}

}  // namespace
}  // namespace moetier::model
