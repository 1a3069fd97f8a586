// Gemma 4's tokenizer (tokenizer.ggml.model "gemma4") on a small synthetic vocab.
//
// No reference vectors exist yet for this tokenizer (../shared/tokenizer has none; gemma3-vocab is the SentencePiece
// Gemma 3 vocab). The rules checked here come from the reference source, llama.cpp src/llama-vocab.cpp: the
// "gemma4" branch of llama_vocab::impl::load (merges, pre forced to "gemma4", escape_whitespaces, add_bos forced
// on, "</s>" out of the end-of-generation set and re-typed normal), llm_tokenizer_bpe's LLAMA_VOCAB_PRE_TYPE_GEMMA4
// case (regex `[^\n]+|[\n]+`, byte_encode = false), llm_tokenizer_bpe_session::tokenize (newline-only chunk that is
// a token emitted whole, "<0xXX>" byte fallback with missing bytes dropped) and token_to_piece (BPE with
// escape_whitespaces: "▁" back to spaces, byte tokens to bytes). Every expectation below is derived by hand from
// those rules and the merge list of the vocab.
#include <gtest/gtest.h>

#include <cstdio>
#include <initializer_list>
#include <string>
#include <vector>

#include "tokenizer/synthetic_vocab.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace moetier::test {
namespace {

const std::string kSp = "\xE2\x96\x81";  // U+2581 "▁"

// Merges in rank order. The ranks make order visible: "b c" (0) before "a b" (1), so "abc" becomes a + bc and then
// abc; "▁ ab" (3) after both of them; "c c" yields "cc", which is not a token; "a \n" would join across a newline.
const std::vector<std::string> kMerges = {
    "b c", "a b", "a bc", kSp + " ab", kSp + " a", "a a", "c c", "a \n", kSp + " b",
};
const std::vector<std::string> kPieces = {
    kSp, "a", "b", "c", "ab", "bc", "abc", kSp + "ab", kSp + "a", "aa", "a\n", kSp + "b", "\n", "\n\n", "cab",
};

gguf::Metadata gemma4_test_metadata() { return gemma4_metadata(kPieces, kMerges); }

const Tokenizer& gemma4() {
  static const Tokenizer tok = Tokenizer::from_metadata(gemma4_test_metadata());
  return tok;
}

int32_t id(std::string_view text) {
  const auto found = gemma4().find_token(text);
  EXPECT_TRUE(found.has_value()) << "no token '" << text << "'";
  return found.value_or(-1);
}

// The "<0xXX>" byte tokens of every byte of `s`.
std::vector<int32_t> bytes(std::string_view s) {
  std::vector<int32_t> out;
  for (const char c : s) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", static_cast<unsigned char>(c));
    out.push_back(id(buf));
  }
  return out;
}

