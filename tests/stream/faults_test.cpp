// Faults while streaming: an injected read failure and a model file truncated while in use end the forward pass
// with a moetier::Error naming the file and the offset, never with garbage logits; the store stays failed.
#include <filesystem>
#include <memory>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "moe/dense_weights.h"
#include "moe/streaming_experts.h"
#include "stream_test_util.h"
#include "util/error.h"

namespace moetier::moe {
namespace {

namespace fs = std::filesystem;

// Runs the p1 prompt; returns the Error's message, or "" when the run succeeded.
std::string run_until_error(model::Model& m, const std::string& name) {
  const auto t = test::oracle_tokens(name, "p1", 2);
  try {
    model::evaluate(m, t.tokens, t.n_prefill);
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

TEST(StreamFaults, InjectedReadFailureNamesFileAndOffset) {
  for (const auto engine : {io::EngineKind::pread_pool, io::EngineKind::uring}) {
    for (const bool overlap : {true, false}) {
      const fs::path path = test::model_path("tiny-qwen3moe-Q4_K_M");
      const auto file = gguf::GgufModel::open(path);
      StreamingOptions so;
      so.cache_bytes = 0;
      so.engine = engine;
      so.overlap = overlap;
      so.fail_read = 7;
      auto src = std::make_unique<StreamingExperts>(file, so);
      StreamingExperts* s = src.get();
      const auto m = model::load_model(file, model::ModelOptions{.n_ctx = 64}, std::move(src));
      const std::string msg = run_until_error(*m, "tiny-qwen3moe-Q4_K_M");
      ASSERT_FALSE(msg.empty()) << "the injected failure went unnoticed";
      fmt::print("  error: {}\n", msg);
      EXPECT_NE(msg.find(path.string()), std::string::npos) << msg;
      EXPECT_NE(msg.find("at offset "), std::string::npos) << msg;
      EXPECT_NE(msg.find("Input/output error"), std::string::npos) << msg;
      // Later fetches refuse to run on a cache that may hold partial reads.
      EXPECT_EQ(run_until_error(*m, "tiny-qwen3moe-Q4_K_M"), msg);
      EXPECT_EQ(s->engine().outstanding(), 0u);
    }
  }
}

TEST(StreamFaults, TruncatedFileNamesFileAndOffset) {
  const std::string name = "tiny-mixtral-Q4_0";
  const fs::path copy = moetier::test::tmp_dir("stream_faults") / "truncated.gguf";
  fs::copy_file(test::model_path(name), copy, fs::copy_options::overwrite_existing);
  const auto file = gguf::GgufModel::open(copy);
  StreamingOptions so;
  so.cache_bytes = 0;
  auto src = std::make_unique<StreamingExperts>(file, so);
  // Dense weights into anonymous memory first, so that the truncation cannot fault the mapping (SIGBUS): only
  // the streamed experts see it, as with a file truncated under a running engine.
  load_dense(file, src->files(), DensePolicy::anon);
  const auto m = model::load_model(file, model::ModelOptions{.n_ctx = 64}, std::move(src));
  fs::resize_file(copy, fs::file_size(copy) / 2);
  const std::string msg = run_until_error(*m, name);
  ASSERT_FALSE(msg.empty()) << "reads past the truncation went unnoticed";
  fmt::print("  error: {}\n", msg);
  EXPECT_NE(msg.find(copy.string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("at offset "), std::string::npos) << msg;
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
}

}  // namespace
}  // namespace moetier::moe
