// Small hand-made vocabularies as GGUF metadata, for tests that need to control every token.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "gguf/gguf.h"

namespace moetier::test {

inline gguf::Value string_array(const std::vector<std::string>& xs) {
  std::vector<gguf::Value> v;
  for (const auto& x : xs) v.push_back(gguf::Value::of_string(x));
  return gguf::Value::of_array(gguf::ValueType::STRING, std::move(v));
}

// SentencePiece: <unk> <s> </s>, the 256 byte tokens, then `pieces` with decreasing scores (earlier = merged
// first).
inline gguf::Metadata spm_metadata(const std::vector<std::string>& pieces) {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<gguf::Value> scores = {gguf::Value::of_float32(0), gguf::Value::of_float32(0),
                                     gguf::Value::of_float32(0)};
  std::vector<gguf::Value> types = {gguf::Value::of_int32(2), gguf::Value::of_int32(3), gguf::Value::of_int32(3)};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    tokens.emplace_back(buf);
    scores.push_back(gguf::Value::of_float32(0));
    types.push_back(gguf::Value::of_int32(6));
  }
  for (size_t i = 0; i < pieces.size(); ++i) {
    tokens.push_back(pieces[i]);
    scores.push_back(gguf::Value::of_float32(-static_cast<float>(i)));
    types.push_back(gguf::Value::of_int32(1));
  }
  gguf::Metadata md;
  md.set("tokenizer.ggml.model", gguf::Value::of_string("llama"));
  md.set("tokenizer.ggml.tokens", string_array(tokens));
  md.set("tokenizer.ggml.scores", gguf::Value::of_array(gguf::ValueType::FLOAT32, std::move(scores)));
  md.set("tokenizer.ggml.token_type", gguf::Value::of_array(gguf::ValueType::INT32, std::move(types)));
  md.set("tokenizer.ggml.bos_token_id", gguf::Value::of_uint32(1));
  md.set("tokenizer.ggml.eos_token_id", gguf::Value::of_uint32(2));
  md.set("tokenizer.ggml.unknown_token_id", gguf::Value::of_uint32(0));
  return md;
}

// Byte-level BPE over a few tokens; `pre` is tokenizer.ggml.pre.
inline gguf::Metadata bpe_metadata(const std::string& pre) {
  gguf::Metadata md;
  md.set("tokenizer.ggml.model", gguf::Value::of_string("gpt2"));
  md.set("tokenizer.ggml.pre", gguf::Value::of_string(pre));
  md.set("tokenizer.ggml.tokens", string_array({"a", "b", "ab", "\xC4\xA0", "\xC4\xA0" "ab", "<|endoftext|>"}));
  md.set("tokenizer.ggml.merges", string_array({"a b", "\xC4\xA0 ab"}));
  md.set("tokenizer.ggml.token_type",
         gguf::Value::of_array(gguf::ValueType::INT32,
                               {gguf::Value::of_int32(1), gguf::Value::of_int32(1), gguf::Value::of_int32(1),
                                gguf::Value::of_int32(1), gguf::Value::of_int32(1), gguf::Value::of_int32(3)}));
  md.set("tokenizer.ggml.eos_token_id", gguf::Value::of_uint32(5));
  return md;
}

// Gemma 4 style ("gemma4", SentencePiece-style BPE): <pad> <eos> <bos> <unk> <|turn> <turn|> <|tool_response>
// (control; <unk> unknown), </s> and <mark> (user-defined), the 256 byte tokens "<0xXX>", then `pieces` (normal);
// `merges` ("left right") in rank order. BOS is <bos> (id 2), EOS <eos> (id 1); tokenizer.ggml.pre is absent, as
// in the published Gemma 4 GGUFs.
inline gguf::Metadata gemma4_metadata(const std::vector<std::string>& pieces, const std::vector<std::string>& merges) {
  std::vector<std::string> tokens = {"<pad>", "<eos>", "<bos>", "<unk>", "<|turn>", "<turn|>", "<|tool_response>",
                                     "</s>",  "<mark>"};
  std::vector<gguf::Value> types;
  for (const int t : {3, 3, 3, 2, 3, 3, 3, 4, 4}) types.push_back(gguf::Value::of_int32(t));
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    tokens.emplace_back(buf);
    types.push_back(gguf::Value::of_int32(6));
  }
  for (const std::string& p : pieces) {
    tokens.push_back(p);
    types.push_back(gguf::Value::of_int32(1));
  }
  gguf::Metadata md;
  md.set("tokenizer.ggml.model", gguf::Value::of_string("gemma4"));
  md.set("tokenizer.ggml.tokens", string_array(tokens));
  md.set("tokenizer.ggml.token_type", gguf::Value::of_array(gguf::ValueType::INT32, std::move(types)));
  md.set("tokenizer.ggml.merges", string_array(merges));
  md.set("tokenizer.ggml.bos_token_id", gguf::Value::of_uint32(2));
  md.set("tokenizer.ggml.eos_token_id", gguf::Value::of_uint32(1));
  md.set("tokenizer.ggml.unknown_token_id", gguf::Value::of_uint32(3));
  md.set("tokenizer.ggml.padding_token_id", gguf::Value::of_uint32(0));
  return md;
}

}  // namespace moetier::test
