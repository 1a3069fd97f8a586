// Faults while streaming: an injected read failure and a model file truncated while in use end the forward pass
// with a moetier::Error naming the file and the offset, never with garbage logits; the store stays failed. A file
// written in place or replaced stops the run at the end of the forward pass that follows, naming the file.
#include <chrono>
#include <filesystem>
#include <fstream>
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

// A copy of `name` under the build tree whose modification time is an hour old, as a model downloaded earlier
// is (file times have a coarse clock: a write right after the copy could keep the copy's time).
fs::path old_copy(const std::string& name, const std::string& file) {
  const fs::path copy = moetier::test::tmp_dir("stream_faults") / file;
  fs::copy_file(test::model_path(name), copy, fs::copy_options::overwrite_existing);
  fs::last_write_time(copy, fs::file_time_type::clock::now() - std::chrono::hours(1));
  return copy;
}

// Bytes rewritten in place read back without error, so the store checks the files once per forward pass: the
// forward after the write fails naming the file, and the store stays failed.
TEST(StreamFaults, FileWrittenInPlaceStopsTheRun) {
  const std::string name = "tiny-qwen3moe-Q4_K_M";
  const fs::path copy = old_copy(name, "written.gguf");
  const auto file = gguf::GgufModel::open(copy);
  StreamingOptions so;
  so.cache_bytes = 0;
  auto src = std::make_unique<StreamingExperts>(file, so);
  load_dense(file, src->files(), DensePolicy::anon);
  const auto m = model::load_model(file, model::ModelOptions{.n_ctx = 64}, std::move(src));
  ASSERT_EQ(run_until_error(*m, name), "") << "the unchanged file must run";
  {
    std::fstream f(copy, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(copy) / 2));
    const char junk[64] = {};
    f.write(junk, sizeof(junk));
  }
  const std::string msg = run_until_error(*m, name);
  ASSERT_FALSE(msg.empty()) << "a write in place went unnoticed";
  fmt::print("  error: {}\n", msg);
  EXPECT_NE(msg.find(copy.string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("was written to"), std::string::npos) << msg;
  EXPECT_EQ(run_until_error(*m, name), msg);
}

// A new file renamed over the model (an update) leaves the old one readable through the open descriptors; the run
// still stops, since the path now names other weights.
TEST(StreamFaults, FileReplacedStopsTheRun) {
  const std::string name = "tiny-mixtral-Q4_0";
  const fs::path copy = old_copy(name, "replaced.gguf");
  const auto file = gguf::GgufModel::open(copy);
  StreamingOptions so;
  so.cache_bytes = 0;
  auto src = std::make_unique<StreamingExperts>(file, so);
  const auto m = model::load_model(file, model::ModelOptions{.n_ctx = 64}, std::move(src));
  ASSERT_EQ(run_until_error(*m, name), "") << "the unchanged file must run";
  const fs::path update = old_copy(name, "replaced.gguf.new");
  fs::rename(update, copy);
  const std::string msg = run_until_error(*m, name);
  ASSERT_FALSE(msg.empty()) << "the replaced file went unnoticed";
  fmt::print("  error: {}\n", msg);
  EXPECT_NE(msg.find(copy.string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("was replaced"), std::string::npos) << msg;
}

}  // namespace
}  // namespace moetier::moe
