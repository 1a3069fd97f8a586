// Bad input fails at load with a sentence naming what is wrong: an unsupported architecture lists the supported
// ones, a mis-shaped tensor names itself with expected and found shapes, a missing key names the key.
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>

#include <gtest/gtest.h>

#include "gguf/gguf.h"
#include "model/model.h"
#include "model/model_rewrite.h"
#include "test_support.h"
#include "util/error.h"

namespace moetier::model {
namespace {

namespace fs = std::filesystem;

// stories260K.gguf rewritten into `out_name` with `edit_md` applied and, for the tensor `shrink`, half its rows.
fs::path rewrite(const std::string& out_name, const std::function<void(gguf::Metadata&)>& edit_md,
                 const std::string& shrink = "") {
  return test::rewrite_model(test::oracle_dir() / "models" / "stories260K.gguf", "model_load_errors", out_name,
                             edit_md, shrink);
}
using test::load_error;

TEST(LoadErrors, UnsupportedArchitectureListsSupported) {
  const fs::path p = rewrite("arch.gguf", [](gguf::Metadata& md) {
    md.set("general.architecture", gguf::Value::of_string("mamba9"));
  });
  const std::string msg = load_error(p);
  EXPECT_NE(msg.find("unsupported architecture 'mamba9'"), std::string::npos) << msg;
  for (const char* a : {"llama", "qwen3moe", "gpt-oss", "gemma4", "qwen35moe"})
    EXPECT_NE(msg.find(a), std::string::npos) << msg;
}

TEST(LoadErrors, WrongTensorShapeNamesTensorExpectedAndFound) {
  const fs::path p = rewrite("shape.gguf", [](gguf::Metadata&) {}, "blk.0.attn_k.weight");
  const std::string msg = load_error(p);
  EXPECT_NE(msg.find("blk.0.attn_k.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[64, 16]"), std::string::npos) << msg;  // found
  EXPECT_NE(msg.find("[64, 32]"), std::string::npos) << msg;  // expected
}

TEST(LoadErrors, MissingKeyIsNamed) {
  const fs::path p = rewrite("key.gguf", [](gguf::Metadata& md) { md.erase("llama.block_count"); });
  const std::string msg = load_error(p);
  EXPECT_NE(msg.find("llama.block_count"), std::string::npos) << msg;
}

TEST(LoadErrors, ExpertOverrideOutOfRange) {
  const gguf::GgufModel f = gguf::GgufModel::open(test::oracle_dir() / "models" / "micro-qwen3moe-F16.gguf");
  try {
    load_model(f, ModelOptions{.n_ctx = 64, .n_expert_used = 9});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("1..8"), std::string::npos) << e.what();
  }
}

TEST(LoadErrors, TokenOutsideVocabulary) {
  const gguf::GgufModel f = gguf::GgufModel::open(test::oracle_dir() / "models" / "stories260K.gguf");
  const auto m = load_model(f, ModelOptions{.n_ctx = 64});
  std::vector<float> logits(512);
  const int32_t bad = 512;
  EXPECT_THROW(m->forward(std::span<const int32_t>(&bad, 1), 0, logits, LogitsMode::last), Error);
}

}  // namespace
}  // namespace moetier::model
