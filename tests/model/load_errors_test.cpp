// Bad input fails at load with a sentence naming what is wrong: an unsupported architecture lists the supported
// ones, a mis-shaped tensor names itself with expected and found shapes, a missing key names the key.
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>

#include <gtest/gtest.h>

#include "gguf/gguf.h"
#include "gguf/writer.h"
#include "model/model.h"
#include "test_support.h"
#include "util/error.h"

namespace moetier::model {
namespace {

namespace fs = std::filesystem;

// Rewrites stories260K.gguf into `out` with `edit_md` applied to the metadata and, for the tensor named
// `shrink`, only half of its rows declared and written.
fs::path rewrite(const std::string& out_name, const std::function<void(gguf::Metadata&)>& edit_md,
                 const std::string& shrink = "") {
  const gguf::GgufModel src = gguf::GgufModel::open(test::oracle_dir() / "models" / "stories260K.gguf");
  const fs::path out = test::tmp_dir("model_load_errors") / out_name;
  gguf::GgufWriter w(out);
  gguf::Metadata md = src.metadata();
  edit_md(md);
  w.set_metadata(md);
  for (const auto& t : src.tensors()) {
    gguf::TensorSpec spec{t.name, t.type, std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims)};
    if (t.name == shrink) spec.ne[1] /= 2;
    w.add_tensor(spec);
  }
  for (const auto& t : src.tensors()) {
    const uint64_t n = t.name == shrink ? t.n_bytes / 2 : t.n_bytes;
    w.write_tensor_data(std::span<const uint8_t>(t.data, n));
  }
  w.finish();
  return out;
}

std::string load_error(const fs::path& p) {
  const gguf::GgufModel f = gguf::GgufModel::open(p);
  try {
    load_model(f, ModelOptions{.n_ctx = 64});
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

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
