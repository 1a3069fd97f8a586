// The pieces that Gemma 4 added to the shared blocks, each against its formula: RoPE frequency factors (the
// global layers' proportional RoPE), KV cache rows of different widths per layer, GEGLU, and the final logit
// softcap and the refusal of the keys the MoE form does not use, on the tiny reference model.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "model/eval.h"
#include "model/glu.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "model/model_rewrite.h"
#include "model/rope.h"
#include "test_support.h"
#include "util/error.h"

namespace moetier::model {
namespace {

namespace fs = std::filesystem;

std::vector<float> ramp(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = 0.25f * static_cast<float>(i + 1) - 1.0f;
  return v;
}

// A factor of 1e30 stops a pair (angle ~0), a factor of 1 leaves it as without factors, and a factor of 2 at position
// 2p turns it as far as no factor at position p (the angles are pos * base^(-2i/n_rot) / factor).
TEST(Gemma4Blocks, RopeFrequencyFactorsDivideEachPairsAngle) {
  RopeConfig plain{.style = RopeStyle::neox, .n_rot = 8, .freq_base = 10000.0f};
  RopeConfig stop = plain;
  stop.freq_factors = {1.0f, 1e30f, 1.0f, 1e30f};
  RopeConfig half = plain;
  half.freq_factors = {2.0f, 2.0f, 2.0f, 2.0f};
  const int64_t n_heads = 2, hd = 10;  // 2 elements per head beyond n_rot stay as they are
  const std::vector<float> x = ramp(n_heads * hd);
  std::vector<float> a = x, b = x, c = x, d = x;
  Rope(plain).apply(a.data(), n_heads, hd, 6);
  Rope(stop).apply(b.data(), n_heads, hd, 6);
  Rope(half).apply(c.data(), n_heads, hd, 12);
  Rope(plain).apply(d.data(), n_heads, hd, 6);
  for (int64_t h = 0; h < n_heads; ++h) {
    for (int64_t i = 0; i < hd; ++i) {
      const auto k = static_cast<size_t>(h * hd + i);
      // NeoX pairs (i, i + 4): pairs 1 and 3 are elements 1, 5 and 3, 7.
      const bool stopped = i < 8 && (i % 4 == 1 || i % 4 == 3);
      // A stopped pair turns by ~1e-30 radians: its elements move by that fraction of the pair's size.
      if (stopped || i >= 8) {
        EXPECT_NEAR(b[k], x[k], 1e-25) << "head " << h << " element " << i;
      } else {
        EXPECT_EQ(b[k], a[k]) << "head " << h << " element " << i;
      }
      EXPECT_EQ(c[k], d[k]) << "head " << h << " element " << i;
    }
  }
}

// Layer 0 rows of 4 elements, layer 1 of 8: each layer reads back what it stored, at its own width, for both
// element types; the uniform constructor is the per-layer one with equal widths.
TEST(Gemma4Blocks, KvCacheRowsOfDifferentWidthsPerLayer) {
  for (const KvType type : {KvType::f32, KvType::f16}) {
    KvCache kv(std::vector<int64_t>{4, 8}, 3, type);
    EXPECT_EQ(kv.n_layer(), 2);
    EXPECT_EQ(kv.n_kv(0), 4);
    EXPECT_EQ(kv.n_kv(1), 8);
    EXPECT_EQ(kv.bytes(), (2 * 3 * 4 + 2 * 3 * 8) * (type == KvType::f16 ? 2u : 4u));
    for (int64_t l = 0; l < 2; ++l) {
      for (int64_t pos = 0; pos < 3; ++pos) {
        std::vector<float> k(static_cast<size_t>(kv.n_kv(l))), v(k.size());
        for (size_t i = 0; i < k.size(); ++i) {
          k[i] = static_cast<float>(100 * l + 10 * pos + static_cast<int64_t>(i));
          v[i] = -k[i];
        }
        kv.store(l, pos, k.data(), v.data());
      }
    }
    for (int64_t l = 0; l < 2; ++l) {
      const int64_t n = kv.n_kv(l);
      // A query of ones scores each row by its sum; a one-hot probability reads one row of V.
      const std::vector<float> q(static_cast<size_t>(n), 1.0f);
      std::vector<float> s(3);
      kv.scores(l, 0, q.data(), 1, n, 0, 3, 1.0f, s.data(), 3);
      for (int64_t pos = 0; pos < 3; ++pos) {
        const double want = static_cast<double>(n) * static_cast<double>(100 * l + 10 * pos) + n * (n - 1) / 2.0;
        EXPECT_EQ(s[static_cast<size_t>(pos)], static_cast<float>(want)) << "layer " << l << " pos " << pos;
      }
      const std::vector<float> p = {0.0f, 0.0f, 1.0f};
      std::vector<float> o(static_cast<size_t>(n));
      kv.values(l, 0, p.data(), 1, 3, 0, 3, n, o.data());
      for (int64_t i = 0; i < n; ++i) EXPECT_EQ(o[static_cast<size_t>(i)], -static_cast<float>(100 * l + 20 + i));
    }
    EXPECT_EQ(KvCache(3, 5, 16, type).bytes(), KvCache(std::vector<int64_t>(3, 16), 5, type).bytes());
  }
}

// GEGLU with the tanh form of GELU, against the formula in double: float's rounding of tanh and the products.
TEST(Gemma4Blocks, GegluIsTanhGeluTimesUp) {
  const std::vector<float> gate = {-12.0f, -5.0f, -2.5f, -1.0f, -0.3f, 0.0f, 1e-4f, 0.5f, 1.0f, 2.0f, 4.0f, 11.0f};
  std::vector<float> up(gate.size()), h(gate.size());
  for (size_t i = 0; i < up.size(); ++i) up[i] = 0.5f + 0.25f * static_cast<float>(i);
  glu(GluConfig{.kind = GluConfig::Kind::geglu}, gate.data(), up.data(), h.data(), static_cast<int64_t>(gate.size()));
  for (size_t i = 0; i < gate.size(); ++i) {
    const double x = gate[i];
    const double want = 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * x * (1.0 + 0.044715 * x * x))) * up[i];
    // Relative to x * up, the size of the terms before 1 + tanh cancels (large negative x).
    EXPECT_NEAR(h[i], want, 1e-6 * std::abs(x * up[i])) << "gate " << gate[i];
  }
}

