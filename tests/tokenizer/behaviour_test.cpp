// Tokenizer behaviour beyond the shared vectors: synthetic vocabs, special tokens, invalid input, decoding
// rules, thread safety and speed.
#include <chrono>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "gguf/gguf.h"
#include "test_support.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/synthetic_vocab.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace moetier::test {
namespace {

using tokenizer::byte_level_decode;
using tokenizer::byte_level_encode;

const Tokenizer& shared_vocab(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto& slot = cache[name];
  if (!slot) {
    const auto m = gguf::GgufModel::open(shared_dir() / "tokenizer" / (name + ".gguf"));
    slot = std::make_unique<Tokenizer>(Tokenizer::from_metadata(m.metadata()));
  }
  return *slot;
}

int32_t id_of(const Tokenizer& t, std::string_view text) {
  const auto id = t.find_token(text);
  EXPECT_TRUE(id.has_value()) << "no token '" << text << "'";
  return id.value_or(-1);
}

TEST(ByteLevel, AlphabetMatchesGpt2) {
  EXPECT_EQ(byte_level_encode(" "), "\xC4\xA0");   // Ġ
  EXPECT_EQ(byte_level_encode("\n"), "\xC4\x8A");  // Ċ
  EXPECT_EQ(byte_level_encode("a!~"), "a!~");
  EXPECT_EQ(byte_level_encode("\xAD"), "\xC5\x83");  // soft hyphen is the last remapped byte, U+0143
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  std::string back;
  byte_level_decode(byte_level_encode(all), back);
  EXPECT_EQ(back, all);
}

TEST(SentencePiece, MergesByScoreAndFallsBackToBytes) {
  // "▁ab" needs "ab" first (higher score than "▁a", which would block it).
  const auto tok = Tokenizer::from_metadata(spm_metadata({"\xE2\x96\x81", "ab", "\xE2\x96\x81" "ab", "a", "b",
                                                          "\xE2\x96\x81" "a"}));
  EXPECT_EQ(tok.kind(), "llama (SentencePiece)");
  const int32_t sp_ab = id_of(tok, "\xE2\x96\x81" "ab");
  EXPECT_EQ(tok.encode("ab", false, false), std::vector<int32_t>{sp_ab});
  EXPECT_EQ(tok.encode("ab", true, false), (std::vector<int32_t>{1, sp_ab}));
  // "é" is not in the vocab: its two bytes fall back to <0xC3> <0xA9> (ids 3 + byte).
  const auto ids = tok.encode("ab\xC3\xA9", false, false);
  EXPECT_EQ(ids, (std::vector<int32_t>{sp_ab, 3 + 0xC3, 3 + 0xA9}));
  EXPECT_EQ(tok.decode(ids), " ab\xC3\xA9");
  EXPECT_EQ(tok.decode(ids, {.strip_space_prefix = true}), "ab\xC3\xA9");
  EXPECT_EQ(tok.token_to_piece(3 + 0xC3), "\xC3");  // a partial UTF-8 sequence, for the streamer to buffer
  // Control tokens render only on request.
  EXPECT_EQ(tok.token_to_piece(1), "");
  EXPECT_EQ(tok.token_to_piece(1, true), "<s>");
  EXPECT_TRUE(tok.is_eog(2));
  EXPECT_FALSE(tok.is_eog(1));
}

TEST(SentencePiece, SpacePrefixAfterSpecialTokens) {
  const Tokenizer& tok = shared_vocab("ggml-vocab-llama-spm");
  // parse_special: "<s>" becomes BOS and the following text gets its own space prefix.
  const auto a = tok.encode("<s>Hello", false, true);
  const auto b = tok.encode("Hello", false, false);
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a[0], tok.bos());
  EXPECT_EQ(std::vector<int32_t>(a.begin() + 1, a.end()), b);
  // Without parse_special the same text is plain characters.
  const auto c = tok.encode("<s>Hello", false, false);
  EXPECT_NE(c[0], tok.bos());
  EXPECT_EQ(tok.decode(c, {.strip_space_prefix = true}), "<s>Hello");
}