std::vector<int32_t> cat(std::initializer_list<std::vector<int32_t>> parts) {
  std::vector<int32_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

std::vector<int32_t> enc(std::string_view text, bool parse_special = false) {
  return gemma4().encode(text, false, parse_special);
}

std::string load_error(const gguf::Metadata& md) {
  try {
    (void)Tokenizer::from_metadata(md);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Gemma4Tokenizer, KindAndPreIsIgnored) {
  EXPECT_EQ(gemma4().kind(), "gemma4 (SentencePiece-style BPE)");
  // The reference forces tokenizer.ggml.pre to "gemma4" for this model: any stored value loads the same way.
  gguf::Metadata md = gemma4_test_metadata();
  md.set("tokenizer.ggml.pre", gguf::Value::of_string("no-such-pre"));
  const Tokenizer tok = Tokenizer::from_metadata(md);
  EXPECT_EQ(tok.kind(), "gemma4 (SentencePiece-style BPE)");
  EXPECT_EQ(tok.encode("ab ab", false, false), enc("ab ab"));
}

TEST(Gemma4Tokenizer, SpacesAreEscapedWithoutPrefix) {
  EXPECT_EQ(enc("a"), (std::vector<int32_t>{id("a")}));  // no "▁" prefix, unlike SentencePiece
  EXPECT_EQ(enc(" a"), (std::vector<int32_t>{id(kSp + "a")}));
  EXPECT_EQ(enc("a b"), (std::vector<int32_t>{id("a"), id(kSp + "b")}));
  EXPECT_EQ(enc("a  b"), (std::vector<int32_t>{id("a"), id(kSp), id(kSp + "b")}));  // "▁▁" has no merge
  // A space prefix is not added even where the file asks for one.
  gguf::Metadata md = gemma4_test_metadata();
  md.set("tokenizer.ggml.add_space_prefix", gguf::Value::of_bool(true));
  EXPECT_EQ(Tokenizer::from_metadata(md).encode("a", false, false), (std::vector<int32_t>{id("a")}));
}

TEST(Gemma4Tokenizer, MergesLowestRankFirstTiesLeftmost) {
  // "b c" (rank 0) before "a b" (rank 1): a + bc, then "a bc" -> abc. Leftmost-first would stop at ab + c.
  EXPECT_EQ(enc("abc"), (std::vector<int32_t>{id("abc")}));
  // Two "a a" pairs of equal rank: the leftmost merges, leaving aa + a.
  EXPECT_EQ(enc("aaa"), (std::vector<int32_t>{id("aa"), id("a")}));
  // "ab▁ab": both "a b" (rank 1) before "▁ a" (rank 4); then "▁ ab" (rank 3) joins the second pair.
  EXPECT_EQ(enc("ab ab"), (std::vector<int32_t>{id("ab"), id(kSp + "ab")}));
}

TEST(Gemma4Tokenizer, OnlyNewlineChunksAreTakenWhole) {
  // "cab" is a token, but a non-newline chunk is merged like any other: c + ab.
  EXPECT_EQ(enc("cab"), (std::vector<int32_t>{id("c"), id("ab")}));
  // "\n\n" has no merge, yet is a token: a newline-only chunk that is a token is emitted whole.
  EXPECT_EQ(enc("\n\n"), (std::vector<int32_t>{id("\n\n")}));
  // "\n\n\n" is not a token: it goes through the merge loop, which has nothing to merge.
  EXPECT_EQ(enc("\n\n\n"), (std::vector<int32_t>{id("\n"), id("\n"), id("\n")}));
}

TEST(Gemma4Tokenizer, NewlineRunsAreSplitOff) {
  // Without the split "a \n" would merge into the token "a\n".
  EXPECT_EQ(enc("a\nb"), (std::vector<int32_t>{id("a"), id("\n"), id("b")}));
  EXPECT_EQ(enc("a\n\nb"), (std::vector<int32_t>{id("a"), id("\n\n"), id("b")}));
  // Only '\n' splits: "\r" stays with the text before it (and falls back to its byte).
  EXPECT_EQ(enc("a\r\nb"), cat({{id("a")}, bytes("\r"), {id("\n"), id("b")}}));
  EXPECT_EQ(enc("ab\n ab"), (std::vector<int32_t>{id("ab"), id("\n"), id(kSp + "ab")}));
}

TEST(Gemma4Tokenizer, ByteFallback) {
  // "ü" (C3 BC) has no token: its bytes.
  EXPECT_EQ(enc("a\xC3\xBC"), cat({{id("a")}, bytes("\xC3\xBC")}));
  // "cc" is a merge result but not a token: the bytes of the whole symbol, not c + c.
  EXPECT_EQ(enc("cc"), bytes("cc"));
  // Invalid UTF-8: each invalid byte is its own symbol and byte token.
  EXPECT_EQ(enc("\xFF"
                "a"),
            cat({bytes("\xFF"), {id("a")}}));
  // A byte whose "<0xXX>" token the vocab lacks is dropped, as in the reference.
  gguf::Metadata md = gemma4_test_metadata();
  std::vector<std::string> tokens = md.get_string_array("tokenizer.ggml.tokens");
  for (std::string& t : tokens) {
    if (t == "<0xBC>") t = "[no byte BC]";
  }
  md.set("tokenizer.ggml.tokens", string_array(tokens));
  EXPECT_EQ(Tokenizer::from_metadata(md).encode("a\xC3\xBC", false, false), cat({{id("a")}, bytes("\xC3")}));
}

TEST(Gemma4Tokenizer, BosIsAlwaysAdded) {
  EXPECT_TRUE(gemma4().add_bos());
  EXPECT_EQ(gemma4().bos(), id("<bos>"));
  EXPECT_EQ(gemma4().encode("a", true, false), (std::vector<int32_t>{id("<bos>"), id("a")}));
  EXPECT_EQ(gemma4().encode("", true, false), (std::vector<int32_t>{id("<bos>")}));
  EXPECT_EQ(gemma4().encode("a", false, false), (std::vector<int32_t>{id("a")}));
  // The reference overrides tokenizer.ggml.add_bos_token = false for Gemma 4.
  gguf::Metadata md = gemma4_test_metadata();
  md.set("tokenizer.ggml.add_bos_token", gguf::Value::of_bool(false));
  const Tokenizer tok = Tokenizer::from_metadata(md);
  EXPECT_TRUE(tok.add_bos());
  EXPECT_EQ(tok.encode("a", true, false), (std::vector<int32_t>{id("<bos>"), id("a")}));
}

TEST(Gemma4Tokenizer, SpecialTokensAreSplitOut) {
  const int32_t turn = id("<|turn>"), turn_end = id("<turn|>");
  // No space prefix after a special token either.
  EXPECT_EQ(enc("<|turn>ab<turn|>", true), (std::vector<int32_t>{turn, id("ab"), turn_end}));
  EXPECT_EQ(enc("<|turn> a", true), (std::vector<int32_t>{turn, id(kSp + "a")}));
  // Control tokens are text without parse_special.
  EXPECT_EQ(enc("<|turn>ab", false), cat({bytes("<|turn>"), {id("ab")}}));
  // User-defined tokens are cut out in both modes.
  EXPECT_EQ(enc("a<mark>b", false), (std::vector<int32_t>{id("a"), id("<mark>"), id("b")}));
  // "</s>" is text in Gemma 4: re-typed normal, it is not cut out even with parse_special.
  EXPECT_EQ(enc("</s>", true), bytes("</s>"));
}

TEST(Gemma4Tokenizer, EndOfGeneration) {
  for (const char* t : {"<eos>", "<turn|>", "<|tool_response>"}) EXPECT_TRUE(gemma4().is_eog(id(t))) << t;
  for (const char* t : {"</s>", "<bos>", "<|turn>", "<mark>"}) EXPECT_FALSE(gemma4().is_eog(id(t))) << t;
}

TEST(Gemma4Tokenizer, DecodeRoundTrip) {
  EXPECT_EQ(gemma4().token_to_piece(id(kSp + "ab")), " ab");
  EXPECT_EQ(gemma4().token_to_piece(id("\n\n")), "\n\n");
  EXPECT_EQ(gemma4().token_to_piece(id("<0xC3>")), "\xC3");  // half a character, for the streamer to buffer
  EXPECT_EQ(gemma4().token_to_piece(id("</s>")), "</s>");
  EXPECT_EQ(gemma4().token_to_piece(id("<mark>")), "<mark>");
  EXPECT_EQ(gemma4().token_to_piece(id("<turn|>")), "");
  EXPECT_EQ(gemma4().token_to_piece(id("<turn|>"), true), "<turn|>");

  for (const std::string text : {"ab ab\n\naaa cab \xC3\xBC\r\n  cc", " leading and trailing ", "\n\n\n\n x\n",
                                 "a<mark>b</s>", "\xFF\xFE bytes \xE4\xB8"}) {
    const auto ids = enc(text);
    EXPECT_EQ(gemma4().decode(ids), text);
    // Encoding adds no space prefix, so there is none to strip.
    EXPECT_EQ(gemma4().decode(ids, {.strip_space_prefix = true}), text);
  }
  const auto ids = gemma4().encode("<|turn>ab ab<turn|>", true, true);
  EXPECT_EQ(gemma4().decode(ids), "ab ab");
  EXPECT_EQ(gemma4().decode(ids, {.render_special = true}), "<bos><|turn>ab ab<turn|>");
}

TEST(Gemma4Tokenizer, LoadErrors) {
  gguf::Metadata md = gemma4_test_metadata();
  md.erase("tokenizer.ggml.merges");
  const std::string merges = load_error(md);
  EXPECT_NE(merges.find("tokenizer.ggml.merges"), std::string::npos) << merges;
  EXPECT_NE(merges.find("'gemma4'"), std::string::npos) << merges;

  md = gemma4_test_metadata();
  md.erase("tokenizer.ggml.bos_token_id");
  EXPECT_NE(load_error(md).find("bos_token_id"), std::string::npos) << load_error(md);

  // An unknown model still fails, naming the value and every supported kind.
  md = gemma4_test_metadata();
  md.set("tokenizer.ggml.model", gguf::Value::of_string("gemma5"));
  const std::string unknown = load_error(md);
  EXPECT_NE(unknown.find("tokenizer.ggml.model"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("'gemma5'"), std::string::npos) << unknown;
  for (const char* kind : {"'llama'", "'gpt2'", "'gemma4'"}) {
    EXPECT_NE(unknown.find(kind), std::string::npos) << kind << " missing from: " << unknown;
  }
}

}  // namespace
}  // namespace moetier::test