const fs::path& tiny_gemma4() {
  static const fs::path p = test::oracle_model("tiny-gemma4-F16");
  return p;
}

// final_logit_softcapping 30: every logit is strictly inside (-30, 30), and the cap bends the largest ones (with
// these random weights the uncapped logits reach past the cap's linear range).
TEST(Gemma4Blocks, LogitsAreSoftCapped) {
  const gguf::GgufModel f = gguf::GgufModel::open(tiny_gemma4());
  const auto m = load_model(f, ModelOptions{.n_ctx = 64});
  std::vector<int32_t> tokens;
  for (int32_t i = 0; i < 24; ++i) tokens.push_back(1 + (i * 37) % 500);
  const EvalResult r = evaluate(*m, tokens, 16);
  float max_abs = 0.0f;
  for (const float v : r.logits) {
    ASSERT_TRUE(std::isfinite(v));
    max_abs = std::max(max_abs, std::abs(v));
  }
  EXPECT_LT(max_abs, 30.0f);
  EXPECT_GT(max_abs, 1.0f);
}

// The tiny Gemma 4 file rewritten into `out_name` with `edit_md` applied to its metadata.
fs::path rewrite(const std::string& out_name, const std::function<void(gguf::Metadata&)>& edit_md) {
  return test::rewrite_model(tiny_gemma4(), "gemma4_blocks", out_name, edit_md);
}
using test::load_error;

TEST(Gemma4Blocks, RefusesKeysOfTheDenseForms) {
  for (const char* key : {"gemma4.attention.shared_kv_layers", "gemma4.embedding_length_per_layer_input"}) {
    const fs::path p =
        rewrite(std::string(key) + ".gguf", [&](gguf::Metadata& md) { md.set(key, gguf::Value::of_uint32(2)); });
    const std::string msg = load_error(p);
    EXPECT_NE(msg.find(std::string("metadata key '") + key + "' is 2, expected 0"), std::string::npos) << msg;
  }
}

TEST(Gemma4Blocks, PerLayerHeadCountsMustMatchTheBlocks) {
  const fs::path p = rewrite("kv_heads.gguf", [](gguf::Metadata& md) {
    std::vector<gguf::Value> v(4, gguf::Value::of_uint32(2));  // blk.3 has one KV head of 128
    md.set("gemma4.attention.head_count_kv", gguf::Value::of_array(gguf::ValueType::UINT32, v));
  });
  const std::string msg = load_error(p);
  EXPECT_NE(msg.find("gemma4.attention.head_count_kv"), std::string::npos) << msg;
  EXPECT_NE(msg.find("blk.3.attn_k.weight"), std::string::npos) << msg;
}

}  // namespace
}  // namespace moetier::model