TEST(BytePairEncoding, MergesByRank) {
  const auto tok = Tokenizer::from_metadata(bpe_metadata("gpt-2"));
  EXPECT_EQ(tok.kind(), "gpt2 (byte-level BPE, pre=gpt-2)");
  EXPECT_EQ(tok.encode("ab ab", false, false), (std::vector<int32_t>{2, 4}));
  EXPECT_EQ(tok.encode("ab ab<|endoftext|>", false, true), (std::vector<int32_t>{2, 4, 5}));
  EXPECT_EQ(tok.decode(std::vector<int32_t>{2, 4, 5}), "ab ab");
  EXPECT_EQ(tok.decode(std::vector<int32_t>{2, 4, 5}, {.render_special = true}), "ab ab<|endoftext|>");
  EXPECT_EQ(tok.bos(), -1);
  EXPECT_EQ(tok.eos(), 5);
  EXPECT_TRUE(tok.is_eog(5));
}

TEST(SpecialTokens, Qwen3) {
  const Tokenizer& tok = shared_vocab("qwen3-vocab");
  EXPECT_EQ(tok.kind(), "gpt2 (byte-level BPE, pre=qwen2)");
  const int32_t im_start = id_of(tok, "<|im_start|>");
  const int32_t im_end = id_of(tok, "<|im_end|>");
  const int32_t eot = id_of(tok, "<|endoftext|>");
  EXPECT_TRUE(tok.is_eog(im_end));
  EXPECT_TRUE(tok.is_eog(eot));
  EXPECT_FALSE(tok.is_eog(im_start));
  EXPECT_EQ(tok.eos(), im_end);
  EXPECT_FALSE(tok.add_bos());
  EXPECT_EQ(tok.encode("<|im_start|>user", false, true).front(), im_start);
  EXPECT_NE(tok.encode("<|im_start|>user", false, false).front(), im_start);
  // <think> is user-defined: recognised even without parse_special, and always rendered.
  const int32_t think = id_of(tok, "<think>");
  EXPECT_EQ(tok.encode("<think>", false, false), std::vector<int32_t>{think});
  EXPECT_EQ(tok.token_to_piece(think), "<think>");
  EXPECT_EQ(tok.token_to_piece(im_end), "");
  EXPECT_EQ(tok.token_to_piece(im_end, true), "<|im_end|>");
}

TEST(SpecialTokens, Phi3EndOfTurn) {
  const Tokenizer& tok = shared_vocab("ggml-vocab-phi-3");
  EXPECT_TRUE(tok.is_eog(id_of(tok, "<|end|>")));
  EXPECT_TRUE(tok.is_eog(id_of(tok, "<|endoftext|>")));
  EXPECT_FALSE(tok.is_eog(tok.bos()));
}

TEST(Robustness, InvalidUtf8RoundTrips) {
  const std::vector<std::string> inputs = {
      "\xFF", "a\xFE" "b", "\xC3", "caf\xC3", "\xED\xA0\x80 surrogate", "\xF4\x90\x80\x80 too big",
      "\xC0\xAF overlong", "\x80\x80\x80", std::string("nul\0byte", 8), "\xE4\xB8 truncated \xE4\xB8\xAD",
  };
  // Exact round trips need every byte to have a token of its own. DeepSeek-LLM's byte symbols for Latin-1
  // letters (e.g. byte 0xFF = "ÿ") are user-defined tokens, which render as their UTF-8 text; StarCoder's vocab
  // lacks the byte symbols of 0xC0, 0xC1 and 0xF5..0xFF (bytes valid UTF-8 never contains), which are dropped
  // as in the reference. Both still encode every input without error.
  for (const char* name : {"qwen3-vocab", "ggml-vocab-gpt-2", "ggml-vocab-deepseek-llm", "ggml-vocab-starcoder",
                           "ggml-vocab-llama-spm", "ggml-vocab-phi-3"}) {
    const Tokenizer& tok = shared_vocab(name);
    const bool lossless = std::string_view(name) != "ggml-vocab-deepseek-llm" &&
                          std::string_view(name) != "ggml-vocab-starcoder";
    for (const std::string& s : inputs) {
      std::vector<int32_t> ids;
      ASSERT_NO_THROW(ids = tok.encode(s, true, true)) << name;
      for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tok.n_vocab());
      if (lossless) EXPECT_EQ(tok.decode(tok.encode(s, false, false), {.strip_space_prefix = true}), s) << name;
    }
  }
}

