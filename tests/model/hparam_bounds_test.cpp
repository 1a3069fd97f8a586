// Hyperparameters are checked against the tensors that exist before anything is sized by them: the block count
// against the blk.N names, widths, head counts and head sizes, expert counts and FFN widths against the shapes
// of the first block's tensors. Each error names the key, its value and what contradicts it, both where the
// engine first reads a file (model::summarize, which sizes the KV cache estimate) and at load; a count from a
// corrupt header allocates nothing on the way.
#include <sys/resource.h>

#include <cctype>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <string>

#include <gtest/gtest.h>

#include "cli/run_cli.h"
#include "gguf/gguf.h"
#include "gguf/writer.h"
#include "model/model.h"
#include "test_support.h"
#include "util/error.h"

namespace moetier::model {
namespace {

namespace fs = std::filesystem;

// `model` of ../shared/oracle/models rewritten as `out_name` with `edit` applied to its metadata.
fs::path rewrite(const std::string& model, const std::string& out_name,
                 const std::function<void(gguf::Metadata&)>& edit) {
  const gguf::GgufModel src = gguf::GgufModel::open(test::oracle_dir() / "models" / (model + ".gguf"));
  const fs::path out = test::tmp_dir("model_hparam_bounds") / (out_name + ".gguf");
  gguf::GgufWriter w(out, src.shards().front().alignment);
  gguf::Metadata md = src.metadata();
  edit(md);
  w.set_metadata(md);
  for (const auto& t : src.tensors()) {
    w.add_tensor({t.name, t.type, std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims)});
  }
  for (const auto& t : src.tensors()) w.write_tensor_data(std::span<const uint8_t>(t.data, t.n_bytes));
  w.finish();
  return out;
}

fs::path with_key(const std::string& model, const std::string& key, gguf::Value v) {
  std::string name = model + "-" + key + "-" + v.to_display();
  for (char& ch : name) ch = std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' ? ch : '_';
  return rewrite(model, name, [&](gguf::Metadata& md) { md.set(key, v); });
}

// Both model::summarize and load_model throw an Error containing every word of `words`.
void expect_refused(const fs::path& p, std::initializer_list<std::string> words) {
  SCOPED_TRACE(p.filename().string());
  const gguf::GgufModel f = gguf::GgufModel::open(p);
  std::string summarize_msg = "(no error)", load_msg = "(no error)";
  try {
    summarize(f);
  } catch (const Error& e) {
    summarize_msg = e.what();
  }
  try {
    load_model(f, ModelOptions{.n_ctx = 16});
  } catch (const Error& e) {
    load_msg = e.what();
  }
  for (const auto& w : words) {
    EXPECT_NE(summarize_msg.find(w), std::string::npos) << "summarize: missing '" << w << "' in: " << summarize_msg;
    EXPECT_NE(load_msg.find(w), std::string::npos) << "load_model: missing '" << w << "' in: " << load_msg;
  }
}

// As expect_refused, for keys only the load reads (experts, FFN widths, the sliding window).
void expect_load_refused(const fs::path& p, std::initializer_list<std::string> words) {
  SCOPED_TRACE(p.filename().string());
  const gguf::GgufModel f = gguf::GgufModel::open(p);
  std::string msg = "(no error)";
  try {
    load_model(f, ModelOptions{.n_ctx = 16});
  } catch (const Error& e) {
    msg = e.what();
  }
  for (const auto& w : words) EXPECT_NE(msg.find(w), std::string::npos) << "missing '" << w << "' in: " << msg;
}

int64_t peak_rss_kib() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

// stories260K has blocks blk.0 .. blk.4. A block_count of 10^6 once sized 10^6 layers (~540 MiB) before binding
// failed on blk.5; 2^32 - 1 ended in std::bad_alloc. Both now fail before any per-block state exists.
TEST(HparamBounds, BlockCountBeyondTheBlocksPresent) {
  for (const uint32_t n : {1000000u, 4294967295u}) {
    const fs::path p = with_key("stories260K", "llama.block_count", gguf::Value::of_uint32(n));
    const int64_t before = peak_rss_kib();
    expect_refused(p, {"'llama.block_count' is " + std::to_string(n), "no tensor of block blk.5", "5 blocks"});
    EXPECT_LT(peak_rss_kib() - before, 64 * 1024) << "KiB of peak RSS grown while refusing block_count " << n;
  }
}

// Fewer blocks than the file has would silently drop layers.
TEST(HparamBounds, BlockCountBelowTheBlocksPresent) {
  expect_refused(with_key("stories260K", "llama.block_count", gguf::Value::of_uint32(3)),
                 {"'llama.block_count' is 3", "blk.4", "at least 5"});
}

TEST(HparamBounds, EmbeddingLengthAndVocabSizeAgainstTokenEmbedding) {
  expect_refused(with_key("stories260K", "llama.embedding_length", gguf::Value::of_uint32(1u << 30)),
                 {"'llama.embedding_length' is 1073741824", "token_embd.weight", "[64, 512]"});
  expect_refused(with_key("stories260K", "llama.vocab_size", gguf::Value::of_uint32(32000)),
                 {"'llama.vocab_size' is 32000", "token_embd.weight", "512 rows"});
  // The right vocab_size is accepted.
  const gguf::GgufModel ok = gguf::GgufModel::open(with_key("stories260K", "llama.vocab_size", gguf::Value::of_uint32(512)));
  EXPECT_EQ(load_model(ok, ModelOptions{.n_ctx = 16})->info().n_vocab, 512);
}

// Head counts and head sizes against attn_q [n_embd, n_head x head_dim] and attn_k [n_embd, n_head_kv x head_dim].
TEST(HparamBounds, HeadCountsAndHeadSizeAgainstAttentionShapes) {
  // llama: head size 64 / 16 = 4, so attn_k would have 4 x 4 rows; it has 32.
  expect_refused(with_key("stories260K", "llama.attention.head_count", gguf::Value::of_uint32(16)),
                 {"'llama.attention.head_count_kv' is 4", "head size of 4", "blk.0.attn_k.weight", "[64, 32]"});
  expect_refused(with_key("stories260K", "llama.attention.head_count_kv", gguf::Value::of_uint32(0)),
                 {"'llama.attention.head_count_kv' is 0", "at least 1"});
  expect_refused(with_key("stories260K", "llama.attention.head_count", gguf::Value::of_uint32(4096)),
                 {"'llama.attention.head_count' is 4096", "divisor of embedding_length"});
  // qwen3moe: key_length 2^40 (with head_count 4 that would overflow nothing here, but size every buffer).
  expect_refused(with_key("micro-qwen3moe-F16", "qwen3moe.attention.key_length", gguf::Value::of_uint64(1ull << 40)),
                 {"'qwen3moe.attention.head_count' is 4", "head size of 1099511627776", "blk.0.attn_q.weight"});
  // A head count and head size whose product overflows int64 is caught by division, not multiplied.
  expect_refused(rewrite("micro-qwen3moe-F16", "qwen3moe-overflow",
                         [](gguf::Metadata& md) {
                           md.set("qwen3moe.attention.head_count", gguf::Value::of_uint64(1ull << 40));
                           md.set("qwen3moe.attention.head_count_kv", gguf::Value::of_uint64(1ull << 40));
                           md.set("qwen3moe.attention.key_length", gguf::Value::of_uint64(1ull << 40));
                           md.set("qwen3moe.attention.value_length", gguf::Value::of_uint64(1ull << 40));
                         }),
                 {"'qwen3moe.attention.head_count' is 1099511627776", "blk.0.attn_q.weight"});
  expect_refused(with_key("micro-qwen3moe-F16", "qwen3moe.rope.dimension_count", gguf::Value::of_uint32(1u << 30)),
                 {"'qwen3moe.rope.dimension_count' is 1073741824", "at most the head size"});
}

TEST(HparamBounds, ExpertCountsAgainstRouterAndExpertShapes) {
  expect_load_refused(with_key("micro-qwen3moe-F16", "qwen3moe.expert_count", gguf::Value::of_uint32(1u << 20)),
                      {"'qwen3moe.expert_count' is 1048576", "blk.0.ffn_gate_inp.weight", "[128, 8]"});
  expect_load_refused(with_key("micro-qwen3moe-F16", "qwen3moe.expert_used_count", gguf::Value::of_uint32(0)),
                      {"'qwen3moe.expert_used_count' is 0", "at least 1"});
  expect_load_refused(with_key("micro-qwen3moe-F16", "qwen3moe.expert_used_count", gguf::Value::of_uint32(9)),
                      {"'qwen3moe.expert_used_count' is 9", "at most expert_count"});
  expect_load_refused(
      with_key("micro-qwen3moe-F16", "qwen3moe.expert_feed_forward_length", gguf::Value::of_uint32(1u << 30)),
      {"'qwen3moe.expert_feed_forward_length' is 1073741824", "blk.0.ffn_up_exps.weight", "[128, 128, 8]"});
  expect_load_refused(with_key("micro-gptoss-F16", "gpt-oss.expert_count", gguf::Value::of_uint32(4)),
                      {"'gpt-oss.expert_count' is 4", "blk.0.ffn_gate_inp.weight"});
}

// Mixtral files have no expert_feed_forward_length: feed_forward_length is the experts' width, checked against
// ffn_up_exps; in a dense model it is checked against ffn_up.
TEST(HparamBounds, FeedForwardLengthAgainstFfnShapes) {
  expect_load_refused(with_key("tiny-mixtral-Q4_0", "llama.feed_forward_length", gguf::Value::of_uint32(1u << 30)),
                      {"'llama.feed_forward_length' is 1073741824", "blk.0.ffn_up_exps.weight"});
  expect_load_refused(with_key("stories260K", "llama.feed_forward_length", gguf::Value::of_uint32(1u << 30)),
                      {"'llama.feed_forward_length' is 1073741824", "blk.0.ffn_up.weight", "[64, 172]"});
  // A Mixtral file with an expert width of its own: feed_forward_length sizes nothing (no dense block), so a
  // value that no tensor has is not used.
  const gguf::GgufModel f = gguf::GgufModel::open(rewrite("tiny-mixtral-Q4_0", "mixtral-own-expert-width",
                                                          [](gguf::Metadata& md) {
                                                            md.set("llama.expert_feed_forward_length",
                                                                   gguf::Value::of_uint32(512));
                                                            md.set("llama.feed_forward_length",
                                                                   gguf::Value::of_uint32(1u << 30));
                                                          }));
  EXPECT_EQ(load_model(f, ModelOptions{.n_ctx = 16})->info().n_expert, 8);
}

TEST(HparamBounds, SlidingWindowAtMostTheContext) {
  expect_load_refused(with_key("micro-gptoss-F16", "gpt-oss.attention.sliding_window", gguf::Value::of_uint32(1u << 30)),
                      {"'gpt-oss.attention.sliding_window' is 1073741824", "at most context_length"});
}

// A training context of 2^40 is the model's claim, not an allocation: the default context stays at most 4096.
TEST(HparamBounds, HugeTrainingContextDoesNotSizeTheDefaultKvCache) {
  const gguf::GgufModel f =
      gguf::GgufModel::open(with_key("stories260K", "llama.context_length", gguf::Value::of_uint64(1ull << 40)));
  const ArchSummary s = summarize(f);
  EXPECT_EQ(s.n_ctx_train, int64_t{1} << 40);
  EXPECT_EQ(default_context(s), kMaxDefaultContext);
  EXPECT_EQ(load_model(f)->info().n_ctx, kMaxDefaultContext);
}

// End to end: the CLI exits with the error, not a crash or "internal error:", and without sizing 10^6 layers.
TEST(HparamBounds, CliRefusesBlockCountWithTheKey) {
  const fs::path p = with_key("stories260K", "llama.block_count", gguf::Value::of_uint32(1000000));
  for (const std::string c : {"", " -c 8"}) {
    SCOPED_TRACE(c);
    const test::CliResult r = test::run_cli("run -m " + p.string() + " -p Hi -n 1" + c);
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_FALSE(r.signaled) << r.output;
    EXPECT_NE(r.output.find("'llama.block_count' is 1000000"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("internal error"), std::string::npos) << r.output;
  }
}

}  // namespace
}  // namespace moetier::model
