// Bad or missing tokenizer metadata fails at load with a message naming the key and what was expected.
#include <string>

#include <gtest/gtest.h>

#include "tokenizer/synthetic_vocab.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace moetier::test {
namespace {

// Runs from_metadata and returns the error message ("" when it did not throw).
std::string load_error(const gguf::Metadata& md) {
  try {
    (void)Tokenizer::from_metadata(md);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(MetadataErrors, UnknownPreTokenizerIsNamedWithTheSupportedList) {
  const std::string msg = load_error(bpe_metadata("no-such-pre"));
  EXPECT_NE(msg.find("'no-such-pre'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("tokenizer.ggml.pre"), std::string::npos) << msg;
  for (const char* name : {"qwen2", "gpt-2", "llama-bpe", "deepseek-llm", "deepseek-v3", "starcoder", "gpt-4o"}) {
    EXPECT_NE(msg.find(name), std::string::npos) << name << " missing from: " << msg;
  }
}

TEST(MetadataErrors, MissingPreTokenizerForBpe) {
  gguf::Metadata md = bpe_metadata("qwen2");
  md.erase("tokenizer.ggml.pre");
  EXPECT_NE(load_error(md).find("'tokenizer.ggml.pre' is missing"), std::string::npos) << load_error(md);
}

TEST(MetadataErrors, SentencePieceIgnoresPre) {
  gguf::Metadata md = spm_metadata({"\xE2\x96\x81"});
  md.set("tokenizer.ggml.pre", gguf::Value::of_string("default"));
  EXPECT_EQ(load_error(md), "");
}

TEST(MetadataErrors, UnknownModel) {
  gguf::Metadata md = spm_metadata({});
  md.set("tokenizer.ggml.model", gguf::Value::of_string("t5"));
  const std::string msg = load_error(md);
  EXPECT_NE(msg.find("'t5'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("tokenizer.ggml.model"), std::string::npos) << msg;
}

TEST(MetadataErrors, MissingKeys) {
  for (const char* key : {"tokenizer.ggml.model", "tokenizer.ggml.tokens"}) {
    gguf::Metadata md = spm_metadata({});
    md.erase(key);
    EXPECT_NE(load_error(md).find(key), std::string::npos) << key << ": " << load_error(md);
  }
  gguf::Metadata md = bpe_metadata("gpt-2");
  md.erase("tokenizer.ggml.merges");
  EXPECT_NE(load_error(md).find("tokenizer.ggml.merges"), std::string::npos) << load_error(md);
}

TEST(MetadataErrors, WrongTypesAndSizes) {
  gguf::Metadata md = spm_metadata({"a"});
  md.set("tokenizer.ggml.scores", gguf::Value::of_array(gguf::ValueType::FLOAT32, {gguf::Value::of_float32(0)}));
  EXPECT_NE(load_error(md).find("tokenizer.ggml.scores"), std::string::npos) << load_error(md);

  md = spm_metadata({"a"});
  md.set("tokenizer.ggml.tokens", gguf::Value::of_uint32(3));
  EXPECT_NE(load_error(md).find("tokenizer.ggml.tokens"), std::string::npos) << load_error(md);

  md = bpe_metadata("gpt-2");
  md.set("tokenizer.ggml.merges", string_array({"ab"}));
  EXPECT_NE(load_error(md).find("'left right'"), std::string::npos) << load_error(md);
}

TEST(MetadataErrors, TokenIdsOutOfRange) {
  gguf::Metadata md = spm_metadata({"a"});
  md.set("tokenizer.ggml.bos_token_id", gguf::Value::of_uint32(100000));
  const std::string msg = load_error(md);
  EXPECT_NE(msg.find("tokenizer.ggml.bos_token_id"), std::string::npos) << msg;

  // 0xFFFFFFFF is how converters write "none" (stories260K's padding id): not an error.
  md = spm_metadata({"a"});
  md.set("tokenizer.ggml.padding_token_id", gguf::Value::of_uint32(0xFFFFFFFFu));
  EXPECT_EQ(load_error(md), "");
}

TEST(MetadataErrors, AddBosWithoutBos) {
  gguf::Metadata md = bpe_metadata("gpt-2");
  md.set("tokenizer.ggml.add_bos_token", gguf::Value::of_bool(true));
  EXPECT_NE(load_error(md).find("bos_token_id"), std::string::npos) << load_error(md);
}

}  // namespace
}  // namespace moetier::test