TEST(Robustness, LongRunsAndEmptyInput) {
  const Tokenizer& tok = shared_vocab("qwen3-vocab");
  EXPECT_TRUE(tok.encode("", false, false).empty());
  EXPECT_TRUE(tok.encode("", true, true).empty());  // qwen3 adds no BOS
  EXPECT_EQ(shared_vocab("ggml-vocab-llama-spm").encode("", true, false), std::vector<int32_t>{1});
  // A very long whitespace run stresses the look-ahead alternatives (\s+(?!\S)) beyond the JIT stack.
  const std::string spaces(200000, ' ');
  const std::string text = "a" + spaces + "b\n" + std::string(100000, '\n') + "c";
  EXPECT_EQ(tok.decode(tok.encode(text, false, false)), text);
  const std::string word(100000, 'x');
  EXPECT_EQ(tok.decode(tok.encode(word, false, false)), word);
}

TEST(Robustness, BadIdsThrow) {
  const Tokenizer& tok = shared_vocab("ggml-vocab-gpt-2");
  EXPECT_THROW((void)tok.token_to_piece(-1), Error);
  EXPECT_THROW((void)tok.token_to_piece(tok.n_vocab()), Error);
  EXPECT_THROW((void)tok.decode(std::vector<int32_t>{0, 1 << 30}), Error);
}

TEST(Concurrency, EncodeFromManyThreads) {
  const Tokenizer& tok = shared_vocab("qwen3-vocab");
  const std::string text = "The quick brown fox jumps over the lazy dog. 12345 <|im_start|>user\n你好 \xF0\x9F\x98\x80";
  const auto expected = tok.encode(text, true, true);
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (size_t t = 0; t < ok.size(); ++t) {
    threads.emplace_back([&, t] {
      int good = 0;
      for (int i = 0; i < 200; ++i) good += tok.encode(text, true, true) == expected ? 1 : 0;
      ok[t] = good;
    });
  }
  for (auto& th : threads) th.join();
  for (int g : ok) EXPECT_EQ(g, 200);
}

// Loading Qwen3's vocab (151,669 tokens, 151,387 merges) must stay well under a second. The bound is loose
// because test machines are shared; the printed times are what to watch.
TEST(Performance, LoadQwen3Vocab) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto m = gguf::GgufModel::open(shared_dir() / "tokenizer" / "qwen3-vocab.gguf");
  const auto t1 = std::chrono::steady_clock::now();
  const Tokenizer tok = Tokenizer::from_metadata(m.metadata());
  const auto t2 = std::chrono::steady_clock::now();
  const double open_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  const double build_ms = std::chrono::duration<double, std::milli>(t2 - t1).count();
  std::cout << fmt::format("[ perf     ] qwen3 vocab: gguf open {:.1f} ms + tokenizer build {:.1f} ms\n", open_ms,
                           build_ms);
  EXPECT_EQ(tok.n_vocab(), 151669);
  EXPECT_LT(build_ms, 1000.0);
}

TEST(Performance, EncodeThroughput) {
  const Tokenizer& tok = shared_vocab("qwen3-vocab");
  std::string text;
  while (text.size() < (1u << 20)) {
    text += "Once upon a time, in a small house near the woods, there lived a kind old man. def f(x): return x**2\n"
            "中文测试：今天天气很好。 Русский текст.   \n";
  }
  const auto t0 = std::chrono::steady_clock::now();
  const auto ids = tok.encode(text, false, false);
  const auto t1 = std::chrono::steady_clock::now();
  const double ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  std::cout << fmt::format("[ perf     ] qwen3 encode of {} bytes: {} tokens in {:.1f} ms ({:.1f} MB/s)\n", text.size(),
                           ids.size(), ms, static_cast<double>(text.size()) / 1e3 / ms);
  EXPECT_EQ(tok.decode(ids), text);
}

}  // namespace
}  // namespace moetier::test
