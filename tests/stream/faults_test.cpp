// Faults while streaming: an injected read failure and a model file truncated while in use end the forward pass
// with a moetier::Error naming the file and the offset, never with garbage logits; the store stays failed. A file
// written in place or replaced stops the run at the end of the forward pass that follows, naming the file.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <initializer_list>
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

// A copy of `name` under the build tree whose modification time is an hour old, as a model downloaded earlier
// is (file times have a coarse clock: a write right after the copy could keep the copy's time).
fs::path old_copy(const std::string& name, const std::string& file) {
  const fs::path copy = moetier::test::tmp_dir("stream_faults") / file;
  fs::copy_file(test::model_path(name), copy, fs::copy_options::overwrite_existing);
  fs::last_write_time(copy, fs::file_time_type::clock::now() - std::chrono::hours(1));
  return copy;
}

// `file` streamed with no cache. Dense weights go into anonymous memory first, so that a change to the file (a
// truncation could fault the mapping: SIGBUS) reaches only the streamed experts, as under a running engine.
std::unique_ptr<model::Model> load_streamed(const gguf::GgufModel& file) {
  StreamingOptions so;
  so.cache_bytes = 0;
  auto src = std::make_unique<StreamingExperts>(file, so);
  load_dense(file, src->files(), DensePolicy::anon);
  return model::load_model(file, model::ModelOptions{.n_ctx = 64}, std::move(src));
}

// The run after a change to `copy` fails with a message naming the file and containing each of `phrases`, and
// the store stays failed.
void expect_stopped(model::Model& m, const std::string& name, const fs::path& copy,
                    std::initializer_list<const char*> phrases) {
  const std::string msg = run_until_error(m, name);
  ASSERT_FALSE(msg.empty()) << "the change to " << copy << " went unnoticed";
  fmt::print("  error: {}\n", msg);
  EXPECT_NE(msg.find(copy.string()), std::string::npos) << msg;
  for (const char* p : phrases) EXPECT_NE(msg.find(p), std::string::npos) << msg;
  EXPECT_EQ(run_until_error(m, name), msg);
}

TEST(StreamFaults, TruncatedFileNamesFileAndOffset) {
  const std::string name = "tiny-mixtral-Q4_0";
  const fs::path copy = old_copy(name, "truncated.gguf");
  const auto file = gguf::GgufModel::open(copy);
  const auto m = load_streamed(file);
  fs::resize_file(copy, fs::file_size(copy) / 2);
  expect_stopped(*m, name, copy, {"at offset ", "truncated"});
}

// Bytes rewritten in place read back without error, so the store checks the files once per forward pass: the
// forward after the write fails naming the file.
TEST(StreamFaults, FileWrittenInPlaceStopsTheRun) {
  const std::string name = "tiny-qwen3moe-Q4_K_M";
  const fs::path copy = old_copy(name, "written.gguf");
  const auto file = gguf::GgufModel::open(copy);
  const auto m = load_streamed(file);
  ASSERT_EQ(run_until_error(*m, name), "") << "the unchanged file must run";
  {
    std::fstream f(copy, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(copy) / 2));
    const char junk[64] = {};
    f.write(junk, sizeof(junk));
  }
  expect_stopped(*m, name, copy, {"was written to"});
}

// A new file renamed over the model (an update) leaves the old one readable through the open descriptors; the run
// still stops, since the path now names other weights.
TEST(StreamFaults, FileReplacedStopsTheRun) {
  const std::string name = "tiny-mixtral-Q4_0";
  const fs::path copy = old_copy(name, "replaced.gguf");
  const auto file = gguf::GgufModel::open(copy);
  const auto m = load_streamed(file);
  ASSERT_EQ(run_until_error(*m, name), "") << "the unchanged file must run";
  fs::rename(old_copy(name, "replaced.gguf.new"), copy);
  expect_stopped(*m, name, copy, {"was replaced"});
}

}  // namespace
}  // namespace moetier::moe
